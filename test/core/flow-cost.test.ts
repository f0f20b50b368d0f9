/**
 * What flow control costs, on sqld's own counters: an empty claim reads a bounded number of rows
 * however many groups are paused or held by their rate (docs/architecture.md states the bound).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costTarget, measure, reset } from "../../scripts/bench/cost.js";
import type { Sqld } from "../../scripts/support/sqld.js";
import { clientOf } from "../../src/core/internals.js";
import type { LibsqlTransport } from "../../src/index.js";
import { checkInvariants } from "../support/db.js";

let sqld: Sqld;
let t: LibsqlTransport;

beforeAll(async () => {
  ({ sqld, t } = await costTarget());
}, 60_000);

afterAll(async () => {
  t?.close();
  await sqld?.stop();
});

/** Rows an empty claim reads, on average over a few. */
async function emptyClaim(): Promise<number> {
  const rows = await measure(sqld, 5, async () => {
    for (let i = 0; i < 5; i++) if ((await t.claim("w", 60)) !== null) throw new Error("not empty");
  });
  expect(rows.written).toBe(0);
  return rows.read;
}

/** Publishes in batches of 1,000. */
async function publishAll(messages: Array<{ groupId: string; event: unknown }>): Promise<void> {
  for (let i = 0; i < messages.length; i += 1000) await t.publishMany(messages.slice(i, i + 1000));
}

/** `n` groups of two messages each, each claimed and acked once under an hourly rate: all held by it. */
async function rateHeld(n: number, prefix: string): Promise<void> {
  await publishAll(Array.from({ length: 2 * n }, (_, i) => ({ groupId: `${prefix}${i % n}`, event: i })));
  for (let done = 0; done < n; ) {
    const got = await t.claimMany("w", 60, 100);
    if (got.length === 0) throw new Error("nothing to claim");
    await Promise.all(got.map((l) => t.ack(l)));
    done += got.length;
  }
}

/** `n` paused groups of one message each. */
async function paused(n: number, prefix: string): Promise<void> {
  await Promise.all(Array.from({ length: n }, (_, i) => t.setGroup(`${prefix}${i}`, { paused: true })));
  await publishAll(Array.from({ length: n }, (_, i) => ({ groupId: `${prefix}${i}`, event: i })));
}

describe("an empty claim with flow settings in force", () => {
  it("reads at most 16 rows, the same with 10 or 2,000 paused groups and 10 or 2,000 rate-held ones", async () => {
    const reads: number[] = [];
    for (const n of [10, 2000]) {
      await reset(t);
      await clientOf(t).batch(
        ["DELETE FROM tq_settings", "DELETE FROM tq_group_settings", "DELETE FROM tq_rates"],
        "write",
      );
      await t.setQueue({ groupRate: { limit: 1, period: 3600 } });
      await rateHeld(n, `r${n}-`);
      await paused(n, `p${n}-`);
      // Groups held by their leases too (the default path's case).
      await t.publishMany(Array.from({ length: 50 }, (_, i) => ({ groupId: `l${n}-${i}`, event: i })));
      const leased = await t.claimMany("w", 600, 50);
      expect(leased).toHaveLength(50);
      const stats = await t.stats();
      expect(stats.groups).toBe(2 * n + 50);
      reads.push(await emptyClaim());
      await checkInvariants(clientOf(t));
    }
    console.log(`empty claim with flow settings: ${reads.join(", ")} rows read`);
    for (const r of reads) expect(r).toBeLessThanOrEqual(16);
    expect(reads[1]).toBe(reads[0]);
  }, 120_000);

  it("a paused queue's empty claim is bounded the same way", async () => {
    await t.setQueue({ paused: true });
    expect(await emptyClaim()).toBeLessThanOrEqual(16);
    await t.setQueue({ paused: false });
  });
});
