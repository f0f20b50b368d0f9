/**
 * Flow control in the library: a group's concurrency above one, its rate, a queue's and a group's
 * pause, singleton publishes, and settings refused whole. On a local file and on sqld.
 */
import { afterEach, describe, expect, inject, it } from "vitest";
import { clientOf } from "../../src/core/internals.js";
import { type Lease, LibsqlTransport, QueueError, ShardedQueue } from "../../src/index.js";
import { checkInvariants, resetDatabase, targets, tempFile } from "../support/db.js";

/** Messages started before an earlier message of their group ever was (its publish order broken). */
const OUT_OF_ORDER = `SELECT m.seq FROM messages m WHERE m.tq_attempts IS NOT NULL
  AND EXISTS (SELECT 1 FROM messages e WHERE e.group_id = m.group_id AND e.seq < m.seq AND e.tq_attempts IS NULL)`;

describe.each(targets)("flow control on $name", (target) => {
  let t: LibsqlTransport;
  afterEach(async () => {
    if (t) {
      await checkInvariants(clientOf(t));
      t.close();
    }
  });

  it("group_concurrency 3 with 64 claimers: never more than 3 leases per group, started in publish order", async () => {
    t = await target.open();
    await t.setQueue({ groupConcurrency: 3 });
    const groups = ["a", "b", "c", "d"];
    const perGroup = 30;
    await t.publishMany(
      Array.from({ length: perGroup * groups.length }, (_, i) => ({
        groupId: groups[i % groups.length] as string,
        event: { i },
      })),
    );
    const live = new Map<string, number>();
    let most = 0;
    const started: Lease[] = [];
    let done = 0;
    const claimer = async (w: number) => {
      while (done < perGroup * groups.length) {
        const lease = await t.claim(`w${w}`, 30);
        if (lease === null) {
          await new Promise((r) => setTimeout(r, 5));
          continue;
        }
        started.push(lease);
        const n = (live.get(lease.groupId) ?? 0) + 1;
        live.set(lease.groupId, n);
        most = Math.max(most, n);
        await new Promise((r) => setTimeout(r, 2 + (w % 7)));
        // Counted out before the ack is sent: the count never runs ahead of the database's.
        live.set(lease.groupId, (live.get(lease.groupId) ?? 1) - 1);
        await t.ack(lease);
        done++;
      }
    };
    const sampler = async () => {
      while (done < perGroup * groups.length) {
        await checkInvariants(clientOf(t));
        expect((await clientOf(t).execute(OUT_OF_ORDER)).rows).toEqual([]);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    await Promise.all([...Array.from({ length: 64 }, (_, w) => claimer(w)), sampler()]);
    expect(most).toBe(3);
    expect(started).toHaveLength(perGroup * groups.length);
    // Each group's messages were leased in publish order (their lease deadlines never go back).
    for (const g of groups) {
      const mine = started.filter((l) => l.groupId === g).sort((x, y) => x.seq - y.seq);
      expect(mine.map((l) => l.attempts)).toEqual(mine.map(() => 1));
      for (let i = 1; i < mine.length; i++) {
        expect((mine[i] as Lease).expiresAt).toBeGreaterThanOrEqual((mine[i - 1] as Lease).expiresAt);
      }
    }
  });

  it("claimMany takes up to a group's concurrency from one group, in publish order", async () => {
    t = await target.open();
    await t.setQueue({ groupConcurrency: 4 });
    for (let i = 0; i < 6; i++) await t.publish("g", i);
    const got = await t.claimMany("w", 30, 10);
    expect(got.map((l) => l.event)).toEqual([0, 1, 2, 3]);
    expect(await t.claim("w", 30)).toBeNull();
    await t.ack(got[2] as Lease);
    expect((await t.claim("w", 30))?.event).toBe(4);
    // A publish into a group whose window was full but short gives it a free slot at once.
    await t.setGroup("h", { concurrency: 2 });
    await t.publish("h", "h0");
    const h0 = (await t.claim("w", 30)) as Lease;
    expect(h0.event).toBe("h0");
    await t.publish("h", "h1");
    expect((await t.claim("w", 30))?.event).toBe("h1");
  });

  it("a rate of 5 per second: a group's claims over 10 s stay within 5 × 10 + the burst (1)", async () => {
    t = await target.open();
    await t.setQueue({ groupRate: { limit: 5, period: 1 } });
    await t.publishMany(Array.from({ length: 200 }, (_, i) => ({ groupId: "api", event: i })));
    await t.publish("other", "free");
    const stamps: number[] = [];
    let first: number | undefined;
    // Four claimers at once, acking at once, for ten seconds of the database's clock.
    const claimer = async () => {
      for (;;) {
        const lease = await t.claim("w", 30);
        if (lease !== null) {
          const at = lease.expiresAt - 30;
          first ??= at;
          if (lease.groupId === "api") stamps.push(at);
          await t.ack(lease);
        }
        const now = (await t.stats()).now;
        if (first !== undefined && now > first + 10) return;
        if (lease === null) await new Promise((r) => setTimeout(r, 10));
      }
    };
    await Promise.all([claimer(), claimer(), claimer(), claimer()]);
    const start = Math.min(...stamps);
    const within = stamps.filter((s) => s < start + 10).length;
    expect(within).toBeLessThanOrEqual(5 * 10 + 1);
    // Messages over the rate wait; none is dropped, and the rate is used.
    expect(within).toBeGreaterThanOrEqual(20);
    expect((await t.stats()).groups).toBeGreaterThanOrEqual(1);
    const spacing = stamps
      .sort((a, b) => a - b)
      .slice(1)
      .map((s, i) => s - (stamps[i] as number));
    expect(Math.min(...spacing)).toBeGreaterThanOrEqual(0.2 - 0.002);
  }, 60_000);

  it("a rate's burst lets that many go back to back, then one per interval; a group that empties keeps its pace", async () => {
    t = await target.open();
    await t.setGroup("g", { rate: { limit: 2, period: 60, burst: 2 } });
    for (let i = 0; i < 4; i++) await t.publish("g", i);
    const a = (await t.claim("w", 30)) as Lease;
    await t.ack(a);
    const b = (await t.claim("w", 30)) as Lease;
    await t.ack(b);
    expect([a.event, b.event]).toEqual([0, 1]);
    expect(await t.claim("w", 30)).toBeNull();
    const s = await t.groupSettings("g");
    expect(s.rateLimitedUntil).toBeGreaterThan((await t.stats()).now + 20);
    // Emptied and published again: still held.
    await t.purge("g");
    await t.publish("g", "again");
    expect(await t.claim("w", 30)).toBeNull();
    expect((await t.groupSettings("g")).rateLimitedUntil).not.toBeNull();
    // Dropping the rate lets it go.
    await t.setGroup("g", { rate: null });
    expect((await t.claim("w", 30))?.event).toBe("again");
  });

  it("a paused queue delivers nothing and keeps accepting publishes until resumed", async () => {
    t = await target.open();
    await t.publish("g", 1);
    await t.setQueue({ paused: true });
    await t.publish("h", 2);
    expect(await t.claim("w", 30)).toBeNull();
    expect(await t.claimMany("w", 30, 10)).toEqual([]);
    expect(await t.queueSettings()).toMatchObject({ paused: true });
    await t.setQueue({ paused: false });
    expect((await t.claimMany("w", 30, 10)).map((l) => l.event)).toEqual([1, 2]);
  });

  it("a paused group delivers nothing (its lapsed lease included) while the others go on", async () => {
    t = await target.open();
    await t.publish("g", "g1");
    await t.publish("g", "g2");
    await t.publish("h", "h1");
    const held = (await t.claim("w", 0.2)) as Lease;
    expect(held.groupId).toBe("g");
    await t.setGroup("g", { paused: true });
    await new Promise((r) => setTimeout(r, 300));
    expect((await t.claimMany("w", 30, 10)).map((l) => l.event)).toEqual(["h1"]);
    expect(await t.claim("w", 30)).toBeNull();
    expect(await t.groupSettings("g")).toMatchObject({ paused: true, own: { paused: true } });
    await t.resetGroup("g");
    expect((await t.claim("w", 30))?.event).toBe("g1");
    // Back to the defaults: the switch is off again.
    expect((await clientOf(t).execute("SELECT count(*) AS n FROM tq_settings")).rows[0]?.n).toBe(0);
  });

  it("singleton: 32 concurrent publishers of one key store one message; replace keeps the last event", async () => {
    t = await target.open();
    const got = await Promise.all(
      Array.from({ length: 32 }, (_, i) => t.publishSingleton("sync", { i }, 0, { singletonKey: "sync-42" })),
    );
    const seqs = new Set(got.map((g) => g.seq));
    expect(seqs.size).toBe(1);
    expect(got.filter((g) => !g.deduplicated)).toHaveLength(1);
    const replaced = await Promise.all(
      Array.from({ length: 32 }, (_, i) =>
        t.publishSingleton("sync", { r: i }, 0, { singletonKey: "sync-42", replace: true }),
      ),
    );
    expect(new Set(replaced.map((g) => g.seq))).toEqual(seqs);
    expect(replaced.every((g) => g.deduplicated && g.replaced)).toBe(true);
    expect((await t.stats()).groups).toBe(1);
    const peeked = await t.peek("sync");
    expect(peeked).toHaveLength(1);
    expect(replaced.map((r) => r.seq)).toContain(peeked[0]?.seq);
    // Claimed: the next publish with the key is stored anew.
    const lease = (await t.claim("w", 30)) as Lease;
    const next = await t.publishSingleton("sync", "new", 0, { singletonKey: "sync-42" });
    expect(next.deduplicated).toBe(false);
    expect(next.seq).not.toBe(lease.seq);
    // An idempotency key with a singleton: the same answer again.
    const keyed = await t.publishSingleton("sync", "x", 0, { singletonKey: "sync-42", idempotencyKey: "k1" });
    expect(keyed).toMatchObject({ seq: next.seq, deduplicated: true });
    expect(await t.publishSingleton("sync", "x", 0, { singletonKey: "sync-42", idempotencyKey: "k1" })).toMatchObject({
      seq: next.seq,
    });
  });

  it("hostile settings are refused naming the field, and change nothing", async () => {
    t = await target.open();
    const refused = async (p: Promise<unknown>, field: string) => {
      const e = await p.then(
        () => undefined,
        (x: unknown) => x,
      );
      expect(e).toBeInstanceOf(QueueError);
      expect((e as QueueError).code).toBe("INVALID_ARGUMENT");
      expect((e as QueueError).field).toBe(field);
    };
    await refused(t.setQueue({ groupConcurrency: 0 }), "settings.groupConcurrency");
    await refused(t.setQueue({ groupConcurrency: 1001 }), "settings.groupConcurrency");
    await refused(t.setQueue({ groupConcurrency: 2.5 }), "settings.groupConcurrency");
    await refused(t.setQueue({ groupRate: { limit: -1, period: 1 } }), "settings.groupRate.limit");
    await refused(t.setQueue({ groupRate: { limit: 5, period: 0 } }), "settings.groupRate.period");
    await refused(t.setQueue({ groupRate: { limit: 5, period: 1, burst: 6 } }), "settings.groupRate.burst");
    await refused(t.setQueue({ groupRate: { limit: 1e12, period: 1 } }), "settings.groupRate.limit");
    await refused(t.setQueue({ paused: "yes" as unknown as boolean }), "settings.paused");
    await refused(t.setQueue({ shards: 2 } as never), "settings.shards");
    await refused(t.setGroup("g", { concurrency: -3 }), "settings.concurrency");
    await refused(t.setGroup("g", { rate: { limit: 1, period: 1, extra: 1 } as never }), "settings.rate.extra");
    await refused(t.publish("g", 1, 0, { replace: true }), "options.replace");
    await refused(t.publishMany([{ groupId: "g", event: 1 }], { singletonKey: "k" }), "options.singletonKey");
    expect(await t.queueSettings()).toEqual({ groupConcurrency: 1, groupRate: null, paused: false });
    expect((await t.groupSettings("g")).own).toEqual({});
    expect((await clientOf(t).execute("SELECT count(*) AS n FROM tq_settings")).rows[0]?.n).toBe(0);
  });
});

describe("flow control on a sharded queue", () => {
  it("sets the queue's settings on every shard, a group's and a schedule's on its group's shard", async () => {
    const q = await ShardedQueue.open([`file:${tempFile()}`, `file:${tempFile()}`]);
    try {
      expect(await q.setQueue({ groupConcurrency: 2, paused: true })).toMatchObject({
        groupConcurrency: 2,
        paused: true,
      });
      const groups = Array.from({ length: 8 }, (_, i) => `g${i}`);
      for (const g of groups) await q.publishMany([0, 1, 2].map((i) => ({ groupId: g, event: `${g}-${i}` })));
      expect(await q.claimMany("w", 30, 100)).toEqual([]);
      await q.setQueue({ paused: false });
      const got = await q.claimMany("w", 30, 100);
      // Two per group, on every shard.
      expect(got).toHaveLength(16);
      await q.setGroup("g0", { paused: true });
      expect((await q.groupSettings("g0")).paused).toBe(true);
      expect((await q.groupSettings("g1")).paused).toBe(false);
      const s = await q.putSchedule("nightly", {
        groupId: "g3",
        event: "report",
        cron: "0 2 * * *",
        timeZone: "Europe/Paris",
      });
      expect(s).toMatchObject({ created: true, groupId: "g3" });
      expect(s.nextAt).toBeGreaterThan(Date.now() / 1000);
      expect((await q.schedules()).map((x) => x.name)).toEqual(["nightly"]);
      // Moved to another group's shard: still one.
      await q.putSchedule("nightly", { groupId: "g4", event: "report", every: 3600 });
      expect((await q.schedules()).map((x) => x.groupId)).toEqual(["g4"]);
      const single = await q.publishSingleton("g5", "once", 0, { singletonKey: "k" });
      expect(await q.publishSingleton("g5", "twice", 0, { singletonKey: "k" })).toMatchObject({
        seq: single.seq,
        deduplicated: true,
      });
      expect(await q.deleteSchedule("nightly")).toBe(true);
    } finally {
      q.close();
    }
  });
});

// Flow settings written by another process: a transport learns of them from its next publish.
describe.each([
  { name: "file", database: async () => `file:${tempFile()}` },
  {
    name: "sqld",
    database: async () => {
      const t = await LibsqlTransport.create(inject("sqldUrl"));
      await resetDatabase(clientOf(t));
      t.close();
      return inject("sqldUrl");
    },
  },
])("flow settings from elsewhere, on $name", ({ database }) => {
  it("a consumer that last saw no flow setting claims as the settings made elsewhere ask", async () => {
    const url = await database();
    const consumer = await LibsqlTransport.create(url);
    const other = await LibsqlTransport.create(url);
    try {
      // Its last claim found nothing and saw no setting: its next one walks as if none were in force.
      expect(await consumer.claimMany("w", 30, 10)).toEqual([]);
      await other.setQueue({ groupConcurrency: 3 });
      await other.setGroup("paused", { paused: true });
      await other.publishMany([
        ...[1, 2, 3, 4].map((n) => ({ groupId: "x", event: n })),
        { groupId: "paused", event: "p" },
      ]);
      // Three at once from one group (its window), none from the paused one.
      expect((await consumer.claimMany("w", 30, 10)).map((l) => l.event)).toEqual([1, 2, 3]);
      await checkInvariants(clientOf(consumer));
    } finally {
      other.close();
      consumer.close();
    }
  });

  it("a publisher that last saw no flow setting, after another process paused two groups, stores them paused, once", async () => {
    const url = await database();
    const t = await LibsqlTransport.create(url);
    const other = await LibsqlTransport.create(url);
    try {
      // This transport's last publish saw no setting in force: its next one is written without them.
      await t.publish("g", "g1");
      expect((await t.claim("w", 30))?.event).toBe("g1");
      await other.setGroup("new", { paused: true });
      await other.setGroup("newer", { paused: true });
      const seq = await t.publish("new", "n1");
      await t.publishMany([
        { groupId: "newer", event: "n2" },
        { groupId: "open", event: "o1" },
      ]);
      expect((await t.claimMany("w", 30, 10)).map((l) => l.event)).toEqual(["o1"]);
      await other.resetGroup("new");
      await other.resetGroup("newer");
      expect((await t.claimMany("w", 30, 10)).map((l) => [l.seq, l.event])).toEqual([
        [seq, "n1"],
        [seq + 1, "n2"],
      ]);
      await checkInvariants(clientOf(t));
    } finally {
      other.close();
      t.close();
    }
  });
});
