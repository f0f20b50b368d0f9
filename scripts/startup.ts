/**
 * `npm run startup`: the Worker's startup cost, as `wrangler check startup` profiles it (the bundle
 * built as for deploy, its top level run once in workerd). Runs it a few times and prints each
 * profile's length and its CPU time that is not idle, then the fastest run and the medians. Other
 * work on the machine only ever adds time, so the fastest run is the figure to compare and the one
 * held to the budget (exit 1 past it).
 *
 * Env: STARTUP_RUNS (default 5), STARTUP_BUDGET_MS (default 50).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

interface Profile {
  startTime: number;
  endTime: number;
  nodes: Array<{ id: number; callFrame: { functionName: string } }>;
  samples: number[];
  timeDeltas: number[];
}

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const runs = Number(process.env.STARTUP_RUNS ?? 5);
const budget = Number(process.env.STARTUP_BUDGET_MS ?? 50);
const dir = mkdtempSync(join(tmpdir(), "turso-queue-startup-"));

function measure(i: number): { totalMs: number; busyMs: number } {
  const out = join(dir, `startup-${i}.cpuprofile`);
  execFileSync(join(root, "node_modules", ".bin", "wrangler"), ["check", "startup", "--outfile", out], {
    cwd: root,
    stdio: "ignore",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
  });
  const p = JSON.parse(readFileSync(out, "utf8")) as Profile;
  const idle = new Set(p.nodes.filter((n) => n.callFrame.functionName === "(idle)").map((n) => n.id));
  let idleUs = 0;
  p.samples.forEach((id, k) => {
    if (idle.has(id)) idleUs += p.timeDeltas[k] ?? 0;
  });
  const totalMs = (p.endTime - p.startTime) / 1000;
  return { totalMs, busyMs: totalMs - idleUs / 1000 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const results = Array.from({ length: runs }, (_, i) => measure(i));
for (const r of results) console.log(`profile ${r.totalMs.toFixed(1)} ms, not idle ${r.busyMs.toFixed(1)} ms`);
const fastest = results.reduce((a, b) => (b.totalMs < a.totalMs ? b : a));
const totals = results.map((r) => r.totalMs);
const busy = results.map((r) => r.busyMs);
console.log(
  `fastest: profile ${fastest.totalMs.toFixed(1)} ms, not idle ${fastest.busyMs.toFixed(1)} ms; ` +
    `median: profile ${median(totals).toFixed(1)} ms, not idle ${median(busy).toFixed(1)} ms (budget ${budget} ms)`,
);
if (fastest.totalMs > budget) process.exit(1);
