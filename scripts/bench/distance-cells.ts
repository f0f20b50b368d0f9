/**
 * The distance bench's cells (scripts/bench/distance.ts): what a cell is and what it measured, the
 * drain that measures it, the proxy's request counter, and seeding a queue's shards straight to sqld.
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { ConsumerQueue } from "../../src/consume/consume.js";
import { type consume, LibsqlTransport, ShardedQueue } from "../../src/index.js";
import { billed, type Sqld } from "../support/sqld.js";
import { sleep } from "./lib.js";

/** Text only a claim statement carries (src/core/sql/claim.ts). */
const CLAIM = "tq_claimed_at AS stamp";
/** Once per claim statement (one claimMany call) in a batch. */
const CLAIM_STATEMENT = "RETURNING seq, group_id";
const NS_HEADER = /\r\nx-namespace-bin:\s*([A-Za-z0-9+/_-]+)/i;

export interface DistanceConfig {
  /** Round trips the proxy adds, ms. */
  distances: number[];
  shards: number[];
  /** Concurrencies below 256 (the issue's baseline columns), library only. */
  low: number[];
  /** `consume(256)` loops run at once on one database, besides one (library and Worker). */
  oneShardLoops: number[];
  backlog: number;
  groups: number;
  /** Longest a drain may run, ms (its rate is then what it acked in that time); `low`'s drains, `lowDrainMs`. */
  drainMs: number;
  lowDrainMs: number;
  /** Messages per latency case (push, long poll), one published every `gapMs`. */
  latencyMessages: number;
  gapMs: number;
  /** The latency cases again at the farthest distance, one publish every `spacedGapMs` (longer than a round trip). */
  spacedGapMs: number;
  /** Run the Worker's cases (drain and delivery). */
  worker: boolean;
}

export const DISTANCE_FULL: DistanceConfig = {
  distances: [0, 25, 50],
  shards: [1, 2, 4],
  low: [8, 64],
  oneShardLoops: [2, 4],
  backlog: 6000,
  groups: 2000,
  drainMs: 8000,
  lowDrainMs: 4000,
  latencyMessages: 40,
  gapMs: 40,
  spacedGapMs: 150,
  worker: true,
};

export const DISTANCE_QUICK: DistanceConfig = {
  distances: [0, 50],
  shards: [1, 4],
  low: [],
  oneShardLoops: [4],
  backlog: 3000,
  groups: 1000,
  drainMs: 4000,
  lowDrainMs: 3000,
  latencyMessages: 15,
  gapMs: 40,
  spacedGapMs: 150,
  worker: true,
};

export type Path = "library" | "worker";

export interface Cell {
  path: Path;
  distance: number;
  shards: number;
  /** Per consume() loop. */
  concurrency: number;
  loops: number;
  /** Library experiments (see `Variant`). */
  variant?: Variant;
}

/**
 * Cells besides consume() as it is:
 * - `before`: the consume() of the checkout given with `--before=DIR`, on the same queues;
 * - `perShard`: each loop on one shard's transport (no ShardedQueue between the shards);
 * - `batch<N>`: on transports with `maxBatchStatements: N` (`BATCHES`).
 */
export type Variant = "before" | "perShard" | `batch${number}`;
export const label = (v: Variant) =>
  v === "before" ? "before" : v === "perShard" ? "one per shard" : `maxBatchStatements ${batchOf(v)}`;
export const batchOf = (v: Variant | undefined) => (v?.startsWith("batch") ? Number(v.slice(5)) : undefined);
/** The write batch sizes one database's consume(1000) is also run with (the default is 800). */
export const BATCHES = [2100, 4000] as const;

export type Consume = typeof consume;

/** `--before=DIR`: the consume() of the checkout in DIR, to run beside this one. */
export async function beforeConsume(): Promise<Consume | undefined> {
  const arg = process.argv.find((a) => a.startsWith("--before="));
  if (arg === undefined) return undefined;
  const file = resolve(arg.slice("--before=".length), "src/index.ts");
  return ((await import(pathToFileURL(file).href)) as { consume: Consume }).consume;
}

export interface CellResult extends Cell {
  /** The issue's measure: messages acked over the whole drain (start to last ack answered). */
  msgsPerSec: number;
  /** Steady state: messages handled between 10% and 90% of the backlog, over that time (no ramp, no tail). */
  steadyPerSec: number;
  firstMs: number;
  stopMs: number;
  acked: number;
  secs: number;
  /** The whole backlog was acked within the time allowed. */
  complete: boolean;
  errors: number;
  firstError?: string;
  requestsPerMsg: number;
  claimBatchesPerMsg: number;
  /** Claim statements (claimMany calls) per write batch that carried claims. */
  claimsPerClaimBatch: number;
  writtenPerMsg: number;
  readPerMsg: number;
  /** CPU ms per message. */
  cpu: { sqld: number; workerd: number; node: number };
  /** Cores busy over the drain (CPU ms / wall ms); workerdThread: its busiest thread. */
  cores: { sqld: number; workerd: number; workerdThread: number; node: number };
}

/** consume()'s largest concurrency (src/consume/options.ts): 256 × 4 shards is capped to it. */
export const MAX_CONCURRENCY = 1000;
export const wide = (shards: number) => Math.min(256 * shards, MAX_CONCURRENCY);

export const key = (c: Cell) =>
  `${c.path}.d${c.distance}.s${c.shards}.c${c.concurrency}x${c.loops}${c.variant ? `.${c.variant}` : ""}`;

/** Counts requests through the proxy by the namespace they name. */
export class Counter {
  readonly requests = new Map<string, number>();
  readonly claims = new Map<string, number>();
  readonly claimStatements = new Map<string, number>();
  observe = (request: string): void => {
    const m = NS_HEADER.exec(request);
    const ns = m ? Buffer.from(m[1] as string, "base64").toString("utf8") : "";
    this.requests.set(ns, (this.requests.get(ns) ?? 0) + 1);
    if (request.includes(CLAIM)) {
      this.claims.set(ns, (this.claims.get(ns) ?? 0) + 1);
      const n = request.split(CLAIM_STATEMENT).length - 1;
      this.claimStatements.set(ns, (this.claimStatements.get(ns) ?? 0) + n);
    }
  };
  sum(which: Map<string, number>, namespaces: string[]): number {
    return namespaces.reduce((a, ns) => a + (which.get(ns) ?? 0), 0);
  }
}

interface Drained {
  acked: number;
  secs: number;
  steadyPerSec: number;
  /** From the start to the first message handled; from the last handled to the loops stopped (their acks sent). */
  firstMs: number;
  stopMs: number;
  errors: number;
  firstError?: string;
}

/**
 * `loops` consume() loops of `concurrency` each on `queues[i % queues.length]`, until `backlog`
 * messages were handled (then stopped, their acks sent), `maxMs` passed, or 50 errors.
 */
export async function drain(
  run: Consume,
  queues: ConsumerQueue[],
  loops: number,
  concurrency: number,
  backlog: number,
  maxMs: number,
) {
  const stop = new AbortController();
  let handled = 0;
  let tFirst = Number.NaN;
  let t10 = Number.NaN;
  let t90 = Number.NaN;
  let tAll = Number.NaN;
  let errors = 0;
  let firstError: string | undefined;
  const timer = setTimeout(() => stop.abort(), maxMs);
  const t0 = performance.now();
  const summaries = await Promise.all(
    Array.from({ length: loops }, (_, i) =>
      run(
        queues[i % queues.length] as ConsumerQueue,
        () => {
          handled++;
          if (handled === 1) tFirst = performance.now();
          if (handled === Math.ceil(backlog * 0.1)) t10 = performance.now();
          if (handled === Math.floor(backlog * 0.9)) t90 = performance.now();
          if (handled === backlog) tAll = performance.now();
          if (handled >= backlog) stop.abort();
        },
        {
          workerId: `drain-${i}`,
          concurrency,
          visibility: 60,
          signal: stop.signal,
          onError: (e) => {
            errors++;
            firstError ??= e instanceof Error ? `${e.name}: ${e.message}` : String(e);
            if (errors >= 50) stop.abort();
          },
        },
      ),
    ),
  );
  clearTimeout(timer);
  const tEnd = performance.now();
  const secs = (tEnd - t0) / 1000;
  const acked = summaries.reduce((a, s) => a + s.acked, 0);
  const steadyPerSec = (Math.floor(backlog * 0.9) - Math.ceil(backlog * 0.1)) / ((t90 - t10) / 1000);
  const out: Drained = { acked, secs, steadyPerSec, firstMs: tFirst - t0, stopMs: tEnd - tAll, errors };
  if (firstError !== undefined) out.firstError = firstError;
  return out;
}

/** Publishes `backlog` messages over `groups` groups straight to the shards' namespaces (not through the proxy). */
export async function seed(sqld: Sqld, namespaces: string[], backlog: number, groups: number): Promise<void> {
  const shards = await Promise.all(namespaces.map((namespace) => LibsqlTransport.create(sqld.url, { namespace })));
  const q = new ShardedQueue(shards);
  try {
    for (let i = 0; i < backlog; i += 1000) {
      const n = Math.min(1000, backlog - i);
      await q.publishMany(
        Array.from({ length: n }, (_, k) => ({ groupId: `g${(i + k) % groups}`, event: { i: i + k } })),
      );
    }
  } finally {
    q.close();
  }
}

export async function rowsOf(adminUrl: string, namespaces: string[]): Promise<{ read: number; written: number }> {
  const all = await Promise.all(namespaces.map((ns) => billed(adminUrl, ns)));
  return all.reduce((a, b) => ({ read: a.read + b.read, written: a.written + b.written }), { read: 0, written: 0 });
}

export async function until(what: string, ms: number, probe: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`distance bench: timed out waiting for ${what}`);
    await sleep(10);
  }
}

export const depthOf = (s: { ready: number; waiting: number; inFlight: number; parked: number; delayed: number }) =>
  s.ready + s.waiting + s.inFlight + s.parked + s.delayed;
