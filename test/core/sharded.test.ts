/**
 * A queue sharded across databases (src/core/sharded.ts): on four sqld namespaces and on four local
 * files, a group's messages live on one shard, FIFO and one lease per group hold under 64 concurrent
 * claimers, consume() drains it, idempotency keys stay exact, dead letters page across shards, and
 * the spec's Python transports work on one shard's database as on any other; claiming one shard
 * alone (claimManyOn), which consume() does shard by shard, at any concurrency, long polls included.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { sqldNamespaces } from "../../src/core/databases.js";
import { clientOf } from "../../src/core/internals.js";
import { consume, type Lease, LibsqlTransport, QueueError, ShardedQueue } from "../../src/index.js";
import { MAX_CLAIM_BATCH, MAX_SHARDS, shardOf } from "../../src/rules.js";
import { checkInvariants, resetDatabase, tempFile } from "../support/db.js";
import { checkDeliveryLog, type Held } from "../support/exclusivity.js";
import { pyClaim, pyPublish } from "../support/python.js";
import { waitFor } from "../support/wait.js";

const SHARDS = 4;

describe("shardOf", () => {
  it("is FNV-1a of the group id's UTF-8 bytes, modulo the shard count: the same in every process and language", () => {
    // FNV-1a 32: "" → 0x811c9dc5, "a" → 0xe40c292c, "foobar" → 0xbf9cf968 (the published test vectors).
    expect(shardOf("", 7)).toBe(0x811c9dc5 % 7);
    expect(shardOf("a", 1000)).toBe(0xe40c292c % 1000);
    expect(shardOf("foobar", 16)).toBe(0xbf9cf968 % 16);
    expect(shardOf("naïve ✓", 1)).toBe(0);
    // Spread: 4,000 groups over 4 shards, none with fewer than a fifth of them.
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) counts[shardOf(`order-${i}`, 4)] = (counts[shardOf(`order-${i}`, 4)] ?? 0) + 1;
    expect(Math.min(...counts)).toBeGreaterThan(800);
  });
});

/** Four shards, fresh: namespaces on the shared sqld (reset), or four new files. */
const targets = [
  {
    name: "sqld namespaces",
    async open(tag: string) {
      const provider = sqldNamespaces({ url: inject("nsSqldUrl"), adminUrl: inject("nsAdminUrl") });
      const dbs = await Promise.all(Array.from({ length: SHARDS }, (_, i) => provider.create(`t-${tag}--${i}`)));
      const shards = await Promise.all(dbs.map((d) => LibsqlTransport.create(d.url, { namespace: d.namespace })));
      for (const s of shards) await resetDatabase(clientOf(s));
      return { queue: new ShardedQueue(shards), shards };
    },
  },
  {
    name: "files",
    async open() {
      const shards = await Promise.all(
        Array.from({ length: SHARDS }, () => LibsqlTransport.create(`file:${tempFile()}`)),
      );
      return { queue: new ShardedQueue(shards), shards };
    },
  },
];

describe.each(targets)("a queue of $name", (target) => {
  let queue: ShardedQueue;
  let shards: LibsqlTransport[];
  let tag = 0;
  const open = async () => {
    ({ queue, shards } = await target.open(`${++tag}`));
  };
  afterAll(() => queue?.close());

  it("puts every message of a group on the group's shard, and its seqs name the shard", async () => {
    await open();
    const groups = Array.from({ length: 40 }, (_, i) => `g-${i}`);
    const seqs = await queue.publishMany(groups.flatMap((g) => [0, 1].map((n) => ({ groupId: g, event: { g, n } }))));
    expect(new Set(seqs).size).toBe(80);
    for (const [i, seq] of seqs.entries())
      expect(seq % MAX_SHARDS).toBe(shardOf(groups[Math.floor(i / 2)] as string, SHARDS));
    for (const [s, shard] of shards.entries()) {
      const rows = (await clientOf(shard).execute("SELECT DISTINCT group_id FROM messages")).rows.map((r) =>
        String(r.group_id),
      );
      expect(rows.every((g) => shardOf(g, SHARDS) === s)).toBe(true);
      expect(rows.length).toBe(groups.filter((g) => shardOf(g, SHARDS) === s).length);
    }
    expect(await queue.stats()).toMatchObject({ ready: 40, waiting: 40, groups: 40 });
    // One lease per group: a claim of 100 gets the 40 heads, each group's first message.
    const leases = await queue.claimMany("w", 30, 100);
    expect(leases).toHaveLength(40);
    expect(leases.every((l) => (l.event as { n: number }).n === 0)).toBe(true);
    expect(await queue.claimMany("w", 30, 100)).toEqual([]);
    await Promise.all(leases.map((l) => queue.ack(l)));
    const next = await queue.claimMany("w", 30, 100);
    expect(next.map((l) => (l.event as { n: number }).n)).toEqual(Array(40).fill(1));
    await Promise.all(next.map((l) => queue.ack(l)));
    expect((await queue.stats()).groups).toBe(0);
    for (const s of shards) await checkInvariants(clientOf(s));
  });

  it("keeps FIFO and one lease per group under 64 concurrent claimers", async () => {
    await open();
    const GROUPS = 40;
    const PER = 10;
    const published = new Map<number, { groupId: string; index: number }>();
    const messages = Array.from({ length: GROUPS * PER }, (_, k) => ({
      groupId: `fifo-${k % GROUPS}`,
      event: { index: Math.floor(k / GROUPS) },
    }));
    const seqs = await queue.publishMany(messages);
    for (const [k, seq] of seqs.entries()) {
      published.set(seq, { groupId: messages[k]?.groupId as string, index: Math.floor(k / GROUPS) });
    }
    const log: Held[] = [];
    const deadline = Date.now() + 60_000;
    await Promise.all(
      Array.from({ length: 64 }, async (_, c) => {
        while (log.length < published.size && Date.now() < deadline) {
          const lease = await queue.claim(`c${c}`, 60);
          if (!lease) {
            await new Promise((r) => setTimeout(r, 5));
            continue;
          }
          const claimedAt = performance.now();
          const ackSentAt = performance.now();
          log.push({ groupId: lease.groupId, seq: lease.seq, event: lease.event, claimedAt, ackSentAt });
          await queue.ack(lease);
        }
      }),
    );
    checkDeliveryLog(log, published);
    // FIFO: each group's messages came in publish order.
    const byGroup = new Map<string, number[]>();
    for (const h of [...log].sort((a, b) => a.claimedAt - b.claimedAt)) {
      byGroup.set(h.groupId, [...(byGroup.get(h.groupId) ?? []), (h.event as { index: number }).index]);
    }
    for (const [g, order] of byGroup) expect(order, g).toEqual(Array.from({ length: PER }, (_, i) => i));
    for (const s of shards) await checkInvariants(clientOf(s));
  });

  it("runs consume() unchanged, and gives back what it claimed while stopping without spending an attempt", async () => {
    await open();
    await queue.publishMany(Array.from({ length: 60 }, (_, k) => ({ groupId: `c-${k % 12}`, event: k })));
    const seen = new Map<string, number[]>();
    const stop = new AbortController();
    const summary = await consume(
      queue,
      (event: number, lease) => {
        seen.set(lease.groupId, [...(seen.get(lease.groupId) ?? []), event]);
        if ([...seen.values()].flat().length === 60) stop.abort();
      },
      { workerId: "consumer", concurrency: 16, signal: stop.signal },
    );
    expect(summary).toMatchObject({ acked: 60, nacked: 0 });
    for (const [, events] of seen) expect(events).toEqual([...events].sort((a, b) => a - b));
    expect((await queue.stats()).groups).toBe(0);
  });

  it("keeps an idempotency key exact across shards: a batch sent again is stored once, with its first seqs", async () => {
    await open();
    const batch = Array.from({ length: 12 }, (_, k) => ({ groupId: `k-${k}`, event: { k } }));
    const first = await queue.publishMany(batch, { idempotencyKey: "order-7" });
    const again = await queue.publishMany(batch, { idempotencyKey: "order-7" });
    expect(again).toEqual(first);
    expect((await queue.stats()).ready).toBe(12);
    const single = await queue.publish("k-0", { k: 99 }, 0, { idempotencyKey: "one" });
    expect(await queue.publish("k-0", { k: 99 }, 0, { idempotencyKey: "one" })).toBe(single);
    const conflict = await queue.publish("k-0", { k: 100 }, 0, { idempotencyKey: "one" }).catch((e: unknown) => e);
    expect(conflict).toBeInstanceOf(QueueError);
    expect(conflict).toMatchObject({ code: "IDEMPOTENCY_CONFLICT" });
    expect((await queue.stats()).waiting).toBe(1);
  });

  it("pages dead letters across shards in seq order, and redrives and deletes them on their shard", async () => {
    await open();
    const groups = Array.from({ length: 8 }, (_, i) => `dead-${i}`);
    await queue.publishMany(groups.map((g) => ({ groupId: g, event: g })));
    for (let round = 0; round < 5; round++) {
      const leases = await queue.claimMany("poison", 30, 100);
      await Promise.all(leases.map((l) => queue.nack(l)));
    }
    expect((await queue.stats()).deadLetters).toBe(8);
    const page1 = await queue.deadLetters({ limit: 3 });
    const page2 = await queue.deadLetters({ limit: 3, afterSeq: page1[2]?.seq });
    const page3 = await queue.deadLetters({ limit: 3, afterSeq: page2[2]?.seq });
    const all = [...page1, ...page2, ...page3].map((d) => d.seq);
    expect(all).toHaveLength(8);
    expect(all).toEqual([...all].sort((a, b) => a - b));
    expect(new Set([...page1, ...page2, ...page3].map((d) => d.groupId))).toEqual(new Set(groups));
    const target = page2[0] as { seq: number; groupId: string };
    const redriven = await queue.redrive(target.seq);
    expect(redriven % MAX_SHARDS).toBe(shardOf(target.groupId, SHARDS));
    const again = (await queue.claim("after", 30)) as Lease;
    expect(again).toMatchObject({ seq: redriven, groupId: target.groupId, attempts: 1 });
    expect(await queue.deleteDeadLetter(page1[0]?.seq as number)).toBe(true);
    expect(await queue.deleteDeadLetter(page1[0]?.seq as number)).toBe(false);
    const gone = await queue.redrive(target.seq).catch((e: unknown) => e);
    expect(gone).toMatchObject({ code: "DEAD_LETTER_NOT_FOUND", field: "seq" });
  });

  it("refuses a lease or seq of no shard of this queue", async () => {
    await open();
    // Shard 9 of a 4-shard queue.
    const stray = `${5 * MAX_SHARDS + 9}.${"a".repeat(32)}`;
    await expect(queue.ack(stray)).rejects.toMatchObject({ code: "LEASE_NOT_FOUND", field: "lease" });
    await expect(queue.ack("not-a-lease")).rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "lease" });
    expect(await queue.deleteDeadLetter(5 * MAX_SHARDS + 9)).toBe(false);
  });
});

describe("the spec's Python transports on one shard's database", () => {
  let queue: ShardedQueue;
  let shards: LibsqlTransport[];
  beforeAll(async () => {
    ({ queue, shards } = await (targets[0] as (typeof targets)[0]).open("py"));
  });
  afterAll(() => queue.close());

  it("a message the Python side publishes on a shard is claimed through the queue, and the reverse", async () => {
    // A group that lives on shard 2.
    const group = Array.from({ length: 100 }, (_, i) => `exec-${i}`).find((g) => shardOf(g, SHARDS) === 2) as string;
    const shard2 = clientOf(shards[2] as LibsqlTransport);
    await pyPublish(shard2, group, { from: "python" });
    const lease = (await queue.claim("ts", 30)) as Lease;
    expect(lease).toMatchObject({ groupId: group, event: { from: "python" } });
    expect(lease.seq % MAX_SHARDS).toBe(2);
    await queue.ack(lease);

    await queue.publish(group, { from: "typescript" });
    const claimed = await pyClaim(shard2, "python-worker", 30);
    expect(claimed).toMatchObject({ groupId: group, event: { from: "typescript" } });
    await checkInvariants(shard2);
  });
});

describe("claiming shard by shard (consume()'s lanes)", () => {
  const open = async () => {
    const shards = await Promise.all(
      Array.from({ length: SHARDS }, () => LibsqlTransport.create(`file:${tempFile()}`)),
    );
    return { queue: new ShardedQueue(shards), shards };
  };
  /** A group on each shard, by index. */
  const groupOn = (shard: number, k = 0) =>
    Array.from({ length: 400 }, (_, i) => `on-${i}`).filter((g) => shardOf(g, SHARDS) === shard)[k] as string;

  it("claimManyOn leases from that shard alone, named as the queue names them, and refuses a shard it lacks", async () => {
    const { queue } = await open();
    try {
      await queue.publishMany([0, 1, 2, 3].map((s) => ({ groupId: groupOn(s), event: s })));
      const got = await queue.claimManyOn(2, "w", 30, 10);
      expect(got.map((l) => [l.groupId, l.seq % MAX_SHARDS, l.id.startsWith(`${l.seq}.`)])).toEqual([
        [groupOn(2), 2, true],
      ]);
      await queue.ack(got[0] as Lease);
      expect(await queue.claimManyOn(2, "w", 30, 10)).toEqual([]);
      for (const bad of [-1, SHARDS, 1.5]) {
        await expect(queue.claimManyOn(bad, "w", 30, 1)).rejects.toMatchObject({
          code: "INVALID_ARGUMENT",
          field: "shard",
        });
      }
      await expect(queue.claimManyOn(0, "w", 30, MAX_CLAIM_BATCH + 1)).rejects.toMatchObject({
        code: "INVALID_ARGUMENT",
        field: "n",
      });
      expect((await queue.stats()).ready).toBe(3);
    } finally {
      queue.close();
    }
  });

  it("consume() at concurrency 1 and 2 serves every shard, and a queue whose messages are all on one shard", async () => {
    for (const [concurrency, spread] of [
      [1, [0, 1, 2, 3]],
      [2, [0, 1, 2, 3]],
      [3, [3]],
    ] as const) {
      const { queue } = await open();
      try {
        const messages = spread.flatMap((s) =>
          [0, 1, 2].flatMap((n) => [0, 1].map((k) => ({ groupId: groupOn(s, k), event: n }))),
        );
        await queue.publishMany(messages);
        const seen = new Map<string, number[]>();
        let running = 0;
        let peak = 0;
        const stop = new AbortController();
        const summary = await consume(
          queue,
          async (n: number, lease) => {
            peak = Math.max(peak, ++running);
            await new Promise((r) => setImmediate(r));
            running--;
            seen.set(lease.groupId, [...(seen.get(lease.groupId) ?? []), n]);
            if ([...seen.values()].flat().length === messages.length) stop.abort();
          },
          { workerId: `c${concurrency}`, concurrency, signal: stop.signal, idleBackoff: { minMs: 5, maxMs: 20 } },
        );
        expect(summary).toMatchObject({ acked: messages.length, nacked: 0, released: 0 });
        expect(peak).toBeLessThanOrEqual(concurrency);
        for (const events of seen.values()) expect(events).toEqual([0, 1, 2]);
        expect(seen.size).toBe(spread.length * 2);
        expect((await queue.stats()).groups).toBe(0);
      } finally {
        queue.close();
      }
    }
  });

  it("a shard empty at first gets its share back once messages come, while the others are busy", async () => {
    const { queue } = await open();
    try {
      // 600 messages on shards 0-2, each a few ms to handle, 8 at a time; shard 3 empty at first.
      const busy = [0, 1, 2].flatMap((s) =>
        Array.from({ length: 200 }, (_, k) => ({ groupId: groupOn(s, k % 20), event: { s, k } })),
      );
      await queue.publishMany(busy);
      const order: number[] = [];
      const stop = new AbortController();
      const done = consume(
        queue,
        async (e: { s: number }) => {
          await new Promise((r) => setTimeout(r, 2));
          order.push(e.s);
          if (order.length === busy.length + 8) stop.abort();
        },
        { workerId: "share", concurrency: 8, signal: stop.signal, idleBackoff: { minMs: 5, maxMs: 20 } },
      );
      await waitFor(async () => order.length >= 100, { what: "the busy shards under way" });
      await queue.publishMany(Array.from({ length: 8 }, (_, k) => ({ groupId: groupOn(3, k), event: { s: 3, k } })));
      expect(await done).toMatchObject({ acked: busy.length + 8 });
      // Its 8 came while the others had 500 left: all handled long before those were.
      const last3 = order.lastIndexOf(3);
      expect(order.filter((s) => s === 3)).toHaveLength(8);
      expect(last3).toBeLessThan(order.length - 200);
    } finally {
      queue.close();
    }
  });

  it("an idle consume() long-polls a queue whose shards can wait, takes what one shard answers, and stops at once", async () => {
    const { queue: plain, shards } = await open();
    const waits: (number | undefined)[] = [];
    // Shards whose claims can wait (as the HTTP client's do), over the files.
    const waiting = shards.map((t) => {
      const claimMany = async <E>(
        w: string,
        v: number,
        n: number,
        p?: number,
        o?: { wait?: number; signal?: AbortSignal },
      ) => {
        waits.push(o?.wait);
        for (;;) {
          const leases = await t.claimMany<E>(w, v, n, p);
          if (leases.length > 0 || !o?.wait) return leases;
          if (o.signal?.aborted) throw o.signal.reason;
          await new Promise((r) => setTimeout(r, 10));
        }
      };
      return new Proxy(t, {
        get: (target, prop) => {
          if (prop === "maxClaimWait") return 20;
          if (prop === "claimMany") return claimMany;
          const v = Reflect.get(target, prop);
          return typeof v === "function" ? v.bind(target) : v;
        },
      });
    });
    const queue = new ShardedQueue(waiting);
    try {
      const handled: number[] = [];
      const stop = new AbortController();
      const done = consume(queue, (n: number) => void handled.push(n), {
        workerId: "idle",
        concurrency: 8,
        signal: stop.signal,
      });
      await waitFor(async () => waits.filter((w) => w === 20).length === SHARDS, {
        what: "a long poll on every shard",
      });
      await queue.publish(groupOn(3), 7);
      await waitFor(async () => handled.length === 1, { what: "the message handled" });
      await waitFor(async () => waits.filter((w) => w === 20).length === 2 * SHARDS, { what: "long polls again" });
      stop.abort();
      expect(await done).toMatchObject({ acked: 1, released: 0 });
      expect(handled).toEqual([7]);
      expect((await plain.stats()).groups).toBe(0);
    } finally {
      plain.close();
    }
  });
});
