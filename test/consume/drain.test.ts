/**
 * consume() for a run with an end, against real sqld: stopping once the queue is drained (an idle
 * run costs two claims), at its deadline (a handler still running has its lease released, its
 * attempt not spent), retries left to the next run, options that cannot fit the budget refused, and
 * a summary that accounts for every lease when the database goes away mid-run.
 */
import { afterEach, describe, expect, inject, it } from "vitest";
import { type Proxy as FaultProxy, startProxy } from "../../scripts/support/proxy.js";
import { sqldNamespaces } from "../../src/core/databases.js";
import { clientOf } from "../../src/core/internals.js";
import {
  type ConsumeSummary,
  consume,
  drain,
  type Lease,
  LibsqlTransport,
  QueueError,
  ShardedQueue,
  type TransportOptions,
} from "../../src/index.js";
import { checkInvariants, resetDatabase } from "../support/db.js";

/** Text only a claim statement carries, once per claim (src/core/sql/claim.ts). */
const CLAIM = "tq_claimed_at AS stamp, tq_trace AS trace";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

/** A fresh queue on the shared sqld, through a proxy that counts claims (and can stop the database). */
async function fresh(
  options: TransportOptions = {},
): Promise<{ t: LibsqlTransport; proxy: FaultProxy; claims: () => number }> {
  const proxy = await startProxy(Number(new URL(inject("sqldUrl")).port));
  cleanups.push(() => proxy.close());
  const t = await LibsqlTransport.create(proxy.url, options);
  cleanups.push(() => t.close());
  await resetDatabase(clientOf(t));
  let claims = 0;
  proxy.observe = (text) => {
    claims += text.split(CLAIM).length - 1;
  };
  return { t, proxy, claims: () => claims };
}

/** A promise and its resolver. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, opened };
}

describe("until drained", () => {
  it("handles everything (FIFO per group), then stops before its budget with nothing left leased", async () => {
    const { t } = await fresh();
    const published = await t.publishMany(
      Array.from({ length: 40 }, (_, i) => ({ groupId: `g${i % 4}`, event: { i } })),
    );
    const handled: { seq: number; group: string }[] = [];
    const summary = await drain<{ i: number }>(
      t,
      async (_e, lease) => {
        await new Promise((r) => setTimeout(r, lease.seq % 3));
        handled.push({ seq: lease.seq, group: lease.groupId });
      },
      { workerId: "cron", concurrency: 4, budgetMs: 60_000 },
    );
    expect(summary).toMatchObject({
      stopped: "drained",
      claimed: 40,
      handled: 40,
      acked: 40,
      settleFailed: 0,
      leftLeased: [],
      claimsUnanswered: 0,
    });
    expect(handled.map((h) => h.seq).sort((a, b) => a - b)).toEqual(published);
    for (const g of ["g0", "g1", "g2", "g3"]) {
      const seqs = handled.filter((h) => h.group === g).map((h) => h.seq);
      expect(seqs, `FIFO in ${g}`).toEqual([...seqs].sort((a, b) => a - b));
    }
    const stats = await t.stats();
    expect({ inFlight: stats.inFlight, groups: stats.groups }).toEqual({ inFlight: 0, groups: 0 });
    await checkInvariants(clientOf(t));
  });

  it("an idle run costs two claims, one with no idle grace", async () => {
    const { t, claims } = await fresh();
    const handler = () => {};
    expect(await drain(t, handler, { workerId: "idle", concurrency: 16, budgetMs: 30_000 })).toMatchObject({
      stopped: "drained",
      claimed: 0,
    });
    expect(claims()).toBe(2);
    await consume(t, handler, { workerId: "idle", until: "drained", idleGraceMs: 0 });
    expect(claims()).toBe(3);
  });

  it("a message published during the idle grace is handled before it stops", async () => {
    const { t } = await fresh();
    let handled = 0;
    const run = drain(t, () => void handled++, { workerId: "late", idleGraceMs: 500, budgetMs: 30_000 });
    await new Promise((r) => setTimeout(r, 100));
    await t.publish("g", { late: true });
    expect(await run).toMatchObject({ stopped: "drained", claimed: 1, acked: 1 });
    expect(handled).toBe(1);
  });
});

describe("until drained, on a ShardedQueue", () => {
  /** Three fresh shards, each through a proxy of its own that counts its claims. */
  async function threeShards(): Promise<{ sharded: ShardedQueue; proxies: FaultProxy[]; claims: () => number[] }> {
    const provider = sqldNamespaces({ url: inject("nsSqldUrl"), adminUrl: inject("nsAdminUrl") });
    const names = [0, 1, 2].map((i) => `drain-${process.pid}-${Date.now().toString(36)}-${i}`);
    for (const n of names) await provider.create(n);
    cleanups.push(() => Promise.all(names.map((n) => provider.drop(n).catch(() => false))));
    const counts = names.map(() => 0);
    const proxies = await Promise.all(
      names.map(async (_, i) => {
        const proxy = await startProxy(Number(new URL(inject("nsSqldUrl")).port));
        cleanups.push(() => proxy.close());
        proxy.observe = (text) => {
          counts[i] = (counts[i] as number) + text.split(CLAIM).length - 1;
        };
        return proxy;
      }),
    );
    const shards = await Promise.all(
      names.map((namespace, i) => LibsqlTransport.create((proxies[i] as FaultProxy).url, { namespace })),
    );
    const sharded = new ShardedQueue(shards);
    cleanups.push(() => sharded.close());
    return { sharded, proxies, claims: () => [...counts] };
  }

  it("drains every shard, then an idle run costs each shard two claims", async () => {
    const { sharded, claims } = await threeShards();
    await sharded.publishMany(Array.from({ length: 30 }, (_, i) => ({ groupId: `g${i % 9}`, event: { i } })));
    const first = await drain(sharded, () => {}, { workerId: "shards", concurrency: 6, budgetMs: 30_000 });
    expect(first).toMatchObject({ stopped: "drained", claimed: 30, acked: 30, leftLeased: [] });
    expect((await sharded.stats()).groups).toBe(0);
    const before = claims();
    expect(await drain(sharded, () => {}, { workerId: "shards", concurrency: 6, budgetMs: 30_000 })).toMatchObject({
      stopped: "drained",
      claimed: 0,
    });
    expect(claims().map((n, i) => n - (before[i] as number))).toEqual([2, 2, 2]);
  });

  it("an idle run costs each shard two claims when one answers long after the others", async () => {
    const { sharded, proxies, claims } = await threeShards();
    // Far longer than the idle pause between a lane's claims (IDLE_POLL): the fast shards wait for it.
    (proxies[2] as FaultProxy).latencyMs = 400;
    expect(await drain(sharded, () => {}, { workerId: "slow", concurrency: 6, budgetMs: 30_000 })).toMatchObject({
      stopped: "drained",
      claimed: 0,
    });
    expect(claims()).toEqual([2, 2, 2]);
  });
});

describe("a deadline", () => {
  it("releases the lease of a handler still running (its attempt not spent), aborts its signal, and resolves by then", async () => {
    const { t } = await fresh();
    await t.publishMany([
      { groupId: "slow", event: {} },
      { groupId: "quick", event: {} },
    ]);
    let reason: unknown;
    const started = Date.now();
    const summary = await consume(
      t,
      (_e, lease, { signal }) => {
        if (lease.groupId === "quick") return;
        return new Promise<void>((_, reject) =>
          signal.addEventListener("abort", () => {
            reason = signal.reason;
            reject(signal.reason);
          }),
        );
      },
      { workerId: "timed", concurrency: 2, budgetMs: 1500 },
    );
    expect(Date.now() - started).toBeLessThan(1500 + 250);
    expect(summary).toMatchObject({
      stopped: "deadline",
      claimed: 2,
      handled: 1,
      acked: 1,
      abandoned: 1,
      released: 1,
      settleFailed: 0,
      leftLeased: [],
    });
    expect((reason as QueueError).code).toBe("CLOSED");
    // Released, not lapsed: claimable at once, on its first attempt still.
    expect(await t.claim("next", 30)).toMatchObject({ groupId: "slow", attempts: 1 });
  });

  it("a handler that throws is retried in the next run, not this one: its nack's delay outlasts the run", async () => {
    const { t } = await fresh();
    const seq = await t.publish("g", {});
    let calls = 0;
    const summary = await consume(
      t,
      () => {
        calls++;
        throw new Error("downstream is down");
      },
      { workerId: "flaky", budgetMs: 2000, backoff: { initial: 0.05 }, onError: () => {} },
    );
    expect(calls).toBe(1);
    expect(summary).toMatchObject({ stopped: "deadline", handled: 1, nacked: 1, deadLettered: 0, leftLeased: [] });
    const [msg] = await t.peek("g");
    expect(msg).toMatchObject({ seq, state: "parked", attempts: 1 });
    // Parked until past the run's end (by the database's clock).
    expect((msg?.until as number) - (await t.stats()).now).toBeGreaterThan(0);
  });

  it("refuses what cannot fit: graceMs past the budget, both budgetMs and deadline, a drain without either", async () => {
    const { t } = await fresh();
    const refused = async (p: Promise<unknown>, field: string) => {
      const e = await p.catch((x: unknown) => x);
      expect(e, field).toBeInstanceOf(QueueError);
      expect(e).toMatchObject({ code: "INVALID_ARGUMENT", field });
    };
    const h = () => {};
    await refused(consume(t, h, { workerId: "w", budgetMs: 1000, graceMs: 950 }), "options.graceMs");
    await refused(consume(t, h, { workerId: "w", budgetMs: 1000, deadline: Date.now() + 1000 }), "options.deadline");
    await refused(consume(t, h, { workerId: "w", budgetMs: 0 }), "options.budgetMs");
    await refused(consume(t, h, { workerId: "w", until: "empty" as never }), "options.until");
    await refused(drain(t, h, { workerId: "w" } as never), "options.budgetMs");
    expect((await t.stats()).inFlight).toBe(0);
  });
});

describe("the summary when the database goes away mid-run", () => {
  /** 8 handlers hold their leases; the database stops; those of even seqs throw, the others return. */
  async function run(options: TransportOptions, budgetMs: number): Promise<{ summary: ConsumeSummary; held: Lease[] }> {
    const { t, proxy } = await fresh(options);
    await t.publishMany(Array.from({ length: 8 }, (_, i) => ({ groupId: `g${i}`, event: { i } })));
    const all = gate();
    const held: Lease[] = [];
    const phases: string[] = [];
    const summary = await consume(
      t,
      async (_e, lease) => {
        held.push(lease);
        if (held.length === 8) all.open();
        await all.opened;
        proxy.refuse = true;
        proxy.cutAll();
        if (lease.seq % 2 === 0) throw new Error("the downstream failed too");
      },
      { workerId: "cut", concurrency: 8, budgetMs, onError: (_e, c) => phases.push(c.phase) },
    );
    proxy.refuse = false;
    expect(phases.filter((p) => p === "handler")).toHaveLength(4);
    // Every lease still held in the database is one the summary names.
    const stats = await t.stats();
    expect(stats.inFlight).toBe(8);
    expect(summary.leftLeased.map((l) => l.leaseId).sort()).toEqual(held.map((l) => l.id).sort());
    return { summary, held };
  }

  it("acks and nacks that fail are counted as settle failures, each lease left leased with why", async () => {
    const { summary } = await run({ timeoutMs: 500, requestTimeoutMs: 200 }, 3000);
    expect(summary).toMatchObject({
      claimed: 8,
      handled: 8,
      acked: 0,
      nacked: 4,
      released: 0,
      lost: 0,
      settleFailed: 8,
      abandoned: 0,
    });
    expect(summary.leftLeased.map((l) => [l.seq % 2, l.reason]).sort()).toEqual([
      ...Array(4).fill([0, "nack-failed"]),
      ...Array(4).fill([1, "ack-failed"]),
    ]);
  });

  it("acks and nacks still out at the deadline are counted as unanswered, and it resolves by then", async () => {
    const started = Date.now();
    const { summary } = await run({}, 2000);
    expect(Date.now() - started).toBeLessThan(2000 + 250);
    expect(summary).toMatchObject({
      stopped: "deadline",
      claimed: 8,
      handled: 8,
      acked: 0,
      nacked: 4,
      settleFailed: 8,
    });
    expect(new Set(summary.leftLeased.map((l) => l.reason))).toEqual(new Set(["unanswered"]));
  });
});
