/**
 * A sharded queue keeps the promises one database makes (issue 30 items 2, 3, 6, 9; issue 26 item 3),
 * in the library, on four sqld namespaces and on four files:
 * - an idempotency key is exact across the queue: the same key for groups on different shards is one
 *   key; a keyed batch over several shards is all or nothing as to the key (sent again it completes
 *   exactly once, whatever part of it a failure left unstored; changed, or a part of it, it is
 *   refused with nothing stored);
 * - each shard knows its place: the databases in another order, one more or fewer, or one twice are
 *   refused with SHARD_MISMATCH;
 * - extend(leaseId), errors naming the queue's seqs, shards checked when the queue is made;
 * - a shard down (a proxy refusing every connection to it) holds back no other shard, and everything
 *   resumes when it is back.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startProxy, type Proxy as TcpProxy } from "../../scripts/support/proxy.js";
import { sqldNamespaces } from "../../src/core/databases.js";
import { isRetryable } from "../../src/core/errors.js";
import { clientOf, internalsOf } from "../../src/core/internals.js";
import { consume, type Lease, LibsqlTransport, QueueError, ShardedQueue } from "../../src/index.js";
import { MAX_SHARDS, shardOf } from "../../src/rules.js";
import { checkInvariants, resetDatabase, tempFile } from "../support/db.js";
import { waitFor } from "../support/wait.js";

const SHARDS = 4;

/** A group on shard `shard` (the `k`-th found). */
const groupOn = (shard: number, k = 0, n = SHARDS) =>
  Array.from({ length: 400 }, (_, i) => `grp-${i}`).filter((g) => shardOf(g, n) === shard)[k] as string;
/** A key whose home (the shard that decides it) is `shard`. */
const keyOn = (shard: number, k = 0) =>
  Array.from({ length: 400 }, (_, i) => `key-${i}`).filter((g) => shardOf(g, SHARDS) === shard)[k] as string;

let nsTag = 0;
/** Four fresh namespaces on the shared sqld (reset); their names. */
async function namespaces(): Promise<string[]> {
  const provider = sqldNamespaces({ url: inject("nsSqldUrl"), adminUrl: inject("nsAdminUrl") });
  const tag = `seams-${++nsTag}`;
  const names = Array.from({ length: SHARDS }, (_, i) => `${tag}--${i}`);
  for (const name of names) {
    const d = await provider.create(name);
    const t = await LibsqlTransport.create(d.url, { namespace: d.namespace });
    await resetDatabase(clientOf(t));
    t.close();
  }
  return names;
}

const files = () => Array.from({ length: SHARDS }, () => `file:${tempFile()}`);

/** A queue and its shards (the transports, to reach a shard's database in a test). */
const targets = [
  {
    name: "sqld namespaces",
    open: async () => {
      const names = await namespaces();
      const shards = await Promise.all(
        names.map((namespace) => LibsqlTransport.create(inject("nsSqldUrl"), { namespace })),
      );
      return { q: new ShardedQueue(shards), shards };
    },
  },
  {
    name: "files",
    open: async () => {
      const shards = await Promise.all(files().map((f) => LibsqlTransport.create(f)));
      return { q: new ShardedQueue(shards), shards };
    },
  },
];

/** Every message stored on the shards, read from each shard itself. */
const storedOn = async (shards: LibsqlTransport[]) => {
  let n = 0;
  for (const t of shards) {
    const s = await t.stats();
    n += s.ready + s.waiting + s.inFlight + s.parked + s.delayed;
  }
  return n;
};

describe.each(targets)("idempotency keys exact per queue, on $name", (target) => {
  let q: ShardedQueue;
  let shards: LibsqlTransport[];
  beforeAll(async () => {
    ({ q, shards } = await target.open());
  });
  afterAll(() => q?.close());

  it("the same key for groups on different shards is one key: the second publish is refused, nothing stored", async () => {
    for (const home of [0, 1]) {
      const key = keyOn(home, 1);
      // One group on the key's home, one elsewhere, in both orders.
      for (const [first, second] of [
        [groupOn(home, 2), groupOn((home + 1) % SHARDS, 2)],
        [groupOn((home + 2) % SHARDS, 3), groupOn(home, 3)],
      ] as const) {
        const k = `${key}-${first}`;
        const before = await storedOn(shards);
        const seq = await q.publish(first, { to: first }, 0, { idempotencyKey: k });
        expect(await q.publish(first, { to: first }, 0, { idempotencyKey: k })).toBe(seq);
        const refused = await q.publish(second, { to: second }, 0, { idempotencyKey: k }).catch((e: unknown) => e);
        expect(refused).toBeInstanceOf(QueueError);
        expect(refused).toMatchObject({ code: "IDEMPOTENCY_CONFLICT", field: "idempotencyKey" });
        expect(await storedOn(shards)).toBe(before + 1);
        expect(await q.peek(second)).toEqual([]);
      }
    }
  });

  it("a keyed batch over every shard: sent again, stored once with its seqs; changed or cut, refused with nothing stored", async () => {
    const batch = Array.from({ length: 12 }, (_, k) => ({ groupId: groupOn(k % SHARDS, 10 + k), event: { k } }));
    const before = await storedOn(shards);
    const seqs = await q.publishMany(batch, { idempotencyKey: "order-7" });
    expect(new Set(seqs.map((s) => s % MAX_SHARDS))).toEqual(new Set([0, 1, 2, 3]));
    expect(await q.publishMany(batch, { idempotencyKey: "order-7" })).toEqual(seqs);
    expect(await storedOn(shards)).toBe(before + 12);
    const changed = batch.map((m, k) => (k === 5 ? { ...m, event: { k: 500 } } : m));
    const subset = batch.slice(0, 4);
    const onOneShard = batch.filter((m) => shardOf(m.groupId, SHARDS) === shardOf("order-7", SHARDS));
    for (const other of [changed, subset, onOneShard]) {
      await expect(q.publishMany(other, { idempotencyKey: "order-7" })).rejects.toMatchObject({
        code: "IDEMPOTENCY_CONFLICT",
      });
    }
    expect(await storedOn(shards)).toBe(before + 12);
  });

  it("a batch whose parts failed midway completes exactly once when sent again; another request under its key is refused", async () => {
    const key = "crash-window";
    const home = shardOf(key, SHARDS);
    const batch = Array.from({ length: 8 }, (_, k) => ({ groupId: groupOn(k % SHARDS, 30 + k), event: { k } }));
    // The part on a shard other than the key's home fails after the key was recorded.
    const failing = (home + 1) % SHARDS;
    const internals = internalsOf(shards[failing] as LibsqlTransport);
    const publish = internals.publish;
    internals.publish = () => Promise.reject(new QueueError("UNAVAILABLE", "the database could not be reached"));
    const before = await storedOn(shards);
    try {
      await expect(q.publishMany(batch, { idempotencyKey: key })).rejects.toMatchObject({ code: "UNAVAILABLE" });
    } finally {
      internals.publish = publish;
    }
    // The other parts are stored; the failed one is not.
    expect(await storedOn(shards)).toBe(before + 6);
    // A different request under the key is refused, and stores nothing.
    await expect(
      q.publishMany([{ groupId: groupOn(failing, 50), event: "other" }], { idempotencyKey: key }),
    ).rejects.toMatchObject({ code: "IDEMPOTENCY_CONFLICT" });
    expect(await storedOn(shards)).toBe(before + 6);
    // The same request completes it: every message once, in its group's order.
    const seqs = await q.publishMany(batch, { idempotencyKey: key });
    expect(await storedOn(shards)).toBe(before + 8);
    expect(await q.publishMany(batch, { idempotencyKey: key })).toEqual(seqs);
    for (const [k, m] of batch.entries()) {
      const [head] = await q.peek(m.groupId);
      expect(head).toMatchObject({ seq: seqs[k], event: { k } });
    }
    for (const s of shards) await checkInvariants(clientOf(s));
  });

  it("a keyed singleton publish is exact across the queue too", async () => {
    const key = keyOn(3, 5);
    const group = groupOn(1, 60);
    const first = await q.publishSingleton(group, "s", 0, { idempotencyKey: key, singletonKey: "only" });
    expect(first.deduplicated).toBe(false);
    expect(await q.publishSingleton(group, "s", 0, { idempotencyKey: key, singletonKey: "only" })).toEqual(first);
    await expect(q.publish(groupOn(2, 60), "s", 0, { idempotencyKey: key })).rejects.toMatchObject({
      code: "IDEMPOTENCY_CONFLICT",
    });
  });
});

describe("each shard knows its place", () => {
  const mismatch = (field: string) => ({ code: "SHARD_MISMATCH", field });

  it("the databases in another order, one more or fewer, or one twice: refused, naming the database", async () => {
    const dbs = files();
    const q = await ShardedQueue.open(dbs);
    await q.publishMany([0, 1, 2, 3].map((s) => ({ groupId: groupOn(s), event: s })));
    const lease = (await q.claim("w", 60)) as Lease;
    q.close();

    const swapped = [dbs[1], dbs[0], dbs[2], dbs[3]] as string[];
    await expect(ShardedQueue.open(swapped)).rejects.toMatchObject(mismatch("databases[0]"));
    await expect(ShardedQueue.open(dbs.slice(0, 3))).rejects.toMatchObject(mismatch("databases[0]"));
    await expect(ShardedQueue.open([...dbs, `file:${tempFile()}`])).rejects.toMatchObject(mismatch("databases[0]"));
    const refused = (await ShardedQueue.open(swapped).catch((e: unknown) => e)) as QueueError;
    expect(refused.message).toMatch(/this database is shard 1 of 4 of queue .*, not shard 0 of 4/);

    // Over transports opened by hand: the queue refuses every call, and changes nothing.
    const transports = await Promise.all(swapped.map((d) => LibsqlTransport.create(d)));
    const wrong = new ShardedQueue(transports);
    await expect(wrong.stats()).rejects.toMatchObject(mismatch("shards[0]"));
    await expect(wrong.claim("thief", 60)).rejects.toMatchObject(mismatch("shards[0]"));
    await expect(wrong.publish(groupOn(0), "x")).rejects.toMatchObject(mismatch("shards[0]"));
    for (const t of transports) t.close();

    // In its order it is the same queue: the lease still holds, nothing else was taken or stored.
    const again = await ShardedQueue.open(dbs);
    expect(await again.stats()).toMatchObject({ inFlight: 1, ready: 3 });
    await again.ack(lease);
    again.close();
  });

  it("one database listed twice is refused on first use", async () => {
    const [a, b, c] = files();
    await expect(ShardedQueue.open([a, a, b, c] as string[])).rejects.toMatchObject(mismatch("databases[1]"));
  });

  it("a queue of one database stores no place; its database opens alone as before", async () => {
    const db = `file:${tempFile()}`;
    const one = await ShardedQueue.open([db]);
    await one.publish("g", 1);
    one.close();
    const t = await LibsqlTransport.create(db);
    expect((await clientOf(t).execute("SELECT count(*) AS n FROM tq_shard")).rows[0]?.n).toBe(0);
    expect((await t.stats()).ready).toBe(1);
    t.close();
  });

  it("a queue with a name (the app's named queues) is stored under it, and another name is refused", async () => {
    const dbs = files();
    (await ShardedQueue.open(dbs, { name: "jobs" })).close();
    const t = await LibsqlTransport.create(dbs[2] as string);
    expect(
      (await clientOf(t).execute("SELECT queue, shard, shards FROM tq_shard")).rows.map((r) => ({ ...r })),
    ).toEqual([{ queue: "jobs", shard: 2, shards: 4 }]);
    t.close();
    await expect(ShardedQueue.open(dbs, { name: "billing" })).rejects.toMatchObject(mismatch("databases[0]"));
    // Without a name, any one queue's databases in their order.
    (await ShardedQueue.open(dbs)).close();
  });
});

describe("sharded answers as one queue gives them", () => {
  it("refuses shards without the transport's API when it is made, naming the shard", () => {
    expect(() => new ShardedQueue([{}, {}] as never)).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT", field: "shards[0]" }),
    );
    expect(() => new ShardedQueue([null] as never)).toThrow(expect.objectContaining({ field: "shards[0]" }));
  });

  it("extend(leaseId) answers { id, expiresAt } with the queue's id; errors name the queue's seq", async () => {
    const q = await ShardedQueue.open(files());
    try {
      await q.publish(groupOn(3), 1);
      const lease = (await q.claim("w", 30)) as Lease;
      expect(lease.seq % MAX_SHARDS).toBe(3);
      const extended = await q.extend(lease.id, 60);
      expect(Object.keys(extended).sort()).toEqual(["expiresAt", "id"]);
      expect(extended.id).toBe(lease.id);
      expect((await q.extend(lease, 90)).id).toBe(lease.id);
      await q.ack(lease);
      for (const call of [() => q.ack(lease), () => q.nack(lease), () => q.extend(lease.id, 10)]) {
        const e = (await call().catch((x: unknown) => x)) as QueueError;
        expect(e).toMatchObject({ code: "LEASE_NOT_FOUND", field: "lease" });
        expect(e.message).toBe(`lease: message ${lease.seq} no longer exists (acked or dead-lettered)`);
      }
      const [outcome] = await q.settle([{ action: "ack", lease }]);
      expect(outcome?.error?.message).toBe(`lease: message ${lease.seq} no longer exists (acked or dead-lettered)`);
      const seq = 7 * MAX_SHARDS + 3;
      await expect(q.redrive(seq)).rejects.toMatchObject({
        code: "DEAD_LETTER_NOT_FOUND",
        field: "seq",
        message: `seq: no dead letter ${seq}`,
      });
    } finally {
      q.close();
    }
  });
});

describe("a shard down holds back no other shard", () => {
  let proxy: TcpProxy;
  let q: ShardedQueue;
  let shards: LibsqlTransport[];
  const DOWN = 2;
  beforeAll(async () => {
    proxy = await startProxy(Number(new URL(inject("nsSqldUrl")).port));
    const names = await namespaces();
    // Shard 2 reached through the proxy; a short deadline keeps the test short.
    shards = await Promise.all(
      names.map((namespace, i) =>
        LibsqlTransport.create(i === DOWN ? proxy.url : inject("nsSqldUrl"), {
          namespace,
          timeoutMs: 1500,
          requestTimeoutMs: 500,
        }),
      ),
    );
    q = new ShardedQueue(shards);
  });
  afterAll(async () => {
    q?.close();
    await proxy?.close();
  });

  it("claims, publishes and stats are served by the others; the down shard's publishes fail retryably; all resumes", async () => {
    const perShard = 3;
    await q.publishMany(
      [0, 1, 2, 3].flatMap((s) =>
        Array.from({ length: perShard }, (_, k) => ({ groupId: groupOn(s, k), event: { s, k } })),
      ),
    );
    proxy.refuse = true;
    proxy.cutAll();

    // Publishes: into the others' groups they succeed; into the down shard's they fail with a retryable code.
    await q.publish(groupOn(0, 9), { s: 0, k: 9 });
    const failed = (await q.publish(groupOn(DOWN, 9), { s: DOWN, k: 9 }).catch((e: unknown) => e)) as QueueError;
    expect(failed).toBeInstanceOf(QueueError);
    expect(isRetryable(failed)).toBe(true);

    // Stats: the others' counts, and which shard could not be reached.
    const s = await q.stats();
    expect(s.unreachableShards).toEqual([{ shard: DOWN, code: expect.stringMatching(/UNAVAILABLE|TIMEOUT/) }]);
    expect(s.ready).toBe(3 * perShard + 1);
    expect((await q.groups({ limit: 100 })).every((g) => shardOf(g.groupId, SHARDS) !== DOWN)).toBe(true);

    // Claims: everything on the other shards is delivered, FIFO per group, while shard 2 stays down.
    const handled: Array<{ s: number; k: number }> = [];
    while (handled.length < 3 * perShard + 1) {
      const leases = await q.claimMany("w", 30, 4);
      for (const l of leases) {
        handled.push(l.event as { s: number; k: number });
        await q.ack(l);
      }
    }
    expect(handled.every((e) => e.s !== DOWN)).toBe(true);
    // consume() too: it drains what the others get meanwhile, its lane on shard 2 reporting errors.
    await q.publishMany([0, 1, 3].map((s) => ({ groupId: groupOn(s, 20), event: { s, k: 20 } })));
    const errors: string[] = [];
    const stop = new AbortController();
    const seen: number[] = [];
    const summary = await consume(
      q,
      (e: { s: number }) => {
        seen.push(e.s);
        if (seen.length === 3) stop.abort();
      },
      {
        workerId: "c",
        concurrency: 4,
        signal: stop.signal,
        idleBackoff: { minMs: 5, maxMs: 50 },
        onError: (e) => errors.push((e as QueueError).code),
      },
    );
    expect(summary.acked).toBe(3);
    expect(errors.every((c) => c === "UNAVAILABLE" || c === "TIMEOUT")).toBe(true);

    // Back: its messages are delivered, and stats count every shard again.
    proxy.refuse = false;
    const back: Array<{ s: number; k: number }> = [];
    await waitFor(
      async () => {
        for (const l of await q.claimMany("w", 30, 4).catch(() => [])) {
          back.push(l.event as { s: number; k: number });
          await q.ack(l);
        }
        return back.length === perShard;
      },
      { timeoutMs: 40_000, intervalMs: 100, what: "the shard back" },
    );
    expect(back.every((e) => e.s === DOWN)).toBe(true);
    expect(back.map((e) => e.k).sort()).toEqual([0, 1, 2]);
    await waitFor(async () => (await q.stats()).unreachableShards === undefined, {
      timeoutMs: 40_000,
      intervalMs: 100,
      what: "stats of every shard",
    });
    expect(await q.stats()).toMatchObject({ ready: 0, waiting: 0, inFlight: 0 });
    for (const t of shards) await checkInvariants(clientOf(t));
  });
});
