/**
 * HTTP throughput cases on one sqld: the floor (one-row write batches), ours (claim + ack), the
 * spec's claim on a held session ("naive"), publishes and batch claims.
 */
import { type Client, createClient } from "@libsql/client";
import { clientOf, writeStatsOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { type Sqld, startSqld } from "../support/sqld.js";
import { BATCH_N, CFG, CONCURRENCY, EXTRA, GROUPS, PAD, VIS } from "./config.js";
import { progress, record, runLoops, sleep, timeoutFetch } from "./lib.js";

// ---------------------------------------------------------------------------------------------
// seeding with SQL (recursive CTEs: one statement per chunk, no per-message round trips)

export const resetOurs = [
  "DELETE FROM tq_dead_letters",
  "DELETE FROM tq_idempotency",
  "DELETE FROM groups",
  "DELETE FROM messages",
];

/** Messages `from..to-1` (message i in group i % groups, so a group's rowid order is its first seq). */
export function seedMessages(table: string, from: number, to: number, groups: number): string {
  return `INSERT INTO ${table} (group_id, event)
WITH RECURSIVE c(i) AS (SELECT ${from} UNION ALL SELECT i + 1 FROM c WHERE i < ${to - 1})
SELECT 'g' || (i % ${groups}), json_object('n', i, 'pad', '${PAD}') FROM c`;
}
export function seedGroups(table: string, groups: number): string {
  return `INSERT OR IGNORE INTO ${table} (group_id)
WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < ${groups - 1})
SELECT 'g' || i FROM c`;
}

export async function refillOurs(client: Client, n: number, groups = GROUPS): Promise<void> {
  await client.batch([...resetOurs, seedMessages("messages", 0, n, groups), seedGroups("groups", groups)], "write");
}

// ---------------------------------------------------------------------------------------------
// naive: the spec's claim, as written, on a held session (BEGIN IMMEDIATE ... COMMIT across round trips)

const NAIVE_SCHEMA = [
  "DROP TABLE IF EXISTS naive_messages",
  "DROP TABLE IF EXISTS naive_groups",
  `CREATE TABLE naive_messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, group_id TEXT NOT NULL, event TEXT NOT NULL,
   locked_by TEXT, lock_expiry REAL)`,
  `CREATE TABLE naive_groups (group_id TEXT PRIMARY KEY, last_claimed_at REAL NOT NULL DEFAULT 0.0,
   priority INT NOT NULL DEFAULT 0)`,
  // The same indexes ours has, so that the comparison is about the shape of the transaction.
  "CREATE INDEX naive_messages_group_seq ON naive_messages (group_id, seq)",
  "CREATE INDEX naive_messages_group_lock ON naive_messages (group_id, lock_expiry) WHERE locked_by IS NOT NULL",
  "CREATE INDEX naive_groups_rr ON naive_groups (last_claimed_at)",
];
const NAIVE_SELECT = `SELECT m.seq, m.group_id, m.event
  FROM naive_messages m JOIN naive_groups g ON g.group_id = m.group_id
  WHERE (m.locked_by IS NULL OR m.lock_expiry < ?)
    AND m.group_id NOT IN (
      SELECT group_id FROM naive_messages WHERE locked_by IS NOT NULL AND lock_expiry >= ?)
    AND g.priority >= ?
  ORDER BY g.last_claimed_at ASC, m.seq ASC LIMIT 1`;

async function refillNaive(client: Client, n: number): Promise<void> {
  await client.batch(
    [
      "DELETE FROM naive_messages",
      "DELETE FROM naive_groups",
      seedMessages("naive_messages", 0, n, GROUPS),
      seedGroups("naive_groups", GROUPS),
    ],
    "write",
  );
}

/** Adds `seed` messages when fewer than `seed` are free; returns how many are free now. */
async function topUp(client: Client, messages: string, groups: string): Promise<number> {
  const free = async () =>
    Number((await client.execute(`SELECT count(*) AS n FROM ${messages} WHERE locked_by IS NULL`)).rows[0]?.n ?? 0);
  const n = await free();
  if (n >= CFG.seed) return n;
  await client.batch([seedMessages(messages, 0, CFG.seed, GROUPS), seedGroups(groups, GROUPS)], "write");
  return free();
}

/** One unit done, once `p` settles. */
export const one = async (p: Promise<unknown>): Promise<number> => {
  await p;
  return 1;
};

const isBusy = (e: unknown) => /SQLITE_BUSY|database is locked|locked/i.test(String((e as Error)?.message ?? e));

/** One claim+ack cycle the way the spec does it. Returns 1, or 0 when the queue is empty. */
async function naiveCycle(client: Client, worker: string, stats: { busy: number }): Promise<number> {
  let claimed: { seq: number; group: string } | undefined;
  for (let attempt = 1; ; attempt++) {
    const tx = await client.transaction("write");
    try {
      const now = Date.now() / 1000;
      const rs = await tx.execute({ sql: NAIVE_SELECT, args: [now, now, 0] });
      const row = rs.rows[0];
      if (!row) {
        await tx.rollback();
        return 0;
      }
      claimed = { seq: Number(row.seq), group: String(row.group_id) };
      JSON.parse(String(row.event));
      await tx.execute({
        sql: "UPDATE naive_groups SET last_claimed_at = ? WHERE group_id = ?",
        args: [now, claimed.group],
      });
      await tx.execute({
        sql: "UPDATE naive_messages SET locked_by = ?, lock_expiry = ? WHERE seq = ?",
        args: [worker, now + VIS, claimed.seq],
      });
      await tx.commit();
      break;
    } catch (e) {
      if (!isBusy(e) || attempt >= 40) throw e;
      stats.busy++;
      await sleep(Math.random() * Math.min(200, 5 * 2 ** attempt));
    } finally {
      tx.close();
    }
  }
  for (let attempt = 1; ; attempt++) {
    try {
      await client.batch(
        [
          { sql: "DELETE FROM naive_messages WHERE seq = ?", args: [claimed.seq] },
          {
            sql: "DELETE FROM naive_groups WHERE group_id = ? AND NOT EXISTS (SELECT 1 FROM naive_messages WHERE group_id = ?)",
            args: [claimed.group, claimed.group],
          },
        ],
        "write",
      );
      return 1;
    } catch (e) {
      if (!isBusy(e) || attempt >= 40) throw e;
      stats.busy++;
      await sleep(Math.random() * Math.min(200, 5 * 2 ** attempt));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP throughput cases (one sqld): floor, ours, naive, publish, batch claim

/**
 * Runs `fn` on a sqld of its own, stopped afterwards. The floor and naive cases send many write
 * batches at once with no limit, which can wedge sqld 0.24's writes (docs/guarantees.md, "Open"): each slice of
 * them gets a fresh server, so that a wedge costs that slice, not the rest of the run.
 */
async function onFreshSqld<T>(setup: string[], fn: (raw: Client) => Promise<T>): Promise<T> {
  const own = await startSqld();
  const raw = createClient({ url: own.url, concurrency: 64, fetch: timeoutFetch(15_000) });
  try {
    await raw.batch(setup, "write");
    return await fn(raw);
  } finally {
    raw.close();
    await own.stop();
  }
}

const FLOOR_SCHEMA = [
  "CREATE TABLE bench_floor (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)",
  "INSERT INTO bench_floor WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 64) SELECT i, 0 FROM c",
];

export async function httpCases(sqld: Sqld): Promise<void> {
  const t = await LibsqlTransport.create(sqld.url, { ...EXTRA });
  const tNoDL = await LibsqlTransport.create(sqld.url, { ...EXTRA, maxAttempts: Number.POSITIVE_INFINITY });
  await refillOurs(clientOf(t), CFG.seed);
  const naiveStats = { busy: 0 };
  const ms = CFG.sliceMs;
  for (let round = 1; round <= CFG.rounds; round++) {
    progress(`HTTP round ${round}/${CFG.rounds}`);
    for (const c of CONCURRENCY) {
      const floor = await onFreshSqld(FLOOR_SCHEMA, (raw) =>
        runLoops({
          concurrency: c,
          ms,
          maxOps: 1_000_000,
          op: async (w) => {
            await raw.batch([{ sql: "UPDATE bench_floor SET n = n + 1 WHERE id = ?", args: [w + 1] }], "write");
            return 1;
          },
        }),
      );
      record(`http.floor.c${c}`, floor);

      const left = await topUp(clientOf(t), "messages", "groups");
      const s0 = { ...writeStatsOf(t) };
      const ours = await runLoops({
        concurrency: c,
        ms,
        maxOps: left,
        op: async (w) => {
          const l = await t.claim(`w${w}`, VIS);
          if (!l) return 0;
          await t.ack(l);
          return 1;
        },
      });
      record(`http.ours.c${c}`, ours, {
        batches: writeStatsOf(t).batches - s0.batches,
        writes: writeStatsOf(t).writes - s0.writes,
        busy: writeStatsOf(t).busy - s0.busy,
        retries: writeStatsOf(t).retries - s0.retries,
      });

      const b0 = naiveStats.busy;
      const naive = await onFreshSqld(NAIVE_SCHEMA, async (raw) => {
        await refillNaive(raw, CFG.seed);
        return runLoops({
          concurrency: c,
          ms,
          maxOps: CFG.seed,
          maxErrors: 50,
          op: (w) => naiveCycle(raw, `w${w}`, naiveStats),
        });
      });
      record(`http.naive.c${c}`, naive, { busy: naiveStats.busy - b0 });
    }

    // publish: single (c=1, and c=32 where group commit coalesces) and publishMany, into their own groups

    let n = 0;
    record(
      "http.publish.single.c1",
      await runLoops({
        concurrency: 1,
        ms,
        maxOps: 200_000,
        op: () => one(t.publish(`p${n++ % GROUPS}`, { n })),
      }),
    );
    record(
      "http.publish.single.c32",
      await runLoops({
        concurrency: 32,
        ms,
        maxOps: 200_000,
        op: () => one(t.publish(`p${n++ % GROUPS}`, { n })),
      }),
    );
    const many = (k: number) =>
      Array.from({ length: k }, () => ({ groupId: `p${n % GROUPS}`, event: { n: n++, pad: PAD } }));
    record(
      `http.publish.many${CFG.publishBatch}.c1`,
      await runLoops({
        concurrency: 1,
        ms,
        maxOps: 10_000,
        op: async () => (await t.publishMany(many(CFG.publishBatch))).length,
      }),
    );

    // batch claim: one worker, claimMany(n) then its acks (coalesced into one batch by the committer).
    // "noDL": the same with maxAttempts=Infinity, whose claim has no dead-letter statements (3 per claim,
    // not 5): it shows how much of the batch's cost is per statement.
    await refillOurs(clientOf(t), CFG.seed);
    for (const [k, tr, key] of BATCH_N.flatMap((k) => [
      [k, t, `http.claimMany.n${k}`],
      [k, tNoDL, `http.claimMany.noDL.n${k}`],
    ]) as [number, LibsqlTransport, string][]) {
      const left = await topUp(clientOf(t), "messages", "groups");
      record(
        key,
        await runLoops({
          concurrency: 1,
          ms,
          maxOps: Math.floor(left / k),
          op: async () => {
            const ls = await tr.claimMany("w", VIS, k);
            await Promise.all(ls.map((l) => tr.ack(l)));
            return ls.length;
          },
        }),
      );
    }
    await refillOurs(clientOf(t), CFG.seed);
  }
  tNoDL.close();
  t.close();
}
