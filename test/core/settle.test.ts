/**
 * settle(): many acks, nacks and releases at once, against real sqld. Each lease is fenced as on its
 * own call and has its own outcome, in order; a bad entry refuses the whole list and changes
 * nothing; the leases leave in one write batch and bill the rows their own calls would; a
 * ShardedQueue sends one settle per shard and names the outcomes as it names its leases.
 */
import { describe, expect, inject, it } from "vitest";
import { type Proxy as LatencyProxy, startProxy } from "../../scripts/support/proxy.js";
import { billed } from "../../scripts/support/sqld.js";
import { clientOf } from "../../src/core/internals.js";
import { type Lease, LibsqlTransport, MAX_SETTLE_BATCH, QueueError, ShardedQueue } from "../../src/index.js";
import { shardedSeq } from "../../src/rules.js";
import { checkInvariants } from "../support/db.js";
import { freshNamespaces } from "../support/namespaces.js";

/** Text only an ack statement carries (src/core/sql/leases.ts). */
const ACK = "RETURNING unixepoch('subsec') - tq_claimed_at AS held";

const { namespace, cleanups } = freshNamespaces("settle");

/** A transport on a fresh namespace, through a proxy that counts its requests. */
async function open(tag: string): Promise<{ t: LibsqlTransport; ns: string; proxy: LatencyProxy }> {
  const ns = await namespace(tag);
  const proxy = await startProxy(Number(new URL(inject("nsSqldUrl")).port));
  cleanups.push(() => proxy.close());
  const t = await LibsqlTransport.create(proxy.url, { namespace: ns });
  cleanups.push(() => t.close());
  return { t, ns, proxy };
}

async function leases(t: LibsqlTransport, n: number, tag = "g"): Promise<Lease[]> {
  await t.publishMany(Array.from({ length: n }, (_, i) => ({ groupId: `${tag}${i}`, event: { i } })));
  const got: Lease[] = [];
  while (got.length < n) got.push(...(await t.claimMany("w", 60, Math.min(100, n - got.length))));
  return got;
}

describe("LibsqlTransport.settle", () => {
  it("acks, nacks (parked, and to the dead letters) and releases, each fenced, each with its outcome in order", async () => {
    const { t } = await open("mix");
    const [a, b, c, d, lost] = await leases(t, 5);
    // `lost`: nacked by someone else, then claimed again: our lease is fenced off.
    await t.nack(lost as Lease, 0);
    const thief = (await t.claim("thief", 60)) as Lease;
    expect(thief.seq).toBe((lost as Lease).seq);

    const outcomes = await t.settle([
      { action: "ack", lease: a as Lease },
      { action: "nack", lease: (b as Lease).id, delay: 60 },
      { action: "release", lease: c as Lease },
      { action: "ack", lease: lost as Lease },
      { action: "nack", lease: d as Lease },
      { action: "ack", lease: a as Lease },
    ]);
    expect(outcomes.map((o) => ({ ...o, error: o.error?.code }))).toEqual([
      { leaseId: (a as Lease).id, action: "ack", error: undefined },
      { leaseId: (b as Lease).id, action: "nack", deadLettered: false, error: undefined },
      { leaseId: (c as Lease).id, action: "release", error: undefined },
      { leaseId: (lost as Lease).id, action: "ack", error: "LEASE_LOST" },
      { leaseId: (d as Lease).id, action: "nack", deadLettered: false, error: undefined },
      { leaseId: (a as Lease).id, action: "ack", error: "LEASE_NOT_FOUND" },
    ]);
    expect(outcomes[3]?.error).toBeInstanceOf(QueueError);
    const stats = await t.stats();
    // a acked; b parked; c and d free again (c's attempt not spent); the thief's lease untouched.
    expect({ parked: stats.parked, inFlight: stats.inFlight, ready: stats.ready }).toEqual({
      parked: 1,
      inFlight: 1,
      ready: 2,
    });
    const again = await t.claimMany("w2", 60, 10);
    expect(again.map((l) => [l.seq, l.attempts])).toEqual(
      expect.arrayContaining([
        [(c as Lease).seq, 1],
        [(d as Lease).seq, 2],
      ]),
    );
    await t.ack(thief);
    await checkInvariants(clientOf(t));
  });

  it("a nack of a message's last attempt moves it to the dead letters", async () => {
    const ns = await namespace("dead");
    const t = await LibsqlTransport.create(inject("nsSqldUrl"), { namespace: ns, maxAttempts: 1 });
    cleanups.push(() => t.close());
    const [l] = await leases(t, 1);
    expect(await t.settle([{ action: "nack", lease: l as Lease }])).toEqual([
      { leaseId: (l as Lease).id, action: "nack", deadLettered: true },
    ]);
    expect((await t.deadLetters()).map((d) => d.seq)).toEqual([(l as Lease).seq]);
  });

  it("refuses the whole list for one bad entry, naming it, and changes nothing", async () => {
    const { t } = await open("bad");
    const [a, b] = await leases(t, 2);
    const refused = async (list: unknown, field: string) => {
      const e = await t.settle(list as never).catch((x: unknown) => x);
      expect(e, field).toBeInstanceOf(QueueError);
      expect((e as QueueError).code).toBe("INVALID_ARGUMENT");
      expect((e as QueueError).field).toBe(field);
    };
    const ok = { action: "ack", lease: a };
    await refused("x", "settlements");
    await refused([], "settlements.length");
    await refused(
      Array.from({ length: MAX_SETTLE_BATCH + 1 }, () => ok),
      "settlements.length",
    );
    await refused([ok, { action: "done", lease: b }], "settlements[1].action");
    await refused([ok, { action: "ack", lease: "7" }], "settlements[1].lease");
    await refused([ok, { action: "release", lease: b, delay: 5 }], "settlements[1].delay");
    await refused([ok, { action: "nack", lease: b, delay: -1 }], "settlements[1].delay");
    await refused([ok, null], "settlements[1]");
    expect((await t.stats()).inFlight).toBe(2);
  });

  it("256 acks leave in one write batch and bill no more rows than 256 acks sent one by one", async () => {
    const one = await open("one");
    const many = await open("many");
    const [singles, batch] = await Promise.all([leases(one.t, 256), leases(many.t, 256)]);
    const before = await Promise.all([billed(inject("nsAdminUrl"), one.ns), billed(inject("nsAdminUrl"), many.ns)]);
    const requests: number[] = [];
    // Write batches only (not the request that closes a stream left idle: src/core/hrana.ts).
    many.proxy.observe = (text) => {
      if (text.includes('"type":"batch"')) requests.push(text.split(ACK).length - 1);
    };
    for (const l of singles) await one.t.ack(l);
    const outcomes = await many.t.settle(batch.map((lease) => ({ action: "ack" as const, lease })));
    const after = await Promise.all([billed(inject("nsAdminUrl"), one.ns), billed(inject("nsAdminUrl"), many.ns)]);

    expect(outcomes.filter((o) => o.error !== undefined)).toEqual([]);
    expect(requests).toEqual([256]);
    const rows = (i: 0 | 1) => ({
      read: (after[i] as { read: number }).read - (before[i] as { read: number }).read,
      written: (after[i] as { written: number }).written - (before[i] as { written: number }).written,
    });
    // The same rows written; fewer read (a request's own reads are paid once for the batch).
    expect(rows(1).written).toBe(rows(0).written);
    expect(rows(1).read).toBeLessThanOrEqual(rows(0).read);
    expect((await many.t.stats()).groups).toBe(0);
  });
});

describe("ShardedQueue.settle", () => {
  it("sends one settle per shard, its outcomes named as the queue names its leases, in the order given", async () => {
    const shards = await Promise.all([0, 1, 2].map(async (i) => (await open(`shard${i}`)).t));
    const q = new ShardedQueue(shards);
    const calls: number[] = [];
    shards.forEach((s, i) => {
      const settle = s.settle.bind(s);
      s.settle = (list) => {
        calls.push(i);
        return settle(list);
      };
    });
    await q.publishMany(Array.from({ length: 12 }, (_, i) => ({ groupId: `g${i}`, event: { i } })));
    const got = await q.claimMany("w", 60, 12);
    expect(got).toHaveLength(12);
    const list = got.map((lease, i) =>
      i % 3 === 0
        ? { action: "ack" as const, lease }
        : i % 3 === 1
          ? { action: "release" as const, lease }
          : { action: "nack" as const, lease, delay: 30 },
    );
    // A lease of a shard this queue does not have: its own outcome, the others unharmed.
    const stray = `${shardedSeq.of(1, 5, 3)}.${(got[0] as Lease).id.split(".")[1]}`;
    const outcomes = await q.settle([...list, { action: "ack", lease: stray }]);
    expect(outcomes.slice(0, 12).map((o) => [o.leaseId, o.action, o.error])).toEqual(
      list.map((s) => [s.lease.id, s.action, undefined]),
    );
    expect(outcomes[12]).toMatchObject({ leaseId: stray, action: "ack", error: { code: "LEASE_NOT_FOUND" } });
    expect(calls.sort()).toEqual([0, 1, 2]);
    const stats = await q.stats();
    expect({ parked: stats.parked, ready: stats.ready, inFlight: stats.inFlight }).toEqual({
      parked: 4,
      ready: 4,
      inFlight: 0,
    });
  });

  it("a shard that cannot be reached fails its leases alone", async () => {
    const shards = await Promise.all([0, 1].map(async (i) => (await open(`down${i}`)).t));
    const q = new ShardedQueue(shards);
    await q.publishMany(Array.from({ length: 8 }, (_, i) => ({ groupId: `g${i}`, event: { i } })));
    const got = await q.claimMany("w", 60, 8);
    const down = shards[1] as LibsqlTransport;
    down.settle = () => Promise.reject(new QueueError("UNAVAILABLE", "the database could not be reached"));
    const outcomes = await q.settle(got.map((lease) => ({ action: "ack", lease })));
    const onDown = (l: Lease) => q.shardOf(l.groupId) === 1;
    expect(outcomes.map((o) => o.error?.code)).toEqual(got.map((l) => (onDown(l) ? "UNAVAILABLE" : undefined)));
    // Read from the shards themselves: the queue now leaves the shard it found down out of its stats.
    const inFlight = (await Promise.all(shards.map((s) => s.stats()))).reduce((a, s) => a + s.inFlight, 0);
    expect(inFlight).toBe(got.filter(onDown).length);
  });
});
