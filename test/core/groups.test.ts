/**
 * A group's messages: peek (the next ones in delivery order, each with its state, nothing claimed)
 * and purge (all of them, the one in flight included, in chunks; a message published meanwhile is
 * kept; its dead letters stay), on a file and on sqld, and over a sharded queue.
 */
import { describe, expect, it } from "vitest";
import { clientOf } from "../../src/core/internals.js";
import { ShardedQueue } from "../../src/core/sharded.js";
import { purgePlan } from "../../src/core/sql/index.js";
import { LibsqlTransport, QueueError } from "../../src/index.js";
import { PURGE_CHUNK } from "../../src/rules.js";
import { checkInvariants, targets, tempFile } from "../support/db.js";

describe.each(targets)("peek and purge on $name", (target) => {
  it("peek answers the next messages in delivery order with their state, and changes nothing", async () => {
    const t = await target.open();
    await t.publishMany([
      { groupId: "g", event: { n: 1 } },
      { groupId: "g", event: { n: 2 } },
      { groupId: "g", event: { n: 3 }, delay: 3600 },
      { groupId: "other", event: { n: 4 } },
    ]);
    const lease = await t.claim("w", 30);
    expect(lease?.groupId).toBe("g");
    const before = await t.stats();
    const seen = await t.peek("g");
    expect(seen.map((m) => [m.event, m.state, m.attempts])).toEqual([
      [{ n: 1 }, "in_flight", 1],
      [{ n: 2 }, "queued", 0],
      [{ n: 3 }, "delayed", 0],
    ]);
    expect(seen[0]?.until).toBe(lease?.expiresAt);
    expect(seen[1]?.until).toBeNull();
    expect(seen[2]?.until).toBeGreaterThan(before.now + 3500);
    expect(seen.every((m) => m.groupId === "g" && (m.publishedAt ?? 0) > before.now - 60)).toBe(true);
    expect(await t.peek("g", { limit: 1 })).toHaveLength(1);
    expect(await t.peek("nobody")).toEqual([]);

    await t.nack(lease as NonNullable<typeof lease>, 600);
    expect((await t.peek("g", { limit: 1 }))[0]?.state).toBe("parked");
    const after = await t.stats();
    expect({ ...after, now: 0, oldestAge: 0, lag: [] }).toEqual({
      ...before,
      inFlight: 0,
      parked: 1,
      now: 0,
      oldestAge: 0,
      lag: [],
    });
    t.close();
  });

  it("refuses a bad group id or limit, naming it", async () => {
    const t = await target.open();
    for (const [call, field] of [
      [() => t.peek(""), "groupId"],
      [() => t.peek("g", { limit: 0 }), "limit"],
      [() => t.peek("g", { limit: 101 }), "limit"],
      [() => t.purge(42 as unknown as string), "groupId"],
    ] as const) {
      const e = await call().catch((x: unknown) => x);
      expect(e).toBeInstanceOf(QueueError);
      expect((e as QueueError).field).toBe(field);
    }
    t.close();
  });

  it("purge deletes the group's messages, the one in flight included; other groups and dead letters stay", async () => {
    const t = await target.open({ maxAttempts: 1 });
    await t.publishMany([
      ...Array.from({ length: 5 }, (_, i) => ({ groupId: "g", event: i })),
      { groupId: "kept", event: "k" },
    ]);
    // g's first message dies at its first nack; its second is then in flight.
    const first = await t.claim("w", 30);
    expect(first?.groupId).toBe("g");
    expect((await t.nack(first as NonNullable<typeof first>)).deadLettered).toBe(true);
    const held = (await t.claimMany("w", 30, 2)).find((l) => l.groupId === "g");
    expect(held?.event).toBe(1);

    expect(await t.purge("g")).toBe(4);
    expect(await t.peek("g")).toEqual([]);
    expect(await t.stats()).toMatchObject({ groups: 1, inFlight: 1, deadLetters: 1 });
    // The purged lease is gone: its ack says so.
    const lost = await t.ack(held as NonNullable<typeof held>).catch((x: unknown) => x);
    expect((lost as QueueError).code).toBe("LEASE_NOT_FOUND");
    expect((await t.deadLetters({ groupId: "g" })).map((d) => d.event)).toEqual([0]);
    expect(await t.purge("g")).toBe(0);
    expect((await t.peek("kept")).map((m) => m.event)).toEqual(["k"]);
    await checkInvariants(clientOf(t));
    t.close();
  });

  it(`purge goes in writes of ${PURGE_CHUNK}, and keeps what was published after it began`, async () => {
    const t = await target.open();
    const n = PURGE_CHUNK * 2 + 7;
    for (let i = 0; i < n; i += 1000) {
      await t.publishMany(Array.from({ length: Math.min(1000, n - i) }, (_, k) => ({ groupId: "deep", event: i + k })));
    }
    // A purge taken apart: its first write fixes the bound (the queue's last seq), then a publish comes.
    const write = async (upTo: number | null) => {
      const plan = purgePlan("deep", upTo, PURGE_CHUNK);
      return plan.read(await clientOf(t).batch(plan.stmts, "write"), false);
    };
    const first = await write(null);
    expect(first.deleted).toBe(PURGE_CHUNK);
    await t.publish("deep", "later");
    let purged = first.deleted;
    for (;;) {
      const { deleted } = await write(first.upTo);
      purged += deleted;
      if (deleted < PURGE_CHUNK) break;
    }
    expect(purged).toBe(n);
    expect((await t.peek("deep")).map((m) => m.event)).toEqual(["later"]);

    // Through the library: every message, however deep.
    await t.publishMany(Array.from({ length: PURGE_CHUNK }, (_, k) => ({ groupId: "deep", event: k })));
    expect(await t.purge("deep")).toBe(PURGE_CHUNK + 1);
    expect((await t.stats()).groups).toBe(0);
    await checkInvariants(clientOf(t));
    t.close();
  });
});

it("over a sharded queue: peek and purge go to the group's shard, seqs named as the queue names them", async () => {
  const shards = await Promise.all([0, 1, 2].map(() => LibsqlTransport.create(`file:${tempFile()}`)));
  const q = new ShardedQueue(shards);
  const seqs = await q.publishMany(Array.from({ length: 30 }, (_, i) => ({ groupId: `g${i % 6}`, event: i })));
  const g = "g4";
  const mine = seqs.filter((_, i) => `g${i % 6}` === g);
  expect((await q.peek(g)).map((m) => m.seq)).toEqual(mine);
  expect(await q.purge(g)).toBe(5);
  expect(await q.peek(g)).toEqual([]);
  expect((await q.stats()).groups).toBe(5);
  q.close();
});
