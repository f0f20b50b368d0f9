/**
 * What a user would pick instead on a server: pg-boss 12 (`fetch` + `complete`) on a throwaway
 * PostgreSQL 15 (fsync on, scripts/support/postgres.ts) against ours over a local sqld, side by side in one
 * run, slice by slice in alternating order, at concurrency 1, 8 and 32:
 *   - claim+ack loops (ours: claim + ack; pg-boss: fetch + complete, one job at a time);
 *   - consume() (ours) against the same pg-boss fetch+complete loops;
 *   - single publishes at concurrency 8 (publish / send), batches of 100 (publishMany / insert).
 * pg-boss runs two queues: `standard` (no ordering: what its users get by default) and
 * `key_strict_fifo` keyed by group (FIFO, one active job per key: our semantics).
 *
 * For our rows it also prints what bounds them: one write batch in flight per transport, so a rate is
 * (messages per batch) / (time per batch), and a batch costs a round trip plus its statements.
 *
 * `npm run bench:pgboss` [--quick] runs it alone; `npm run bench` runs it at the end. Without
 * PostgreSQL installed (`apt-get install -y postgresql`) it prints a note and skips.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { writeStatsOf } from "../../src/core/internals.js";
import { consume, LibsqlTransport } from "../../src/index.js";
import { startPostgres } from "../support/postgres.js";
import { startSqld } from "../support/sqld.js";
import { fmt, progress, type RunResult, runLoops, table } from "./lib.js";
import { peerImport } from "./peers.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const CONCURRENCY = [1, 8, 32] as const;
const GROUPS = 256;
const VIS = 60;
const PAD = "x".repeat(48);
const STD = "bench_standard";
const FIFO = "bench_fifo";

/** The part of pg-boss 12's API the comparison uses (pg-boss is installed on demand: scripts/bench/peers.ts). */
interface PgBoss {
  on(event: "error", f: (e: unknown) => void): void;
  start(): Promise<unknown>;
  stop(options: { graceful: boolean; close: boolean }): Promise<void>;
  createQueue(name: string, options?: { policy: string }): Promise<void>;
  send(name: string, data: object): Promise<string | null>;
  insert(name: string, jobs: { data: object; singletonKey?: string }[]): Promise<unknown>;
  fetch(name: string): Promise<{ id: string }[]>;
  complete(name: string, id: string): Promise<unknown>;
}
type PgBossClass = new (o: { connectionString: string; max: number; schedule: boolean; supervise: boolean }) => PgBoss;

interface Acc {
  units: number;
  secs: number;
  errors: number;
  firstError?: string;
  batches: number;
  writes: number;
  statements: number;
}

/** Runs the comparison; answers its section of the report (undefined when PostgreSQL is missing). */
export async function pgbossBench({ quick = false }: { quick?: boolean } = {}): Promise<string | undefined> {
  const cfg = quick ? { rounds: 2, sliceMs: 700, seed: 8_000 } : { rounds: 4, sliceMs: 1500, seed: 30_000 };
  const pg = await startPostgres();
  if (!pg) {
    progress("pg-boss: PostgreSQL is not installed (apt-get install -y postgresql): skipping the pg-boss comparison");
    return undefined;
  }
  const sqld = await startSqld();
  const acc = new Map<string, Acc>();
  let t: LibsqlTransport | undefined;
  let boss: PgBoss | undefined;
  const started = new Date();
  try {
    t = await LibsqlTransport.create(sqld.url);
    const ours = t;
    const { PgBoss } = await peerImport<{ PgBoss: PgBossClass }>("pg-boss");
    boss = new PgBoss({ connectionString: pg.url, max: 40, schedule: false, supervise: false });
    boss.on("error", (e) => progress(`pg-boss error: ${(e as Error).message}`));
    await boss.start();
    await boss.createQueue(STD);
    await boss.createQueue(FIFO, { policy: "key_strict_fifo" });
    const pb = boss;

    const left = { ours: 0, [STD]: 0, [FIFO]: 0 } as { ours: number; [queue: string]: number };
    let n = 0;
    const event = () => ({ n: n++, pad: PAD });
    const topUp = async () => {
      while (left.ours < cfg.seed) {
        const seqs = await ours.publishMany(
          Array.from({ length: 1000 }, (_, i) => ({ groupId: `g${i % GROUPS}`, event: event() })),
        );
        left.ours += seqs.length;
      }
      for (const q of [STD, FIFO]) {
        while ((left[q] as number) < cfg.seed) {
          await pb.insert(
            q,
            Array.from({ length: 1000 }, (_, i) => ({ data: event(), singletonKey: `g${i % GROUPS}` })),
          );
          left[q] = (left[q] as number) + 1000;
        }
      }
    };

    const record = (key: string, r: RunResult, stats?: { batches: number; writes: number; statements: number }) => {
      const a = acc.get(key) ?? { units: 0, secs: 0, errors: 0, batches: 0, writes: 0, statements: 0 };
      a.units += r.units;
      a.secs += r.secs;
      a.errors += r.errors;
      a.firstError ??= r.firstError;
      if (stats) {
        a.batches += stats.batches;
        a.writes += stats.writes;
        a.statements += stats.statements;
      }
      acc.set(key, a);
      progress(`  ${key}: ${fmt(r.units / r.secs)}/s${r.errors ? ` (${r.errors} errors: ${r.firstError})` : ""}`);
    };
    /** Runs `f` on our transport and records it with the write path's counters for the slice. */
    const oursSlice = async (key: string, f: () => Promise<RunResult>, drains: boolean) => {
      const s0 = { ...writeStatsOf(ours) };
      const r = await f();
      if (drains) left.ours -= r.units;
      record(key, r, {
        batches: writeStatsOf(ours).batches - s0.batches,
        writes: writeStatsOf(ours).writes - s0.writes,
        statements: writeStatsOf(ours).statements - s0.statements,
      });
    };

    const oursLoop = (c: number) =>
      runLoops({
        concurrency: c,
        ms: cfg.sliceMs,
        maxOps: left.ours as number,
        op: async (w) => {
          const l = await ours.claim(`w${w}`, VIS);
          if (!l) return 0;
          await ours.ack(l);
          return 1;
        },
      });
    const oursConsume = async (c: number): Promise<RunResult> => {
      const stop = new AbortController();
      let errors = 0;
      let firstError: string | undefined;
      const t0 = performance.now();
      const timer = setTimeout(() => stop.abort(), cfg.sliceMs);
      const summary = await consume(ours, () => {}, {
        workerId: `consume-${c}`,
        concurrency: c,
        visibility: VIS,
        signal: stop.signal,
        onError: (e) => {
          errors++;
          firstError ??= String(e);
        },
      });
      clearTimeout(timer);
      return { units: summary.acked, errors, firstError, secs: (performance.now() - t0) / 1000, lat: [] };
    };
    const bossLoop = async (q: string, c: number) => {
      const r = await runLoops({
        concurrency: c,
        ms: cfg.sliceMs,
        maxOps: left[q] as number,
        op: async () => {
          const [job] = await pb.fetch(q);
          if (!job) return 0;
          await pb.complete(q, job.id);
          return 1;
        },
      });
      left[q] = (left[q] as number) - r.units;
      return r;
    };

    for (let round = 1; round <= cfg.rounds; round++) {
      progress(`pg-boss round ${round}/${cfg.rounds}`);
      const oursFirst = round % 2 === 1;
      for (const c of CONCURRENCY) {
        await topUp();
        const cases: [string, () => Promise<void>][] = [
          [`ours.loop.c${c}`, () => oursSlice(`ours.loop.c${c}`, () => oursLoop(c), true)],
          [`ours.consume.c${c}`, () => oursSlice(`ours.consume.c${c}`, () => oursConsume(c), true)],
          [`pgboss.standard.c${c}`, async () => record(`pgboss.standard.c${c}`, await bossLoop(STD, c))],
          [`pgboss.fifo.c${c}`, async () => record(`pgboss.fifo.c${c}`, await bossLoop(FIFO, c))],
        ];
        for (const [, run] of oursFirst ? cases : [...cases].reverse()) await run();
      }
      // Publishing: single messages at concurrency 8, batches of 100 one at a time.
      const publishCases: [string, () => Promise<void>][] = [
        [
          "ours.publish.c8",
          () =>
            oursSlice(
              "ours.publish.c8",
              async () => {
                const r = await runLoops({
                  concurrency: 8,
                  ms: cfg.sliceMs,
                  maxOps: 1_000_000,
                  op: async (w) => {
                    await ours.publish(`p${w}-${n % GROUPS}`, event());
                    return 1;
                  },
                });
                left.ours += r.units;
                return r;
              },
              false,
            ),
        ],
        [
          "pgboss.send.c8",
          async () => {
            const r = await runLoops({
              concurrency: 8,
              ms: cfg.sliceMs,
              maxOps: 1_000_000,
              op: async () => {
                await pb.send(STD, event());
                return 1;
              },
            });
            left[STD] = (left[STD] as number) + r.units;
            record("pgboss.send.c8", r);
          },
        ],
        [
          "ours.publishMany100",
          () =>
            oursSlice(
              "ours.publishMany100",
              async () => {
                const r = await runLoops({
                  concurrency: 1,
                  ms: cfg.sliceMs,
                  maxOps: 100_000,
                  op: async () =>
                    (
                      await ours.publishMany(
                        Array.from({ length: 100 }, (_, i) => ({ groupId: `b${i % GROUPS}`, event: event() })),
                      )
                    ).length,
                });
                left.ours += r.units;
                return r;
              },
              false,
            ),
        ],
        [
          "pgboss.insert100",
          async () => {
            const r = await runLoops({
              concurrency: 1,
              ms: cfg.sliceMs,
              maxOps: 100_000,
              op: async () => {
                await pb.insert(
                  STD,
                  Array.from({ length: 100 }, () => ({ data: event() })),
                );
                return 100;
              },
            });
            left[STD] = (left[STD] as number) + r.units;
            record("pgboss.insert100", r);
          },
        ],
      ];
      for (const [, run] of oursFirst ? publishCases : [...publishCases].reverse()) await run();
    }
  } finally {
    await boss?.stop({ graceful: false, close: true }).catch(() => undefined);
    t?.close();
    await sqld.stop();
    await pg.stop();
  }

  const rate = (k: string) => {
    const a = acc.get(k);
    return a && a.secs > 0 ? a.units / a.secs : Number.NaN;
  };
  const ratio = (a: string, b: string) => fmt(rate(a) / rate(b), 2);
  const rows: string[][] = [];
  for (const kind of ["loop", "consume"] as const) {
    for (const c of CONCURRENCY) {
      rows.push([
        `${kind === "loop" ? "claim+ack loops" : "consume()"} vs fetch+complete loops, c=${c}`,
        fmt(rate(`ours.${kind}.c${c}`)),
        fmt(rate(`pgboss.standard.c${c}`)),
        `${ratio(`ours.${kind}.c${c}`, `pgboss.standard.c${c}`)}x`,
        fmt(rate(`pgboss.fifo.c${c}`)),
        `${ratio(`ours.${kind}.c${c}`, `pgboss.fifo.c${c}`)}x`,
      ]);
    }
  }
  rows.push(
    [
      "single publishes (publish / send), c=8",
      fmt(rate("ours.publish.c8")),
      fmt(rate("pgboss.send.c8")),
      `${ratio("ours.publish.c8", "pgboss.send.c8")}x`,
      "-",
      "-",
    ],
    [
      "batches of 100 (publishMany / insert), msgs/s",
      fmt(rate("ours.publishMany100")),
      fmt(rate("pgboss.insert100")),
      `${ratio("ours.publishMany100", "pgboss.insert100")}x`,
      "-",
      "-",
    ],
  );
  const bound = [...acc.entries()]
    .filter(([k, a]) => k.startsWith("ours.") && a.batches > 0)
    .map(([k, a]) => [
      k.slice(5),
      fmt(a.units / a.secs),
      fmt(a.batches / a.units, 2),
      fmt(a.writes / a.batches, 1),
      fmt(a.statements / a.batches, 1),
      fmt((a.secs * 1000) / a.batches, 2),
    ]);
  const errors = [...acc.entries()]
    .filter(([, a]) => a.errors > 0)
    .map(([k, a]) => `${k}: ${a.errors} (${a.firstError})`);
  const text = [
    `### pg-boss 12 on ${pg.version} (fsync on) vs ours over sqld, ${cfg.rounds} alternating rounds of ${cfg.sliceMs} ms slices`,
    "",
    "Messages (claim+ack or fetch+complete cycles) per second; pg-boss `standard` has no ordering, `key_strict_fifo` is keyed by group like ours.",
    "",
    table(["case", "ours", "pg-boss standard", "ours / standard", "pg-boss key_strict_fifo", "ours / fifo"], rows),
    "",
    "What bounds ours: one write batch in flight per transport, so msgs/s = (msgs per batch) / (ms per batch); a batch is one round trip plus its statements.",
    "",
    table(
      ["our case", "msgs/s", "batches per msg", "operations per batch", "statements per batch", "ms per batch"],
      bound,
    ),
    errors.length ? `\nErrors: ${errors.join("; ")}` : "",
  ].join("\n");
  mkdirSync(join(ROOT, "bench-results"), { recursive: true });
  const stamp = started.toISOString().replace(/[:.]/g, "-");
  const file = join(ROOT, "bench-results", `${stamp}-pgboss${quick ? "-quick" : ""}.json`);
  writeFileSync(
    file,
    `${JSON.stringify({ started, config: cfg, postgres: pg.version, cases: Object.fromEntries(acc) }, null, 2)}\n`,
  );
  progress(`wrote ${file}`);
  return text;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const text = await pgbossBench({ quick: process.argv.includes("--quick") });
  if (text) process.stdout.write(`\n${text}\n`);
  process.exit(0);
}
