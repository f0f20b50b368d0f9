/**
 * How far behind a queue is (stats' oldestAge and lag): a message's age runs from its publish, or
 * for a delayed one from when it came due; one not due yet, or one the spec's Python transports
 * wrote (no publish time), has none. Times are set in the database, so that ages are exact.
 */
import { describe, expect, it } from "vitest";
import { clientOf } from "../../src/core/internals.js";
import type { LibsqlTransport } from "../../src/index.js";
import { targets } from "../support/db.js";
import { pyPublish } from "../support/python.js";

/** Moves a message's publish time `ago` seconds back, on the database's clock. */
async function publishedAgo(t: LibsqlTransport, seq: number, ago: number): Promise<void> {
  await clientOf(t).execute({
    sql: "UPDATE messages SET tq_published_at = unixepoch('subsec') - ? WHERE seq = ?",
    args: [ago, seq],
  });
}

describe.each(targets)("stats' ages on $name", (target) => {
  it("an empty queue has no oldest age and no lag", async () => {
    const t = await target.open();
    expect(await t.stats()).toMatchObject({ oldestAge: null, lag: [] });
    t.close();
  });

  it("the oldest message's age, and each group's, the most behind first", async () => {
    const t = await target.open();
    const [a1, a2, b1, c1] = await t.publishMany([
      { groupId: "a", event: 1 },
      { groupId: "a", event: 2 },
      { groupId: "b", event: 3 },
      { groupId: "c", event: 4 },
    ]);
    await publishedAgo(t, a1 as number, 300);
    await publishedAgo(t, a2 as number, 200);
    await publishedAgo(t, b1 as number, 100);
    await publishedAgo(t, c1 as number, 500);
    const s = await t.stats();
    expect(s.oldestAge).toBeGreaterThanOrEqual(500);
    expect(s.oldestAge).toBeLessThan(502);
    expect(s.lag.map((l) => l.groupId)).toEqual(["c", "a", "b"]);
    expect(s.lag[1]?.age).toBeGreaterThanOrEqual(300);
    // A leased message is still behind: it counts.
    const lease = await t.claim("w", 60);
    expect(lease?.groupId).toBe("a");
    expect((await t.stats()).lag.map((l) => l.groupId)).toEqual(["c", "a", "b"]);
    t.close();
  });

  it("a delayed message counts only once due, from when it came due", async () => {
    const t = await target.open();
    const later = await t.publish("later", 1, 0, { delay: 3600 });
    expect(await t.stats()).toMatchObject({ oldestAge: null, lag: [], delayed: 1 });
    const now = await t.publish("now", 2);
    await publishedAgo(t, now, 10);
    expect((await t.stats()).lag.map((l) => l.groupId)).toEqual(["now"]);
    // Due 40 s ago (published long before): its age runs from then.
    await clientOf(t).execute({
      sql: "UPDATE messages SET lock_expiry = unixepoch('subsec') - 40, tq_published_at = unixepoch('subsec') - 9000 WHERE seq = ?",
      args: [later],
    });
    const s = await t.stats();
    expect(s.lag.map((l) => l.groupId)).toEqual(["later", "now"]);
    expect(s.oldestAge).toBeGreaterThanOrEqual(40);
    expect(s.oldestAge).toBeLessThan(42);
    t.close();
  });

  it("a row the spec's Python transports wrote has no publish time, and no age", async () => {
    const t = await target.open();
    await pyPublish(clientOf(t), "py", { from: "python" });
    const s = await t.stats();
    expect(s).toMatchObject({ ready: 1, oldestAge: null, lag: [] });
    t.close();
  });
});
