/**
 * `npm run startup`: the Worker's startup cost, as `wrangler check startup` profiles it (the bundle
 * built as for deploy, its top level run once in workerd). Runs it a few times and prints, for each
 * profile, its length, its time that is not idle (the length less V8's idle samples), and the time in
 * V8's samples of our code (compiling and running the bundle's top level; the length also holds
 * workerd's own work before the first sample and after the last), then the fastest run and the
 * medians. Other work on the machine only ever adds time, so the fastest run is the figure to compare
 * and the one held to the budget (exit 1 past it).
 *
 * `npm run startup -- a.bundle b.bundle ...` compares prebuilt bundles instead (each made by
 * `wrangler deploy --dry-run --outfile a.bundle`, with whatever flags or tree), in alternating rounds,
 * so that the machine's load weighs on each alike; no budget is held.
 *
 * Env: STARTUP_RUNS (default 5: runs, or rounds when comparing), STARTUP_BUDGET_MS (default 50).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

interface Profile {
  startTime: number;
  endTime: number;
  nodes: Array<{ id: number; callFrame: { functionName: string } }>;
  samples: number[];
  timeDeltas: number[];
}
interface Run {
  totalMs: number;
  busyMs: number;
  sampledMs: number;
}

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const runs = Number(process.env.STARTUP_RUNS ?? 5);
const budget = Number(process.env.STARTUP_BUDGET_MS ?? 50);
const dir = mkdtempSync(join(tmpdir(), "turso-queue-startup-"));
const bundles = process.argv.slice(2).map((b) => resolve(b));
let profiles = 0;

function measure(bundle?: string): Run {
  const out = join(dir, `startup-${profiles++}.cpuprofile`);
  const args = ["check", "startup", "--outfile", out, ...(bundle === undefined ? [] : ["--worker", bundle])];
  execFileSync(join(root, "node_modules", ".bin", "wrangler"), args, {
    cwd: root,
    stdio: "ignore",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
  });
  const p = JSON.parse(readFileSync(out, "utf8")) as Profile;
  const idle = new Set(p.nodes.filter((n) => n.callFrame.functionName === "(idle)").map((n) => n.id));
  let idleUs = 0;
  let sampledUs = 0;
  p.samples.forEach((id, k) => {
    if (idle.has(id)) idleUs += p.timeDeltas[k] ?? 0;
    else sampledUs += p.timeDeltas[k] ?? 0;
  });
  const totalMs = (p.endTime - p.startTime) / 1000;
  return { totalMs, busyMs: totalMs - idleUs / 1000, sampledMs: sampledUs / 1000 };
}

const describe = (r: Run) =>
  `profile ${r.totalMs.toFixed(1)} ms, not idle ${r.busyMs.toFixed(1)} ms, in samples ${r.sampledMs.toFixed(1)} ms`;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

function summary(results: Run[]): { fastest: Run; line: string } {
  const fastest = results.reduce((a, b) => (b.totalMs < a.totalMs ? b : a));
  const line =
    `fastest: ${describe(fastest)}; median: profile ${median(results.map((r) => r.totalMs)).toFixed(1)} ms, ` +
    `not idle ${median(results.map((r) => r.busyMs)).toFixed(1)} ms, ` +
    `in samples ${median(results.map((r) => r.sampledMs)).toFixed(1)} ms`;
  return { fastest, line };
}

if (bundles.length === 0) {
  const results = Array.from({ length: runs }, () => measure());
  for (const r of results) console.log(describe(r));
  const { fastest, line } = summary(results);
  console.log(`${line} (budget ${budget} ms)`);
  if (fastest.totalMs > budget) process.exit(1);
} else {
  const results = new Map<string, Run[]>(bundles.map((b) => [b, []]));
  for (let round = 0; round < runs; round++) {
    // Each round in another order, so that no bundle always runs first.
    const order = bundles.map((_, i) => bundles[(i + round) % bundles.length] as string);
    for (const b of order) results.get(b)?.push(measure(b));
    console.error(`round ${round + 1}/${runs}`);
  }
  for (const [b, rs] of results) console.log(`${basename(b)}: ${summary(rs).line}`);
}
