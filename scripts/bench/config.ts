/** The benchmark's configuration, parsed once from the command line and the environment. */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { TransportOptions } from "../../src/index.js";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const QUICK = process.argv.includes("--quick");
export const NO_FILE = process.argv.includes("--no-file");
export const NO_DEPTH = process.argv.includes("--no-depth");
export const NO_COST = process.argv.includes("--no-cost");
/** The bearer token of the Worker the benches serve under Miniflare. */
export const TOKEN = "bench-token-0123456789abcdef";

export const CFG = QUICK
  ? {
      rounds: 2,
      sliceMs: 700,
      fileSliceMs: 500,
      seed: 8_000,
      depth: [1_000, 100_000],
      costDepths: [1_000, 100_000],
      costRuns: 10,
      depthSamples: 100,
      publishBatch: 100,
    }
  : {
      rounds: 4,
      sliceMs: 1500,
      fileSliceMs: 1000,
      seed: 20_000,
      depth: [1_000, 100_000, 1_000_000],
      costDepths: [1_000, 1_000_000],
      costRuns: 20,
      depthSamples: 450,
      publishBatch: 100,
    };
export const CONCURRENCY = [1, 4, 8, 32];
export const BATCH_N = [1, 8, 32];
export const GROUPS = 256;
export const DEPTH_GROUPS = 10_000;
export const VIS = 60;
/** Extra transport options for tuning runs, e.g. TQ_BENCH_OPTS='{"maxInFlight":2}'. */
export const EXTRA: TransportOptions = process.env.TQ_BENCH_OPTS ? JSON.parse(process.env.TQ_BENCH_OPTS) : {};
export const PAD = "x".repeat(48);
