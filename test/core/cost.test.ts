/**
 * What each operation costs on Turso's bill, measured with sqld's own counters (rows read, rows
 * written). Row counts are deterministic, so they are asserted against the budgets in docs/architecture.md's
 * "What it costs" (`npm run bench` prints the same table at 1,000,000 messages, with prices).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CostCase, costCases, costTarget, perMessage } from "../../scripts/bench/cost.js";
import type { Sqld } from "../../scripts/support/sqld.js";
import { AGE_WINDOW } from "../../src/core/sql/index.js";
import type { LibsqlTransport } from "../../src/index.js";

let sqld: Sqld;
let t: LibsqlTransport;
let cases: CostCase[];

beforeAll(async () => {
  ({ sqld, t } = await costTarget());
  cases = await costCases(sqld, t, { depths: [1000, 20_000], runs: 10 });
  console.log(cases.map((c) => `${c.name}: ${c.written} written, ${c.read} read per ${c.per}`).join("\n"));
}, 120_000);

afterAll(async () => {
  t?.close();
  await sqld?.stop();
});

const get = (name: string) => {
  const c = cases.find((x) => x.name === name);
  if (!c) throw new Error(`no case ${name}`);
  return c;
};

describe("rows billed per operation, over HTTP with default options", () => {
  it("a message (publish, claim, ack) writes 10 rows and reads at most 30, the same at 1,000 and 20,000 deep", () => {
    const shallow = perMessage(cases, "1,000");
    const deep = perMessage(cases, "20,000");
    // 10 = the spec's own statements (8) + the publisher slot that makes resends safe (1) + putting
    // the group back into the round-robin index on ack (1): see BENCHMARKS.md for the floor.
    expect(shallow.written).toBeLessThanOrEqual(10);
    expect(shallow.read).toBeLessThanOrEqual(30);
    expect(deep).toEqual(shallow);
  });

  it("a claim that finds nothing reads at most 10 rows, however many groups are in flight", () => {
    const empty = ["10", "100", "10,000"].map((n) => get(`empty claim, ${n} groups in flight`));
    for (const c of empty) {
      expect(c.written).toBe(0);
      expect(c.read).toBeLessThanOrEqual(10);
    }
    expect(new Set(empty.map((c) => c.read)).size).toBe(1);
  });

  it("an idempotency key of the user's costs at most 3 rows written more than a publish without", () => {
    const plain = get("publish, no key of yours (depth 1,000)");
    expect(get("publish with an Idempotency-Key").written - plain.written).toBeLessThanOrEqual(3);
  });

  it("batches amortize what a request costs: publishMany(100) writes about 2 rows a message", () => {
    expect(get("publishMany(100)").written).toBeLessThanOrEqual(2.05);
    const cycle = get("claim + ack (depth 1,000)");
    const batched = get("claimMany(32) + 32 acks");
    expect(batched.written).toBeLessThanOrEqual(cycle.written);
    expect(batched.read).toBeLessThanOrEqual(30);
  });

  it("nack, park and extend write at most 3 rows", () => {
    expect(get("nack (retry now)").written).toBeLessThanOrEqual(3);
    expect(get("nack with a delay (park)").written).toBeLessThanOrEqual(2);
    expect(get("extend").written).toBeLessThanOrEqual(2);
  });

  it("stats()' ages read at most the oldest 20 messages, even past a thousand delayed ones", () => {
    for (const delayed of ["0", "1,000"]) {
      const ages = get(`stats()' ages, ${delayed} delayed at the head`);
      expect(ages.written).toBe(0);
      expect(ages.read).toBeLessThanOrEqual(AGE_WINDOW);
    }
  });

  it("stats() and a dead-letter page read far fewer rows than the queue holds, and write none", () => {
    for (const depth of [1000, 20_000]) {
      const d = depth.toLocaleString("en-US");
      const stats = get(`stats() (${d} messages)`);
      expect(stats.written).toBe(0);
      // Table sizes come from b-tree counts (about a row read per page), live leases from the lock index.
      expect(stats.read).toBeLessThanOrEqual(50 + depth / 50);
      const page = get(`dead-letter page of 100 (${d} dead letters)`);
      expect(page.written).toBe(0);
      expect(page.read).toBeLessThanOrEqual(102);
    }
  });

  it("a peek reads the messages it answers; a purge writes the rows it deletes, at any depth", () => {
    for (const depth of [1000, 20_000]) {
      const peek = get(`peek of 10 (${depth.toLocaleString("en-US")} messages)`);
      expect(peek.written).toBe(0);
      expect(peek.read).toBeLessThanOrEqual(11);
      const purge = get(`purge of a group (${(depth / 100).toLocaleString("en-US")} messages)`);
      // Its group's row goes with the last message; the delete trigger reads a few rows per message.
      expect(purge.written).toBeLessThanOrEqual(1.1);
      expect(purge.read).toBeLessThanOrEqual(10);
    }
  });
});
