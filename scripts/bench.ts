/**
 * `npm run bench` (full, for BENCHMARKS.md) and `npm run bench:quick` (smoke, about 2 minutes).
 *
 * Starts its own sqld processes and runs every case in one run, interleaved in rounds (floor, ours and
 * naive alternate slice by slice), so that the ratios compare figures taken under the same machine
 * load. Progress goes to stderr; the table to stdout; the figures to bench-results/*.json; a full run
 * also rewrites the generated part of BENCHMARKS.md.
 *
 * Every loop is bounded by time, by an operation budget and by an error budget.
 */
import { execFileSync, execSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { cpus, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Client, createClient } from "@libsql/client";
import { LibsqlTransport, type TransportOptions } from "../src/index.js";
import { fmt, percentile, progress, type RunResult, runLoops, sleep, table, timeoutFetch } from "./bench/lib.js";
import { SQLD_BIN, type Sqld, startSqld } from "./sqld.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const QUICK = process.argv.includes("--quick");
const NO_FILE = process.argv.includes("--no-file");
const NO_DEPTH = process.argv.includes("--no-depth");

const CFG = QUICK
  ? {
      rounds: 2,
      sliceMs: 700,
      fileSliceMs: 500,
      seed: 8_000,
      depth: [1_000, 100_000],
      depthSamples: 100,
      publishBatch: 100,
    }
  : {
      rounds: 4,
      sliceMs: 1500,
      fileSliceMs: 1000,
      seed: 20_000,
      depth: [1_000, 100_000, 1_000_000],
      depthSamples: 450,
      publishBatch: 100,
    };
const CONCURRENCY = [1, 4, 8, 32];
const BATCH_N = [1, 8, 32];
const GROUPS = 256;
const DEPTH_GROUPS = 10_000;
const VIS = 60;
/** Extra transport options for tuning runs, e.g. TQ_BENCH_OPTS='{"maxInFlight":2}'. */
const EXTRA: TransportOptions = process.env.TQ_BENCH_OPTS ? JSON.parse(process.env.TQ_BENCH_OPTS) : {};
const PAD = "x".repeat(48);

// ---------------------------------------------------------------------------------------------
// seeding with SQL (recursive CTEs: one statement per chunk, no per-message round trips)

const resetOurs = [
  "DELETE FROM tq_deliveries",
  "DELETE FROM tq_dead_letters",
  "DELETE FROM tq_idempotency",
  "DELETE FROM groups",
  "DELETE FROM messages",
];

/** Messages `from..to-1` (message i in group i % groups, so a group's rowid order is its first seq). */
function seedMessages(table: string, from: number, to: number, groups: number): string {
  return `INSERT INTO ${table} (group_id, event)
WITH RECURSIVE c(i) AS (SELECT ${from} UNION ALL SELECT i + 1 FROM c WHERE i < ${to - 1})
SELECT 'g' || (i % ${groups}), json_object('n', i, 'pad', '${PAD}') FROM c`;
}
function seedGroups(table: string, groups: number): string {
  return `INSERT OR IGNORE INTO ${table} (group_id)
WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < ${groups - 1})
SELECT 'g' || i FROM c`;
}

async function refillOurs(client: Client, n: number, groups = GROUPS): Promise<void> {
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
const one = async (p: Promise<unknown>): Promise<number> => {
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
// accumulating slices into rates

interface Acc {
  units: number;
  secs: number;
  errors: number;
  lat: number[];
  slices: number;
  firstError?: string;
  extra: Record<string, number>;
}
const acc = new Map<string, Acc>();
function record(key: string, r: RunResult, extra: Record<string, number> = {}): Acc {
  const a = acc.get(key) ?? { units: 0, secs: 0, errors: 0, lat: [], slices: 0, extra: {} };
  a.units += r.units;
  a.secs += r.secs;
  a.errors += r.errors;
  a.slices++;
  for (const l of r.lat) a.lat.push(l);
  a.firstError ??= r.firstError;
  for (const [k, v] of Object.entries(extra)) a.extra[k] = (a.extra[k] ?? 0) + v;
  acc.set(key, a);
  const rate = r.units / r.secs;
  progress(`  ${key}: ${fmt(rate)}/s${r.errors ? ` (${r.errors} errors: ${r.firstError})` : ""}`);
  return a;
}
const rate = (key: string): number => {
  const a = acc.get(key);
  return a && a.secs > 0 ? a.units / a.secs : Number.NaN;
};

// ---------------------------------------------------------------------------------------------
// HTTP throughput cases (one sqld): floor, ours, naive, publish, batch claim

async function httpCases(sqld: Sqld): Promise<void> {
  const raw = createClient({ url: sqld.url, concurrency: 64, fetch: timeoutFetch(15_000) });
  await raw.batch(
    [
      "DROP TABLE IF EXISTS bench_floor",
      "CREATE TABLE bench_floor (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)",
      `INSERT INTO bench_floor WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 64) SELECT i, 0 FROM c`,
      ...NAIVE_SCHEMA,
    ],
    "write",
  );
  const t = await LibsqlTransport.create(sqld.url, { ...EXTRA });
  const tNoDL = await LibsqlTransport.create(sqld.url, { ...EXTRA, maxAttempts: Number.POSITIVE_INFINITY });
  await refillOurs(t.client, CFG.seed);
  await refillNaive(raw, CFG.seed);
  const naiveStats = { busy: 0 };
  const ms = CFG.sliceMs;
  for (let round = 1; round <= CFG.rounds; round++) {
    progress(`HTTP round ${round}/${CFG.rounds}`);
    for (const c of CONCURRENCY) {
      const floor = await runLoops({
        concurrency: c,
        ms,
        maxOps: 1_000_000,
        op: async (w) => {
          await raw.batch([{ sql: "UPDATE bench_floor SET n = n + 1 WHERE id = ?", args: [w + 1] }], "write");
          return 1;
        },
      });
      record(`http.floor.c${c}`, floor);

      const left = await topUp(t.client, "messages", "groups");
      const s0 = { ...t.writeStats };
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
        batches: t.writeStats.batches - s0.batches,
        writes: t.writeStats.writes - s0.writes,
        busy: t.writeStats.busy - s0.busy,
        retries: t.writeStats.retries - s0.retries,
      });

      const naiveLeft = await topUp(raw, "naive_messages", "naive_groups");
      const b0 = naiveStats.busy;
      const naive = await runLoops({
        concurrency: c,
        ms,
        maxOps: naiveLeft,
        maxErrors: 50,
        op: (w) => naiveCycle(raw, `w${w}`, naiveStats),
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
    await refillOurs(t.client, CFG.seed);
    for (const [k, tr, key] of BATCH_N.flatMap((k) => [
      [k, t, `http.claimMany.n${k}`],
      [k, tNoDL, `http.claimMany.noDL.n${k}`],
    ]) as [number, LibsqlTransport, string][]) {
      const left = await topUp(t.client, "messages", "groups");
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
    await refillOurs(t.client, CFG.seed);
  }
  tNoDL.close();
  t.close();
  raw.close();
}

// ---------------------------------------------------------------------------------------------
// depth: one sqld per level, filled with SQL, sampled in interleaved rounds

async function depthCases(): Promise<void> {
  const levels: { n: number; sqld: Sqld; t: LibsqlTransport }[] = [];
  try {
    for (const n of CFG.depth) {
      const sqld = await startSqld();
      const t = await LibsqlTransport.create(sqld.url, { ...EXTRA });
      const fill = createClient({ url: sqld.url, fetch: timeoutFetch(600_000) });
      const groups = Math.min(n, DEPTH_GROUPS);
      const chunk = 100_000;
      await fill.batch([...resetOurs, seedGroups("groups", groups)], "write");
      for (let from = 0; from < n; from += chunk) {
        await fill.execute(seedMessages("messages", from, Math.min(n, from + chunk), groups));
        progress(`depth ${fmt(n)}: filled ${fmt(Math.min(n, from + chunk))}`);
      }
      const check = await fill.execute(
        "SELECT (SELECT count(*) FROM messages) AS m, (SELECT count(*) FROM groups) AS g, (SELECT count(*) FROM groups WHERE last_claimed_at = 0) AS never",
      );
      progress(`depth ${fmt(n)}: ${JSON.stringify(check.rows[0])}`);
      fill.close();
      levels.push({ n, sqld, t });
    }
    const per = Math.ceil(CFG.depthSamples / CFG.rounds);
    const sample = async (lv: (typeof levels)[number], count: number, keep: boolean) => {
      const lat: number[] = [];
      for (let i = 0; i < count; i++) {
        const t0 = performance.now();
        const l = await lv.t.claim("depth", VIS);
        const dt = performance.now() - t0;
        if (!l) throw new Error(`depth ${lv.n}: queue unexpectedly empty`);
        if (keep) lat.push(dt);
        await lv.t.ack(l);
        // Put one back so that the depth stays what it says.
        await lv.t.publish(l.groupId, l.event);
      }
      return lat;
    };
    for (const lv of levels) await sample(lv, 30, false);
    for (let round = 1; round <= CFG.rounds; round++) {
      progress(`depth round ${round}/${CFG.rounds}`);
      // Several short turns per round so that every level sees the same spells of machine load.
      for (let turn = 0; turn < 5; turn++) {
        for (const lv of levels) {
          const t0 = performance.now();
          const lat = await sample(lv, Math.ceil(per / 5), true);
          record(`depth.${lv.n}`, { units: lat.length, secs: (performance.now() - t0) / 1000, errors: 0, lat });
        }
      }
    }
  } finally {
    for (const lv of levels) {
      lv.t.close();
      await lv.sqld.stop();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// local file: ours vs plainjob (better-sqlite3), interleaved

function ensureBetterSqlite(): boolean {
  const require = createRequire(import.meta.url);
  const load = () => {
    const Database = require("better-sqlite3");
    new Database(":memory:").close();
  };
  try {
    load();
    return true;
  } catch {
    progress(
      "better-sqlite3's native addon is not built (ignore-scripts=true): building it with node-gyp (about a minute)",
    );
    try {
      execSync("npm rebuild better-sqlite3 --ignore-scripts=false", {
        cwd: ROOT,
        stdio: ["ignore", "ignore", "inherit"],
      });
      load();
      return true;
    } catch (e) {
      progress(`could not build better-sqlite3, skipping plainjob: ${(e as Error).message}`);
      return false;
    }
  }
}

async function fileCases(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "turso-queue-bench-"));
  const withPlainjob = ensureBetterSqlite();
  const require = createRequire(import.meta.url);
  const ms = CFG.fileSliceMs;
  let files = 0;
  const fresh = () => `file:${join(dir, `q${files++}.db`)}`;
  try {
    for (let round = 1; round <= CFG.rounds; round++) {
      progress(`file round ${round}/${CFG.rounds}`);
      {
        const c = createClient({ url: fresh() });
        await c.execute("PRAGMA journal_mode=WAL");
        await c.batch(["CREATE TABLE f (id INTEGER PRIMARY KEY, n INTEGER)", "INSERT INTO f VALUES (1, 0)"], "write");
        record(
          "file.floor.c1",
          await runLoops({
            concurrency: 1,
            ms,
            maxOps: 1_000_000,
            op: () => one(c.batch(["UPDATE f SET n = n + 1 WHERE id = 1"], "write")),
          }),
        );
        c.close();
      }
      for (const [name, sync] of [
        ["ours", null],
        ["ours-normal", "NORMAL"],
      ] as const) {
        for (const c of name === "ours" ? [1, 8] : [1]) {
          const t = await LibsqlTransport.create(fresh(), { ...EXTRA });
          // plainjob runs with synchronous=NORMAL (no fsync per commit); this row shows ours the same way.
          if (sync) await t.client.execute(`PRAGMA synchronous=${sync}`);
          await refillOurs(t.client, CFG.seed);
          record(
            `file.${name}.c${c}`,
            await runLoops({
              concurrency: c,
              ms,
              maxOps: CFG.seed,
              op: async (w) => {
                const l = await t.claim(`w${w}`, VIS);
                if (!l) return 0;
                await t.ack(l);
                return 1;
              },
            }),
          );
          if (c === 1) {
            await refillOurs(t.client, 0);
            let n = 0;
            record(
              `file.${name}.publish.single`,
              await runLoops({
                concurrency: 1,
                ms,
                maxOps: 500_000,
                op: () => one(t.publish(`p${n++ % GROUPS}`, { n })),
              }),
            );
            record(
              `file.${name}.publish.many${CFG.publishBatch}`,
              await runLoops({
                concurrency: 1,
                ms,
                maxOps: 20_000,
                op: async () =>
                  (
                    await t.publishMany(
                      Array.from({ length: CFG.publishBatch }, () => ({
                        groupId: `p${n % GROUPS}`,
                        event: { n: n++ },
                      })),
                    )
                  ).length,
              }),
            );
            await refillOurs(t.client, CFG.seed);
            record(
              `file.${name}.claimMany.n32`,
              await runLoops({
                concurrency: 1,
                ms,
                maxOps: Math.floor(CFG.seed / 32),
                op: async () => {
                  const ls = await t.claimMany("w", VIS, 32);
                  await Promise.all(ls.map((l) => t.ack(l)));
                  return ls.length;
                },
              }),
            );
          }
          t.close();
        }
      }
      if (withPlainjob) {
        const Database = require("better-sqlite3");
        const { better, defineQueue } = require("plainjob");
        const db = new Database(join(dir, `pj${files++}.db`));
        const quiet = { error() {}, warn() {}, info() {}, debug() {} };
        const queue = defineQueue({ connection: better(db), logger: quiet, maintenanceInterval: 3_600_000 });
        const syncLoop = (maxOps: number, op: () => number): RunResult => {
          const t0 = performance.now();
          const end = t0 + ms;
          let units = 0;
          for (let i = 0; i < maxOps && performance.now() < end; i++) {
            const u = op();
            if (u === 0) break;
            units += u;
          }
          return { units, errors: 0, secs: (performance.now() - t0) / 1000, lat: [] };
        };
        let n = 0;
        record(
          "file.plainjob.add.single",
          syncLoop(500_000, () => {
            queue.add("t", { n: n++ });
            return 1;
          }),
        );
        record(
          `file.plainjob.add.many${CFG.publishBatch}`,
          syncLoop(
            20_000,
            () =>
              queue.addMany(
                "t",
                Array.from({ length: CFG.publishBatch }, () => ({ n: n++ })),
              ).ids.length,
          ),
        );
        queue.addMany(
          "t",
          Array.from({ length: CFG.seed }, () => ({ n: n++, pad: PAD })),
        );
        record(
          "file.plainjob.claim_done.c1",
          syncLoop(CFG.seed, () => {
            const j = queue.getAndMarkJobAsProcessing("t");
            if (!j) return 0;
            queue.markJobAsDone(j.id);
            return 1;
          }),
        );
        queue.close();
        db.close();
      }
      await sleep(10);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// report

interface Target {
  name: string;
  value: number;
  goal: string;
  met: boolean;
}

function machine() {
  let sqldVersion = "?";
  try {
    sqldVersion = execFileSync(SQLD_BIN, ["--version"]).toString().trim();
  } catch {}
  let nproc = String(cpus().length);
  try {
    nproc = execFileSync("nproc").toString().trim();
  } catch {}
  let load = "?";
  try {
    load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  } catch {}
  return { nproc, cpu: cpus()[0]?.model ?? "?", node: process.version, sqld: sqldVersion, loadavg: load };
}

function report(started: Date, machineAtStart: ReturnType<typeof machine>) {
  const floors = CONCURRENCY.map((c) => rate(`http.floor.c${c}`));
  const bestFloor = Math.max(...floors.filter(Number.isFinite));
  const depthP = (n: number, p: number) =>
    percentile(
      [...(acc.get(`depth.${n}`)?.lat ?? [])].sort((a, b) => a - b),
      p,
    );
  const dMin = CFG.depth[0] as number;
  const dMax = CFG.depth[CFG.depth.length - 1] as number;
  const targets: Target[] = [
    {
      name: "ours c=8 / best floor",
      value: rate("http.ours.c8") / bestFloor,
      goal: ">= 0.45",
      met: rate("http.ours.c8") / bestFloor >= 0.45,
    },
    {
      name: "ours / naive at c=8",
      value: rate("http.ours.c8") / rate("http.naive.c8"),
      goal: ">= 2",
      met: rate("http.ours.c8") / rate("http.naive.c8") >= 2,
    },
    {
      name: "ours c=32 / best floor",
      value: rate("http.ours.c32") / bestFloor,
      goal: ">= 1.0",
      met: rate("http.ours.c32") / bestFloor >= 1,
    },
    {
      name: `depth p50 ${fmt(dMax)} / ${fmt(dMin)}`,
      value: depthP(dMax, 50) / depthP(dMin, 50),
      goal: "<= 1.5",
      met: depthP(dMax, 50) / depthP(dMin, 50) <= 1.5,
    },
    {
      name: "claimMany n=32 / n=1 msgs/s",
      value: rate("http.claimMany.n32") / rate("http.claimMany.n1"),
      goal: ">= 10",
      met: rate("http.claimMany.n32") / rate("http.claimMany.n1") >= 10,
    },
  ];
  if (NO_DEPTH) targets.splice(3, 1);

  const httpRows = CONCURRENCY.map((c) => {
    const o = acc.get(`http.ours.c${c}`);
    return [
      String(c),
      fmt(rate(`http.floor.c${c}`)),
      fmt(rate(`http.ours.c${c}`)),
      fmt(rate(`http.ours.c${c}`) / bestFloor, 2),
      o?.extra.batches ? fmt((2 * o.units) / o.extra.batches, 1) : "-",
      fmt(rate(`http.naive.c${c}`)),
      fmt(rate(`http.ours.c${c}`) / rate(`http.naive.c${c}`), 2),
      `${o?.extra.busy ?? 0} / ${acc.get(`http.naive.c${c}`)?.extra.busy ?? 0}`,
    ];
  });
  const out: string[] = [];
  out.push(
    `### HTTP (sqld on loopback): claim+ack cycles/s\n\nbest floor = ${fmt(bestFloor)} one-row write batches/s\n`,
    table(
      [
        "concurrency",
        "floor batches/s",
        "ours cycles/s",
        "ours / best floor",
        "ops per batch",
        "naive cycles/s",
        "ours / naive",
        "BUSY ours / naive",
      ],
      httpRows,
    ),
  );
  out.push(
    "\n### HTTP: publish and batch claim (messages/s)\n",
    table(
      ["case", "msgs/s"],
      [
        ["publish, c=1", fmt(rate("http.publish.single.c1"))],
        ["publish, c=32 (group commit)", fmt(rate("http.publish.single.c32"))],
        [`publishMany(${CFG.publishBatch}), c=1`, fmt(rate(`http.publish.many${CFG.publishBatch}.c1`))],
        ...BATCH_N.map((k) => [
          `claimMany n=${k} + acks, 1 worker`,
          `${fmt(rate(`http.claimMany.n${k}`))} (${fmt(rate(`http.claimMany.n${k}`) / rate("http.claimMany.n1"), 1)}x)`,
        ]),
        ...BATCH_N.map((k) => [
          `claimMany n=${k} + acks, maxAttempts=Infinity (3 statements per claim, not 5)`,
          `${fmt(rate(`http.claimMany.noDL.n${k}`))} (${fmt(rate(`http.claimMany.noDL.n${k}`) / rate("http.claimMany.noDL.n1"), 1)}x)`,
        ]),
      ],
    ),
  );
  {
    // Fit "2 requests + k statements" to the n=1 and n=32 cycles (5+2 and 160+64 statements): what
    // one request and one claim/ack statement cost, and so what bounds the claimMany ratio.
    const t1 = 1000 / rate("http.claimMany.n1");
    const t32 = (32 * 1000) / rate("http.claimMany.n32");
    const perStmt = (t32 - t1) / (224 - 7);
    const twoReq = t1 - 7 * perStmt;
    out.push(
      `\nFit of claimMany cycles (n=1: 2 requests + 7 statements, n=32: 2 requests + 224 statements): ${fmt(twoReq, 1)} ms per 2 requests, ${fmt(perStmt, 3)} ms per statement; the n=32/n=1 ratio can reach 10 only if a statement costs <= ${fmt((twoReq * 22) / 2016, 3)} ms.`,
    );
  }
  if (!NO_DEPTH) {
    out.push(
      `\n### Depth: claim latency at concurrency 1 (ms), messages over min(n, ${fmt(DEPTH_GROUPS)}) groups, all never claimed at the start\n`,
      table(
        ["queued messages", "samples", "p50", "p99", "p50 / shallowest"],
        CFG.depth.map((n) => [
          fmt(n),
          String(acc.get(`depth.${n}`)?.lat.length ?? 0),
          fmt(depthP(n, 50), 2),
          fmt(depthP(n, 99), 2),
          fmt(depthP(n, 50) / depthP(dMin, 50), 2),
        ]),
      ),
    );
  }
  if (!NO_FILE) {
    const r = (k: string) => fmt(rate(k));
    out.push(
      "\n### Local file (no network): ours vs plainjob 0.0.14 on better-sqlite3 12.4.1\n",
      table(
        ["case", "ours (synchronous=FULL, default)", "ours (synchronous=NORMAL)", "plainjob (synchronous=NORMAL)"],
        [
          ["one-row write batch (floor), c=1", r("file.floor.c1"), "-", "-"],
          [
            "claim+ack (claim+done) cycles/s, c=1",
            r("file.ours.c1"),
            r("file.ours-normal.c1"),
            r("file.plainjob.claim_done.c1"),
          ],
          ["claim+ack cycles/s, c=8", r("file.ours.c8"), "-", "-"],
          [
            "publish (add) msgs/s, one at a time",
            r("file.ours.publish.single"),
            r("file.ours-normal.publish.single"),
            r("file.plainjob.add.single"),
          ],
          [
            `publishMany(${CFG.publishBatch}) (addMany) msgs/s`,
            r(`file.ours.publish.many${CFG.publishBatch}`),
            r(`file.ours-normal.publish.many${CFG.publishBatch}`),
            r(`file.plainjob.add.many${CFG.publishBatch}`),
          ],
          ["claimMany n=32 + acks msgs/s", r("file.ours.claimMany.n32"), r("file.ours-normal.claimMany.n32"), "-"],
        ],
      ),
    );
  }
  out.push(
    "\n### Targets (ratios from this run)\n",
    table(
      ["target", "value", "goal", "met"],
      targets.map((t) => [t.name, fmt(t.value, 2), t.goal, t.met ? "yes" : "NO"]),
    ),
  );
  const errs = [...acc.entries()]
    .filter(([, a]) => a.errors > 0)
    .map(([k, a]) => `${k}: ${a.errors} errors (${a.firstError})`);
  if (errs.length) out.push(`\nErrors: ${errs.join("; ")}`);
  const m = machine();
  const header = `Run ${started.toISOString()} (${QUICK ? "--quick" : "full"}, ${CFG.rounds} interleaved rounds, ${CFG.sliceMs} ms slices); ${m.nproc} cores, ${m.cpu}, node ${m.node}, ${m.sqld}; load average at start ${machineAtStart.loadavg}, at end ${m.loadavg}.`;
  return { text: `${header}\n\n${out.join("\n")}\n`, targets, machine: m, bestFloor };
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const started = new Date();
  const m0 = machine();
  progress(
    `${QUICK ? "quick" : "full"} run on ${m0.nproc} cores (${m0.cpu}), node ${m0.node}, ${m0.sqld}, load ${m0.loadavg}`,
  );
  const sqld = await startSqld();
  try {
    await httpCases(sqld);
  } finally {
    await sqld.stop();
  }
  if (!NO_DEPTH) await depthCases();
  if (!NO_FILE) await fileCases();
  const { text, targets, machine: m, bestFloor } = report(started, m0);
  process.stdout.write(`\n${text}`);

  mkdirSync(join(ROOT, "bench-results"), { recursive: true });
  const json = {
    started: started.toISOString(),
    finished: new Date().toISOString(),
    mode: QUICK ? "quick" : "full",
    config: CFG,
    transportOptions: EXTRA,
    machine: m,
    machineAtStart: m0,
    bestFloor,
    targets,
    cases: Object.fromEntries(
      [...acc.entries()].map(([k, a]) => {
        const sorted = [...a.lat].sort((x, y) => x - y);
        return [
          k,
          {
            perSec: a.units / a.secs,
            units: a.units,
            secs: a.secs,
            slices: a.slices,
            errors: a.errors,
            firstError: a.firstError,
            ...(sorted.length
              ? { p50: percentile(sorted, 50), p99: percentile(sorted, 99), samples: sorted.length }
              : {}),
            ...a.extra,
          },
        ];
      }),
    ),
  };
  const stamp = started.toISOString().replace(/[:.]/g, "-");
  const file = join(ROOT, "bench-results", `${stamp}-${json.mode}.json`);
  writeFileSync(file, `${JSON.stringify(json, null, 2)}\n`);
  writeFileSync(join(ROOT, "bench-results", `latest-${json.mode}.json`), `${JSON.stringify(json, null, 2)}\n`);
  progress(`wrote ${file}`);

  if (!QUICK && !process.argv.includes("--no-md")) {
    const md = join(ROOT, "BENCHMARKS.md");
    const begin = "<!-- bench:begin (generated by npm run bench; edit outside these markers) -->";
    const endMark = "<!-- bench:end -->";
    const body = `${begin}\n\n${text}\n${endMark}`;
    const old = existsSync(md) ? readFileSync(md, "utf8") : "# Benchmarks\n\n";
    const i = old.indexOf(begin.slice(0, 20));
    const j = old.indexOf(endMark);
    const next =
      i >= 0 && j > i ? old.slice(0, i) + body + old.slice(j + endMark.length) : `${old.trimEnd()}\n\n${body}\n`;
    writeFileSync(md, next);
    progress("updated BENCHMARKS.md");
  }
  if (!process.argv.includes("--no-pgboss")) await (await import("./bench/pgboss.js")).pgbossBench({ quick: QUICK });
}

await main();
// Undici keeps idle sockets; nothing else is pending once main returns.
process.exit(0);
