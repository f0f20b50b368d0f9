/**
 * What each operation costs on Turso's bill: rows read and rows written, measured with sqld's own
 * counters (the ones Turso bills by) around each case. Row counts are deterministic, so the test
 * suite asserts them (test/core/cost.test.ts) and `npm run bench` prints them with prices.
 */

import type { InStatement } from "@libsql/client";
import { clientOf } from "../../src/core/internals.js";
import { statsPlan } from "../../src/core/sql/index.js";
import { type Lease, LibsqlTransport, type TransportOptions } from "../../src/index.js";
import { billed, type Sqld, startSqld } from "../support/sqld.js";

/** Turso's list prices past the plan's allowance (turso.tech/pricing): $1 per million rows written, $1 per billion read. */
export const TURSO_PER_ROW_WRITTEN = 1 / 1e6;
export const TURSO_PER_ROW_READ = 1 / 1e9;
/** SQS FIFO: $0.50 per million requests; a message takes three (send, receive, delete). */
export const SQS_FIFO_PER_MESSAGE = (3 * 0.5) / 1e6;
/** Cloudflare Queues: $0.40 per million operations; a message takes three (write, read, delete). */
export const CF_QUEUES_PER_MESSAGE = (3 * 0.4) / 1e6;

export interface Rows {
  read: number;
  written: number;
}

export interface CostCase extends Rows {
  name: string;
  /** What one unit is (an operation, a message). */
  per: string;
}

const round = (x: number) => Math.round(x * 100) / 100;

/** A fresh sqld with its admin API, and a transport on it (over HTTP, default options). */
export async function costTarget(options: TransportOptions = {}) {
  const sqld = await startSqld({ admin: true });
  const t = await LibsqlTransport.create(sqld.url, options);
  return { sqld, t };
}

/** Rows per unit billed while `fn` runs `units` units. */
export async function measure(sqld: Sqld, units: number, fn: () => Promise<unknown>): Promise<Rows> {
  const admin = sqld.adminUrl as string;
  const before = await billed(admin);
  await fn();
  const after = await billed(admin);
  return { read: round((after.read - before.read) / units), written: round((after.written - before.written) / units) };
}

async function exec(t: LibsqlTransport, sql: string): Promise<void> {
  await clientOf(t).execute(sql);
}

/** Empties the queue (not measured). */
export async function reset(t: LibsqlTransport): Promise<void> {
  await clientOf(t).batch(
    [
      "DELETE FROM messages",
      "DELETE FROM groups",
      "DELETE FROM tq_dead_letters",
      "DELETE FROM tq_idempotency",
      "DELETE FROM sqlite_sequence WHERE name = 'messages'",
    ],
    "write",
  );
}

/**
 * Fills the queue to `depth` messages in `groups` groups with plain SQL (the spec's publish, set-wise;
 * not measured), so that the measured operations run against a queue of that depth.
 */
export async function seed(t: LibsqlTransport, depth: number, groups: number, prefix = "seed"): Promise<void> {
  for (let done = 0; done < depth; ) {
    const n = Math.min(100_000, depth - done);
    await exec(
      t,
      `WITH RECURSIVE c(i) AS (SELECT ${done} UNION ALL SELECT i + 1 FROM c WHERE i < ${done + n - 1})
       INSERT INTO messages (group_id, event) SELECT '${prefix}' || (i % ${groups}), '{"i":' || i || '}' FROM c`,
    );
    done += n;
  }
  await exec(
    t,
    `INSERT OR IGNORE INTO groups (group_id) SELECT DISTINCT group_id FROM messages WHERE group_id LIKE '${prefix}%'`,
  );
}

/** Seeds `n` dead letters (not measured). */
export async function seedDeadLetters(t: LibsqlTransport, n: number): Promise<void> {
  for (let done = 0; done < n; ) {
    const k = Math.min(100_000, n - done);
    await exec(
      t,
      `WITH RECURSIVE c(i) AS (SELECT ${done + 1} UNION ALL SELECT i + 1 FROM c WHERE i < ${done + k})
       INSERT INTO tq_dead_letters (seq, group_id, event, priority, attempts, reason, dead_at)
       SELECT 1000000000 + i, 'dead' || (i % 100), '{}', 0, 5, 'max_attempts', 0 FROM c`,
    );
    done += k;
  }
}

/** Claims and acks `n` messages one at a time. */
async function claimAck(t: LibsqlTransport, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const l = await t.claim("w", 60);
    if (!l) throw new Error("claimAck: nothing to claim");
    await t.ack(l);
  }
}

/**
 * The cases of the cost table. `depth` is how deep the queue is while the per-message cases run
 * (1,000 and 1,000,000 in the bench; smaller in the test, which checks that the counts are the same).
 */
export async function costCases(sqld: Sqld, t: LibsqlTransport, opts: { depths: number[]; runs?: number }) {
  const runs = opts.runs ?? 20;
  const out: CostCase[] = [];
  const add = (name: string, per: string, r: Rows) => out.push({ name, per, ...r });

  for (const depth of opts.depths) {
    await reset(t);
    // Deep groups (depth / 100 each): the measured messages never create or empty a group.
    await seed(t, depth, 100);
    await t.publish("seed0", "warm-up"); // the process's first publish also collects old slots
    const d = depth.toLocaleString("en-US");
    add(
      `publish, no key of yours (depth ${d})`,
      "message",
      await measure(sqld, runs, async () => {
        for (let i = 0; i < runs; i++) await t.publish(`seed${i % 100}`, { i });
      }),
    );
    add(`claim + ack (depth ${d})`, "message", await measure(sqld, runs, () => claimAck(t, runs)));
  }

  await reset(t);
  await seed(t, 1000, 100);
  add(
    "publish with an Idempotency-Key",
    "message",
    await measure(sqld, runs, async () => {
      for (let i = 0; i < runs; i++) await t.publish(`seed${i % 100}`, { i }, 0, { idempotencyKey: `key-${i}` });
    }),
  );
  add(
    "publishMany(100)",
    "message",
    await measure(sqld, 100 * 5, async () => {
      for (let b = 0; b < 5; b++) {
        await t.publishMany(Array.from({ length: 100 }, (_, i) => ({ groupId: `seed${i}`, event: { b, i } })));
      }
    }),
  );
  add(
    "claimMany(32) + 32 acks",
    "message",
    await measure(sqld, 32 * 3, async () => {
      for (let k = 0; k < 3; k++) {
        const got = await t.claimMany("w", 60, 32);
        if (got.length !== 32) throw new Error(`claimMany: got ${got.length}`);
        for (const l of got) await t.ack(l);
      }
    }),
  );

  // nack and extend, on leases taken outside the measurement.
  // nack and extend, on leases taken outside the measurement.
  const take = async (n: number) => {
    const got: Lease[] = [];
    for (let i = 0; i < n; i++) got.push((await t.claim("w", 60)) as Lease);
    return got;
  };
  let held = await take(runs);
  add(
    "nack (retry now)",
    "operation",
    await measure(sqld, runs, async () => {
      for (const l of held) await t.nack(l, 0);
    }),
  );
  held = await take(runs);
  add(
    "nack with a delay (park)",
    "operation",
    await measure(sqld, runs, async () => {
      for (const l of held) await t.nack(l, 3600);
    }),
  );
  held = await take(runs);
  add(
    "extend",
    "operation",
    await measure(sqld, runs, async () => {
      for (const l of held) await t.extend(l, 120);
    }),
  );

  await reset(t);
  add(
    "a message in a group of its own (publish + claim + ack)",
    "message",
    await measure(sqld, runs, async () => {
      for (let i = 0; i < runs; i++) {
        await t.publish(`solo${i}`, { i });
        const l = await t.claim("w", 60);
        if (!l) throw new Error("solo: nothing to claim");
        await t.ack(l);
      }
    }),
  );

  // Empty claims: every group in flight (leased) or parked, nothing deliverable.
  for (const inFlight of [10, 100, 10_000]) {
    await reset(t);
    await seed(t, inFlight * 2, inFlight);
    for (let left = inFlight; left > 0; ) {
      const got = await t.claimMany("holder", 600, Math.min(100, left));
      left -= got.length;
      if (got.length === 0) throw new Error("could not put every group in flight");
    }
    add(
      `empty claim, ${inFlight.toLocaleString("en-US")} groups in flight`,
      "operation",
      await measure(sqld, runs, async () => {
        for (let i = 0; i < runs; i++) if (await t.claim("w", 60)) throw new Error("an empty claim took a lease");
      }),
    );
  }

  // stats()' ages: its statement for the oldest messages alone, with none delayed and with a
  // thousand delayed ones at the head (those are skipped, but never read past AGE_WINDOW rows).
  const [, oldest] = statsPlan().stmts;
  for (const delayed of [0, 1000]) {
    await reset(t);
    for (let i = 0; i < delayed; i += 500) {
      await t.publishMany(
        Array.from({ length: 500 }, (_, k) => ({ groupId: `later-${i + k}`, event: k, delay: 3600 })),
      );
    }
    await seed(t, 1000, 100);
    add(
      `stats()' ages, ${delayed.toLocaleString("en-US")} delayed at the head`,
      "operation",
      await measure(sqld, runs, async () => {
        for (let i = 0; i < runs; i++) await clientOf(t).execute(oldest as InStatement);
      }),
    );
  }

  for (const depth of opts.depths) {
    await reset(t);
    await seed(t, depth, 100);
    await seedDeadLetters(t, depth);
    await take(10); // ten leases in flight
    const d = depth.toLocaleString("en-US");
    add(
      `stats() (${d} messages)`,
      "operation",
      await measure(sqld, runs, async () => {
        for (let i = 0; i < runs; i++) await t.stats();
      }),
    );
    add(
      `dead-letter page of 100 (${d} dead letters)`,
      "operation",
      await measure(sqld, runs, async () => {
        for (let i = 0; i < runs; i++) await t.deadLetters({ afterSeq: 1_000_000_000 + depth / 2, limit: 100 });
      }),
    );
    // Groups seed20.. are not in flight (take(10) leased seed0..9): each holds depth / 100 messages.
    add(
      `peek of 10 (${d} messages)`,
      "operation",
      await measure(sqld, runs, async () => {
        for (let i = 0; i < runs; i++) await t.peek(`seed${20 + i}`, { limit: 10 });
      }),
    );
    add(
      `purge of a group (${(depth / 100).toLocaleString("en-US")} messages)`,
      "message",
      await measure(sqld, depth / 100, () => t.purge("seed99")),
    );
  }
  return out;
}

/** Per message: a publish without a key of the user's, a claim and an ack. */
export function perMessage(cases: CostCase[], depth: string): Rows {
  const pub = cases.find((c) => c.name === `publish, no key of yours (depth ${depth})`) as CostCase;
  const cycle = cases.find((c) => c.name === `claim + ack (depth ${depth})`) as CostCase;
  return { read: round(pub.read + cycle.read), written: round(pub.written + cycle.written) };
}

/** $ per million messages at Turso's list prices. */
export const dollarsPerMillion = (r: Rows) => (r.written * TURSO_PER_ROW_WRITTEN + r.read * TURSO_PER_ROW_READ) * 1e6;

const usd = (x: number) => (x >= 1 ? `$${x.toFixed(2)}` : x >= 0.01 ? `$${x.toFixed(3)}` : `$${x.toFixed(5)}`);

/**
 * The cost section of `npm run bench`: rows per operation at a shallow and a deep queue, and what a
 * million messages (or operations) cost at Turso's list prices, beside SQS FIFO and Cloudflare Queues.
 */
export async function costBench(opts: {
  depths: number[];
  runs: number;
}): Promise<{ text: string; cases: CostCase[] }> {
  const { sqld, t } = await costTarget();
  try {
    const cases = await costCases(sqld, t, opts);
    const rows = cases.map((c) => [
      c.name,
      String(c.written),
      String(c.read),
      `${usd(dollarsPerMillion(c))} per million ${c.per}s`,
    ]);
    const lines: string[] = [];
    lines.push(
      "| operation | rows written | rows read | at Turso's list prices |",
      "| --- | --- | --- | --- |",
      ...rows.map((r) => `| ${r.join(" | ")} |`),
    );
    lines.push("");
    lines.push("| a million messages (publish + claim + ack, one at a time) | $ |", "| --- | --- |");
    for (const d of opts.depths) {
      const pm = perMessage(cases, d.toLocaleString("en-US"));
      lines.push(
        `| turso-queue over HTTP, ${d.toLocaleString("en-US")} deep (${pm.written} rows written, ${pm.read} read per message) | ${usd(dollarsPerMillion(pm))} |`,
      );
    }
    const many = cases.find((c) => c.name === "publishMany(100)") as CostCase;
    const batched = cases.find((c) => c.name === "claimMany(32) + 32 acks") as CostCase;
    const b = { read: many.read + batched.read, written: many.written + batched.written };
    lines.push(
      `| turso-queue, publishMany(100) + claimMany(32) + acks (${round(b.written)} written, ${round(b.read)} read per message) | ${usd(dollarsPerMillion(b))} |`,
      `| SQS FIFO (send, receive, delete at $0.50 per million requests) | ${usd(SQS_FIFO_PER_MESSAGE * 1e6)} |`,
      `| Cloudflare Queues (write, read, delete at $0.40 per million operations) | ${usd(CF_QUEUES_PER_MESSAGE * 1e6)} |`,
    );
    const shallow = perMessage(cases, (opts.depths[0] as number).toLocaleString("en-US"));
    const deep = perMessage(cases, (opts.depths[opts.depths.length - 1] as number).toLocaleString("en-US"));
    const emptyReads = Math.max(...cases.filter((c) => c.name.startsWith("empty claim")).map((c) => c.read));
    const plain = cases.find((c) => c.name.startsWith("publish, no key of yours")) as CostCase;
    const keyed = cases.find((c) => c.name === "publish with an Idempotency-Key") as CostCase;
    lines.push(
      "",
      "| target | value | goal | met |",
      "| --- | --- | --- | --- |",
      `| rows written per message | ${shallow.written} | <= 9 | ${shallow.written <= 9 ? "yes" : "NO (bound: see below)"} |`,
      `| rows read per message, shallow and deep | ${shallow.read}, ${deep.read} | <= 30, flat | ${shallow.read <= 30 && deep.read === shallow.read ? "yes" : "NO"} |`,
      `| rows read by an empty claim, 10 to 10,000 groups in flight | ${emptyReads} | <= 10 | ${emptyReads <= 10 ? "yes" : "NO"} |`,
      `| rows written more by a user's idempotency key | ${round(keyed.written - plain.written)} | <= 3 | ${keyed.written - plain.written <= 3 ? "yes" : "NO"} |`,
    );
    return { text: lines.join("\n"), cases };
  } finally {
    t.close();
    await sqld.stop();
  }
}
