/**
 * `npm run bench` (full, for BENCHMARKS.md) and `npm run bench:quick` (smoke, about 2 minutes).
 *
 * Starts its own sqld processes and runs every case in one run, interleaved in rounds (floor, ours and
 * naive alternate slice by slice), so that the ratios compare figures taken under the same machine
 * load. Progress goes to stderr; the tables to stdout; the figures to bench-results/*.json; a full run
 * also rewrites the generated part of BENCHMARKS.md. The cases live in scripts/bench/, one module per
 * concern.
 *
 * Every loop is bounded by time, by an operation budget and by an error budget.
 *
 * `--distance-only` (`npm run bench:distance`, with `--quick` for a short grid) runs the distance and
 * shards case alone (scripts/bench/distance.ts) and writes its own JSON; `--no-distance` leaves it out.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CFG, EXTRA, NO_COST, NO_DEPTH, NO_FILE, QUICK, ROOT } from "./bench/config.js";
import { costBench } from "./bench/cost.js";
import { depthCases } from "./bench/depth.js";
import { fileCases } from "./bench/file.js";
import { httpCases } from "./bench/http.js";
import { acc, percentile, progress } from "./bench/lib.js";
import { machine, report } from "./bench/report.js";
import { startSqld } from "./support/sqld.js";

const NO_WORKER = process.argv.includes("--no-worker");
const NO_DISTANCE = process.argv.includes("--no-distance");
const DISTANCE_ONLY = process.argv.includes("--distance-only");

// ---------------------------------------------------------------------------------------------

/** The distance and shards case alone: its table on stdout, its figures in bench-results/*-distance-<mode>.json. */
async function distanceOnly(started: Date, m0: ReturnType<typeof machine>): Promise<void> {
  const { distanceBench, DISTANCE_FULL, DISTANCE_QUICK } = await import("./bench/distance.js");
  const config = { ...(QUICK ? DISTANCE_QUICK : DISTANCE_FULL), worker: !NO_WORKER };
  const r = await distanceBench({ quick: QUICK, config });
  const m = machine();
  const head = `Run ${started.toISOString()} (distance only, ${QUICK ? "quick" : "full"}); ${m.nproc} cores, ${m.cpu}, node ${m.node}, ${m.sqld}; load average at start ${m0.loadavg}, at end ${m.loadavg}.`;
  process.stdout.write(`\n${head}\n\n${r.text}\n`);
  mkdirSync(join(ROOT, "bench-results"), { recursive: true });
  const mode = `distance-${QUICK ? "quick" : "full"}`;
  const json = {
    started: started.toISOString(),
    finished: new Date().toISOString(),
    mode,
    config,
    machine: m,
    machineAtStart: m0,
    sections: { distance: r.figures },
  };
  const stamp = started.toISOString().replace(/[:.]/g, "-");
  const file = join(ROOT, "bench-results", `${stamp}-${mode}.json`);
  writeFileSync(file, `${JSON.stringify(json, null, 2)}\n`);
  writeFileSync(join(ROOT, "bench-results", `latest-${mode}.json`), `${JSON.stringify(json, null, 2)}\n`);
  progress(`wrote ${file}`);
}

async function main() {
  const started = new Date();
  const m0 = machine();
  progress(
    `${QUICK ? "quick" : "full"} run on ${m0.nproc} cores (${m0.cpu}), node ${m0.node}, ${m0.sqld}, load ${m0.loadavg}`,
  );
  if (DISTANCE_ONLY) {
    await distanceOnly(started, m0);
    return;
  }
  const sqld = await startSqld();
  try {
    await httpCases(sqld);
  } finally {
    await sqld.stop();
  }
  if (!NO_DEPTH) await depthCases();
  if (!NO_FILE) await fileCases();
  const cost = NO_COST ? undefined : await costBench({ depths: CFG.costDepths, runs: CFG.costRuns });
  // Sections of their own, each measured side by side within itself.
  const sections: string[] = [];
  if (cost) {
    sections.push(
      `### What it costs: rows billed per operation (sqld's own counters), over HTTP, default options\n\n${cost.text}`,
    );
  }
  const figures: Record<string, Record<string, number>> = {};
  if (!NO_WORKER) {
    // The Worker's bundle under Miniflare: its own path, and delivery (long poll, push) through it.
    const { workerPathBench } = await import("./bench/worker-path.js");
    const { longPollBench } = await import("./bench/delivery.js");
    for (const [name, run] of [
      ["workerPath", workerPathBench],
      ["delivery", longPollBench],
    ] as const) {
      const r = await run({ quick: QUICK });
      sections.push(r.text);
      figures[name] = r.figures;
    }
  }
  if (!NO_DISTANCE) {
    // Distance (a latency proxy before sqld) and shards (sqld namespaces), the library and the Worker.
    const { distanceBench, DISTANCE_FULL, DISTANCE_QUICK } = await import("./bench/distance.js");
    const r = await distanceBench({
      quick: QUICK,
      config: { ...(QUICK ? DISTANCE_QUICK : DISTANCE_FULL), worker: !NO_WORKER },
    });
    sections.push(r.text);
    figures.distance = r.figures;
  }
  if (!process.argv.includes("--no-pgboss")) {
    const text = await (await import("./bench/pgboss.js")).pgbossBench({ quick: QUICK });
    if (text) sections.push(text);
  }
  const r = report(started, m0);
  const { targets, machine: m, bestFloor } = r;
  const text = [r.text, ...sections].join("\n");
  process.stdout.write(`\n${text}\n`);

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
    cost: cost?.cases,
    sections: figures,
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
}

await main();
// Undici keeps idle sockets; nothing else is pending once main returns.
process.exit(0);
