/**
 * Distance and shards, side by side in one run (issue 19, item 4): a latency proxy between the
 * writers and sqld (every answer held 0, 25 or 50 ms: the round trip to a primary that far away), and
 * queues of 1, 2 and 4 shards, each shard a namespace of one sqld (`--enable-namespaces`) behind that
 * proxy.
 *
 * - **Library**: `consume()` on a `ShardedQueue` of N `LibsqlTransport`s through the proxy (one
 *   database, no ShardedQueue, for one shard), draining a backlog published beforehand straight to
 *   sqld: at concurrency 8, 64, 256 and 256 × N (at most 1,000); then (`Variant`) N `consume(256)`
 *   loops on the one queue, one loop per shard's transport, a larger `maxBatchStatements`, and, with
 *   `--before=DIR`, the consume() of another checkout in DIR (say a `git archive` of the last commit,
 *   with node_modules linked) on the same queues, cell after cell: before and after in one run.
 * - **Worker**: the production bundle under Miniflare on its direct socket (QueueWriters reach the
 *   shards through the proxy; the admin API is not behind it), queues made with `PUT /v1/queues/{q}`
 *   `{"shards": N}`, drained by `consume()` over the HTTP client.
 * - **Delivery**: publish→delivery latency through the Worker, by push (a subscription to a consumer
 *   on 127.0.0.1) and by long poll (4 consumers), per distance and shard count.
 * - Per message: the requests that reach sqld (counted by the proxy, per namespace), the rows sqld
 *   bills (its admin stats, per namespace), and CPU per component (sqld, workerd, this process) from
 *   /proc, with each one's utilisation (cores busy) and workerd's busiest thread.
 *
 * Each drain's rate is the issue's measure (acked over the whole drain); the steady rate (10% to 90%
 * of the backlog) leaves out the ramp and the stop. Every drain is bounded by time, by its backlog and
 * by an error budget; every wait by a deadline. `npm run bench:distance` (scripts/bench.ts
 * `--distance-only`, `--quick` for a short grid) runs it alone.
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { ConsumerQueue } from "../../src/client/consume.js";
import { createClient, type QueueClient } from "../../src/client/index.js";
import { sqldNamespaces } from "../../src/core/databases.js";
import { consume, LibsqlTransport, ShardedQueue } from "../../src/index.js";
import { shardDatabaseName } from "../../src/rules.js";
import { startConsumer } from "../support/consumer.js";
import { serveWorker } from "../support/miniflare.js";
import { startProxy } from "../support/proxy.js";
import { billed, type Sqld, startSqld } from "../support/sqld.js";
import { TOKEN } from "./config.js";
import { fmt, percentile, progress, sleep, table } from "./lib.js";
import { busiestThreadMs, cpuMsOf, descendantsNamed, nodeCpuMs, threadCpuMs } from "./procs.js";

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
  worker: true,
};

type Path = "library" | "worker";

interface Cell {
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
type Variant = "before" | "perShard" | `batch${number}`;
const label = (v: Variant) =>
  v === "before" ? "before" : v === "perShard" ? "one per shard" : `maxBatchStatements ${batchOf(v)}`;
const batchOf = (v: Variant | undefined) => (v?.startsWith("batch") ? Number(v.slice(5)) : undefined);
/** The write batch sizes one database's consume(1000) is also run with (the default is 800). */
const BATCHES = [2100, 4000] as const;

type Consume = typeof consume;

/** `--before=DIR`: the consume() of the checkout in DIR, to run beside this one. */
async function beforeConsume(): Promise<Consume | undefined> {
  const arg = process.argv.find((a) => a.startsWith("--before="));
  if (arg === undefined) return undefined;
  const file = resolve(arg.slice("--before=".length), "src/client/consume.ts");
  return ((await import(pathToFileURL(file).href)) as { consume: Consume }).consume;
}

interface CellResult extends Cell {
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

/** consume()'s largest concurrency (src/client/consume-options.ts): 256 × 4 shards is capped to it. */
const MAX_CONCURRENCY = 1000;
const wide = (shards: number) => Math.min(256 * shards, MAX_CONCURRENCY);

const key = (c: Cell) =>
  `${c.path}.d${c.distance}.s${c.shards}.c${c.concurrency}x${c.loops}${c.variant ? `.${c.variant}` : ""}`;

/** Counts requests through the proxy by the namespace they name. */
class Counter {
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
async function drain(
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
async function seed(sqld: Sqld, namespaces: string[], backlog: number, groups: number): Promise<void> {
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

async function rowsOf(adminUrl: string, namespaces: string[]): Promise<{ read: number; written: number }> {
  const all = await Promise.all(namespaces.map((ns) => billed(adminUrl, ns)));
  return all.reduce((a, b) => ({ read: a.read + b.read, written: a.written + b.written }), { read: 0, written: 0 });
}

async function until(what: string, ms: number, probe: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`distance bench: timed out waiting for ${what}`);
    await sleep(10);
  }
}

const depthOf = (s: { ready: number; waiting: number; inFlight: number; parked: number; delayed: number }) =>
  s.ready + s.waiting + s.inFlight + s.parked + s.delayed;

// ---------------------------------------------------------------------------------------------
// delivery latency through the Worker

/** Publish→delivery latency (ms) with one subscription to a consumer on 127.0.0.1. */
export async function pushLatency(q: QueueClient, messages: number, gapMs: number): Promise<number[]> {
  const sentAt = new Map<number, number>();
  const got = new Map<number, number>();
  const consumer = await startConsumer((r) => {
    const id = (r.delivery.event as { id: number }).id;
    const t = sentAt.get(id);
    if (t !== undefined && !got.has(id)) got.set(id, performance.now() - t);
    return { status: 200 };
  });
  try {
    await q.subscribe("latency", { url: `${consumer.url}/latency`, maxInFlight: 10 });
    for (let id = 0; id < messages; id++) {
      sentAt.set(id, performance.now());
      await q.publish(`g${id % 8}`, { id });
      await sleep(gapMs);
    }
    await until("the pushes", 15_000, () => got.size >= messages);
    await until("the push acks", 15_000, async () => depthOf(await q.stats()) === 0);
  } finally {
    await q.unsubscribe("latency").catch(() => false);
    await consumer.close();
  }
  return [...got.values()].sort((a, b) => a - b);
}

/** The long poll's wait (s): the writer is not told when a client over a real socket hangs up, so each case waits it out. */
const WAIT = 3;

/** Publish→delivery latency (ms) with 4 consumers long-polling (`wait`), each acking what it gets. */
export async function longPollLatency(q: QueueClient, messages: number, gapMs: number): Promise<number[]> {
  const sentAt = new Map<number, number>();
  const got = new Map<number, number>();
  const stop = new AbortController();
  let errors = 0;
  const consumers = Array.from({ length: 4 }, async (_, w) => {
    while (!stop.signal.aborted && errors < 20) {
      try {
        const lease = await q.claim<{ id: number }>(`lp${w}`, 30, undefined, { wait: WAIT, signal: stop.signal });
        if (lease === null) continue;
        const t = sentAt.get(lease.event.id);
        if (t !== undefined && !got.has(lease.event.id)) got.set(lease.event.id, performance.now() - t);
        await q.ack(lease);
        if (got.size >= messages) stop.abort();
      } catch {
        if (stop.signal.aborted) return;
        errors++;
        await sleep(50);
      }
    }
  });
  await sleep(300); // the consumers settle into their waits before the first publish
  for (let id = 0; id < messages && !stop.signal.aborted; id++) {
    sentAt.set(id, performance.now());
    await q.publish(`g${id % 8}`, { id });
    await sleep(gapMs);
  }
  const deadline = Date.now() + 15_000;
  while (got.size < messages && Date.now() < deadline && errors < 20) await sleep(20);
  stop.abort();
  await Promise.allSettled(consumers);
  await sleep(WAIT * 1000 + 500);
  return [...got.values()].sort((a, b) => a - b);
}

// ---------------------------------------------------------------------------------------------

export async function distanceBench(opts: {
  quick: boolean;
  config?: DistanceConfig;
}): Promise<{ text: string; figures: Record<string, number> }> {
  const cfg = opts.config ?? (opts.quick ? DISTANCE_QUICK : DISTANCE_FULL);
  const before = await beforeConsume();
  const started = performance.now();
  const sqld = await startSqld({ namespaces: true });
  const adminUrl = sqld.adminUrl as string;
  const proxy = await startProxy(sqld.port);
  const counter = new Counter();
  proxy.observe = counter.observe;
  const provider = sqldNamespaces({ url: sqld.url, adminUrl });
  await provider.create("default");
  const worker = cfg.worker
    ? await serveWorker({
        databaseUrl: proxy.url,
        queueToken: TOKEN,
        vars: { QUEUE_DATABASES: "namespaces", SQLD_ADMIN_URL: adminUrl },
      })
    : undefined;
  const workerd = worker ? descendantsNamed("workerd") : [];
  const admin = worker ? createClient({ url: worker.url, token: TOKEN, autoIdempotencyKeys: false }) : undefined;
  const results: CellResult[] = [];
  const latencies = new Map<string, { push: number[]; longPoll: number[] }>();
  const figures: Record<string, number> = {};
  progress(
    `distance: ${cfg.distances.join("/")} ms × ${cfg.shards.join("/")} shards, backlog ${cfg.backlog} over ${cfg.groups} groups; workerd pids ${workerd.join(",") || "-"}`,
  );

  /** Drains one cell's queue (already seeded), measuring around the drain alone. */
  const measure = async (cell: Cell, namespaces: string[], queues: ConsumerQueue[]): Promise<CellResult> => {
    const rows0 = await rowsOf(adminUrl, namespaces);
    const req0 = counter.sum(counter.requests, namespaces);
    const claims0 = counter.sum(counter.claims, namespaces);
    const calls0 = counter.sum(counter.claimStatements, namespaces);
    const th0 = threadCpuMs(workerd);
    const cpu0 = { sqld: cpuMsOf([sqld.process.pid ?? 0]), workerd: cpuMsOf(workerd), node: nodeCpuMs() };
    const maxMs = cell.concurrency < 256 ? cfg.lowDrainMs : cfg.drainMs;
    const run = cell.variant === "before" ? (before as Consume) : consume;
    const d = await drain(run, queues, cell.loops, cell.concurrency, cfg.backlog, maxMs);
    const cpu1 = { sqld: cpuMsOf([sqld.process.pid ?? 0]), workerd: cpuMsOf(workerd), node: nodeCpuMs() };
    const th1 = threadCpuMs(workerd);
    const requests = counter.sum(counter.requests, namespaces) - req0;
    const claims = counter.sum(counter.claims, namespaces) - claims0;
    const calls = counter.sum(counter.claimStatements, namespaces) - calls0;
    const rows1 = await rowsOf(adminUrl, namespaces);
    const n = Math.max(1, d.acked);
    const wallMs = d.secs * 1000;
    const r: CellResult = {
      ...cell,
      msgsPerSec: d.acked / d.secs,
      steadyPerSec: d.steadyPerSec,
      firstMs: d.firstMs,
      stopMs: d.stopMs,
      acked: d.acked,
      secs: d.secs,
      complete: d.acked >= cfg.backlog,
      errors: d.errors,
      requestsPerMsg: requests / n,
      claimBatchesPerMsg: claims / n,
      claimsPerClaimBatch: calls / Math.max(1, claims),
      writtenPerMsg: (rows1.written - rows0.written) / n,
      readPerMsg: (rows1.read - rows0.read) / n,
      cpu: {
        sqld: (cpu1.sqld - cpu0.sqld) / n,
        workerd: (cpu1.workerd - cpu0.workerd) / n,
        node: (cpu1.node - cpu0.node) / n,
      },
      cores: {
        sqld: (cpu1.sqld - cpu0.sqld) / wallMs,
        workerd: (cpu1.workerd - cpu0.workerd) / wallMs,
        workerdThread: busiestThreadMs(th0, th1) / wallMs,
        node: (cpu1.node - cpu0.node) / wallMs,
      },
    };
    if (d.firstError !== undefined) r.firstError = d.firstError;
    results.push(r);
    progress(
      `  ${key(cell)}: ${fmt(r.msgsPerSec)} msgs/s, steady ${fmt(r.steadyPerSec)} (${r.acked} in ${fmt(r.secs, 2)} s, first after ${fmt(r.firstMs)} ms, stopped ${fmt(r.stopMs)} ms after the last${r.errors ? `, ${r.errors} errors: ${r.firstError}` : ""}), ${fmt(r.requestsPerMsg, 3)} req/msg, cores sqld ${fmt(r.cores.sqld, 2)} workerd ${fmt(r.cores.workerd, 2)} node ${fmt(r.cores.node, 2)}`,
    );
    return r;
  };

  let serial = 0;
  const libraryCell = async (cell: Cell) => {
    const base = `l${cell.distance}-s${cell.shards}-c${cell.concurrency}x${cell.loops}-${serial++}`;
    const namespaces = Array.from({ length: cell.shards }, (_, i) => shardDatabaseName(base, i, cell.shards));
    await Promise.all(namespaces.map((ns) => provider.create(ns)));
    await seed(sqld, namespaces, cfg.backlog, cfg.groups);
    const transports = await Promise.all(
      namespaces.map((namespace) =>
        LibsqlTransport.create(proxy.url, {
          namespace,
          ...(batchOf(cell.variant) ? { maxBatchStatements: batchOf(cell.variant) } : {}),
        }),
      ),
    );
    // One database, no sharding, for one shard (the issue's baseline); a ShardedQueue otherwise.
    const queue = cell.shards === 1 ? (transports[0] as LibsqlTransport) : new ShardedQueue(transports);
    try {
      const queues = cell.variant === "perShard" ? transports : [queue];
      await measure(cell, namespaces, queues);
    } finally {
      queue.close();
      await Promise.all(namespaces.map((ns) => provider.drop(ns).catch(() => false)));
    }
  };

  const workerCell = async (cell: Cell) => {
    if (!admin) return;
    const name = `w${cell.distance}-s${cell.shards}-c${cell.concurrency}x${cell.loops}-${serial++}`;
    await admin.createQueue(name, { shards: cell.shards });
    const namespaces = Array.from({ length: cell.shards }, (_, i) => shardDatabaseName(name, i, cell.shards));
    try {
      await seed(sqld, namespaces, cfg.backlog, cfg.groups);
      // One client per loop (as separate consumers would have); the first request warms every shard's writer.
      const clients = Array.from({ length: cell.loops }, () => admin.queue(name));
      await clients[0]?.stats();
      await measure(cell, namespaces, clients);
    } finally {
      await admin.deleteQueue(name, { force: true }).catch(() => false);
    }
  };

  const latencyCell = async (distance: number, shards: number) => {
    if (!admin) return;
    const name = `t${distance}-s${shards}-${serial++}`;
    await admin.createQueue(name, { shards });
    try {
      const q = admin.queue(name);
      await q.stats();
      progress(`  latency d=${distance} shards=${shards}: push, then long poll, ${cfg.latencyMessages} messages each`);
      const push = await pushLatency(q, cfg.latencyMessages, cfg.gapMs);
      const longPoll = await longPollLatency(q, cfg.latencyMessages, cfg.gapMs);
      latencies.set(`d${distance}.s${shards}`, { push, longPoll });
      progress(
        `    push p50 ${fmt(percentile(push, 50), 1)} p99 ${fmt(percentile(push, 99), 1)}; long poll p50 ${fmt(percentile(longPoll, 50), 1)} p99 ${fmt(percentile(longPoll, 99), 1)}`,
      );
    } finally {
      await admin.deleteQueue(name, { force: true }).catch(() => false);
    }
  };

  try {
    for (const distance of cfg.distances) {
      proxy.latencyMs = distance;
      progress(`distance: round trip +${distance} ms`);
      for (const shards of cfg.shards) {
        // consume() as it is, and (with --before) the other checkout's beside it, cell after cell.
        const pair = (c: Omit<Cell, "path" | "distance" | "shards">): Omit<Cell, "path" | "distance" | "shards">[] =>
          before ? [{ ...c, variant: "before" }, c] : [c];
        const lib: Cell[] = [
          ...cfg.low.map((c) => ({ concurrency: c, loops: 1 })),
          ...pair({ concurrency: 256, loops: 1 }),
          ...(shards > 1
            ? [
                ...pair({ concurrency: wide(shards), loops: 1 }),
                { concurrency: 256, loops: shards },
                { concurrency: 256, loops: shards, variant: "perShard" as const },
              ]
            : [
                ...cfg.oneShardLoops.map((loops) => ({ concurrency: 256, loops })),
                { concurrency: MAX_CONCURRENCY, loops: 1 },
                ...BATCHES.map((b) => ({ concurrency: MAX_CONCURRENCY, loops: 1, variant: `batch${b}` as const })),
              ]),
        ].map((c) => ({ path: "library" as const, distance, shards, ...c }));
        for (const cell of lib) await libraryCell(cell);
        if (admin) {
          const wk: Cell[] = [
            ...pair({ concurrency: 256, loops: 1 }),
            ...(shards > 1
              ? [
                  { concurrency: wide(shards), loops: 1 },
                  { concurrency: 256, loops: shards },
                ]
              : cfg.oneShardLoops.slice(-1).map((loops) => ({ concurrency: 256, loops }))),
          ].map((c) => ({ path: "worker" as const, distance, shards, ...c }));
          for (const cell of wk) await workerCell(cell);
          await latencyCell(distance, shards);
        }
      }
    }
  } finally {
    await worker?.stop();
    await proxy.close();
    await sqld.stop();
  }

  // -------------------------------------------------------------------------------------------
  // figures and tables

  for (const r of results) {
    const k = key(r);
    figures[`${k}.msgsPerSec`] = r.msgsPerSec;
    figures[`${k}.steadyPerSec`] = r.steadyPerSec;
    figures[`${k}.firstMs`] = r.firstMs;
    figures[`${k}.stopMs`] = r.stopMs;
    figures[`${k}.acked`] = r.acked;
    figures[`${k}.complete`] = r.complete ? 1 : 0;
    figures[`${k}.errors`] = r.errors;
    figures[`${k}.requestsPerMsg`] = r.requestsPerMsg;
    figures[`${k}.claimBatchesPerMsg`] = r.claimBatchesPerMsg;
    figures[`${k}.claimsPerClaimBatch`] = r.claimsPerClaimBatch;
    figures[`${k}.rowsWrittenPerMsg`] = r.writtenPerMsg;
    figures[`${k}.rowsReadPerMsg`] = r.readPerMsg;
    for (const [c, v] of Object.entries(r.cpu)) figures[`${k}.cpuMsPerMsg.${c}`] = v;
    for (const [c, v] of Object.entries(r.cores)) figures[`${k}.cores.${c}`] = v;
  }
  for (const [k, l] of latencies) {
    figures[`latency.${k}.push.p50`] = percentile(l.push, 50);
    figures[`latency.${k}.push.p99`] = percentile(l.push, 99);
    figures[`latency.${k}.longPoll.p50`] = percentile(l.longPoll, 50);
    figures[`latency.${k}.longPoll.p99`] = percentile(l.longPoll, 99);
  }
  const find = (path: Path, distance: number, shards: number, concurrency: number, loops = 1, variant?: Variant) =>
    results.find(
      (r) =>
        r.path === path &&
        r.distance === distance &&
        r.shards === shards &&
        r.concurrency === concurrency &&
        r.loops === loops &&
        r.variant === variant,
    );
  const rateOf = (r: CellResult | undefined) =>
    r
      ? `${fmt(r.msgsPerSec)}${r.complete ? "" : "*"}${Number.isFinite(r.steadyPerSec) ? ` (${fmt(r.steadyPerSec)})` : ""}`
      : "-";
  const ratio = (a: CellResult | undefined, b: CellResult | undefined) =>
    a && b ? `${fmt(a.msgsPerSec / b.msgsPerSec, 2)}x` : "-";

  // The issue's grid (before and after, when --before ran), more loops and one loop per shard, the Worker.
  const libRows: string[][] = [];
  const liftRows: string[][] = [];
  const wkRows: string[][] = [];
  const was = (r: CellResult | undefined) => (before ? [rateOf(r)] : []);
  for (const d of cfg.distances) {
    for (const s of cfg.shards) {
      const one = find("library", d, 1, 256);
      libRows.push([
        `+${d} ms`,
        String(s),
        ...cfg.low.map((c) => rateOf(find("library", d, s, c))),
        ...was(find("library", d, s, 256, 1, "before")),
        rateOf(find("library", d, s, 256)),
        ...(s > 1 ? was(find("library", d, s, wide(s), 1, "before")) : before ? ["-"] : []),
        s > 1 ? rateOf(find("library", d, s, wide(s))) : "-",
        ratio(find("library", d, s, 256), one),
        s > 1 ? ratio(find("library", d, s, wide(s)), one) : "-",
      ]);
      if (s > 1) {
        liftRows.push([
          `+${d} ms`,
          String(s),
          rateOf(find("library", d, s, 256)),
          rateOf(find("library", d, s, wide(s))),
          rateOf(find("library", d, s, 256, s)),
          rateOf(find("library", d, s, 256, s, "perShard")),
        ]);
      }
      if (admin) {
        const w1 = find("worker", d, 1, 256);
        wkRows.push([
          `+${d} ms`,
          String(s),
          ...was(find("worker", d, s, 256, 1, "before")),
          rateOf(find("worker", d, s, 256)),
          s > 1 ? rateOf(find("worker", d, s, wide(s))) : "-",
          s > 1
            ? rateOf(find("worker", d, s, 256, s))
            : rateOf(find("worker", d, s, 256, Math.max(...cfg.oneShardLoops))),
          ratio(find("worker", d, s, 256), w1),
          s > 1 ? ratio(find("worker", d, s, 256, s), w1) : "-",
        ]);
      }
    }
  }
  const loopsRows = cfg.distances.map((d) => [
    `+${d} ms`,
    rateOf(find("library", d, 1, 256)),
    ...cfg.oneShardLoops.map((l) => rateOf(find("library", d, 1, 256, l))),
    rateOf(find("library", d, 1, MAX_CONCURRENCY)),
    ...BATCHES.map((b) => rateOf(find("library", d, 1, MAX_CONCURRENCY, 1, `batch${b}`))),
  ]);

  const consumers = (r: CellResult) =>
    r.loops > 1
      ? `${r.loops} × consume(${r.concurrency})${r.variant ? `, ${label(r.variant)}` : ""}`
      : `consume(${r.concurrency})${r.variant ? `, ${label(r.variant)}` : ""}`;
  const perMsgRows = results
    .filter((r) => r.concurrency === 256 || r.concurrency === wide(r.shards))
    .map((r) => [
      r.path,
      `+${r.distance} ms`,
      String(r.shards),
      consumers(r),
      fmt(r.msgsPerSec),
      fmt(r.requestsPerMsg, 3),
      fmt(1 / r.claimBatchesPerMsg, 1),
      fmt(r.claimsPerClaimBatch, 2),
      fmt(r.writtenPerMsg, 2),
      fmt(r.readPerMsg, 2),
    ]);
  const cpuRows = results
    .filter((r) => r.concurrency === 256 || r.loops > 1 || r.concurrency === wide(r.shards))
    .map((r) => [
      r.path,
      `+${r.distance} ms`,
      String(r.shards),
      consumers(r),
      fmt(r.msgsPerSec),
      fmt(r.cpu.sqld, 3),
      r.path === "worker" ? fmt(r.cpu.workerd, 3) : "-",
      fmt(r.cpu.node, 3),
      fmt(r.cores.sqld, 2),
      r.path === "worker" ? `${fmt(r.cores.workerd, 2)} (${fmt(r.cores.workerdThread, 2)})` : "-",
      fmt(r.cores.node, 2),
      fmt(r.cores.sqld + r.cores.workerd + r.cores.node, 2),
    ]);
  const latRows = [...latencies].map(([k, l]) => {
    const [d, s] = k.slice(1).split(".s");
    return [
      `+${d} ms`,
      String(s),
      String(l.push.length),
      fmt(percentile(l.push, 50), 1),
      fmt(percentile(l.push, 99), 1),
      String(l.longPoll.length),
      fmt(percentile(l.longPoll, 50), 1),
      fmt(percentile(l.longPoll, 99), 1),
    ];
  });

  // The writer's ceiling: workerd's CPU per message (edge and writer: both run in that process) on one
  // shard with nothing between it and sqld, the busiest case.
  const far = Math.max(...cfg.distances);
  const near = Math.min(...cfg.distances);
  const ceilingCells = results.filter((r) => r.path === "worker" && r.shards === 1 && r.distance === near);
  const busiest = ceilingCells.sort((a, b) => b.msgsPerSec - a.msgsPerSec)[0];
  if (busiest) {
    figures["writer.cpuMsPerMsg"] = busiest.cpu.workerd;
    figures["writer.ceilingMsgsPerSec"] = 1000 / busiest.cpu.workerd;
  }

  // Targets (issue 19), at the farthest distance: each way of consuming 4 shards against one shard's consume(256).
  interface Target {
    name: string;
    /** On the drain's rate (the issue's measure), and on the steady rate. */
    value: number;
    steady: number;
    goal: number;
    ratio: boolean;
  }
  const targets: Target[] = [];
  const against = (path: Path, label: string, r: CellResult | undefined, one: CellResult | undefined, of = "") => {
    if (!r || !one) return;
    targets.push({
      name: `${path} +${far} ms: 4 shards ${label} / 1 shard consume(256)${of}`,
      value: r.msgsPerSec / one.msgsPerSec,
      steady: r.steadyPerSec / one.steadyPerSec,
      goal: 3.5,
      ratio: true,
    });
  };
  const absolute = (path: Path, label: string, r: CellResult | undefined, goal: number) => {
    if (!r) return;
    targets.push({
      name: `${path} +${far} ms: ${label}, msgs/s`,
      value: r.msgsPerSec,
      steady: r.steadyPerSec,
      goal,
      ratio: false,
    });
  };
  const ways = (path: Path): [string, CellResult | undefined][] => [
    ...(before
      ? ([
          ["consume(256), before", find(path, far, 4, 256, 1, "before")],
          [`consume(${wide(4)}), before`, find(path, far, 4, wide(4), 1, "before")],
        ] as [string, CellResult | undefined][])
      : []),
    ["consume(256)", find(path, far, 4, 256)],
    [`consume(${wide(4)})`, find(path, far, 4, wide(4))],
    ["4 × consume(256)", find(path, far, 4, 256, 4)],
    ["4 × consume(256), one per shard", find(path, far, 4, 256, 4, "perShard")],
  ];
  for (const path of ["library", "worker"] as const) {
    const one = find(path, far, 1, 256);
    const oneBefore = find(path, far, 1, 256, 1, "before");
    for (const [label, r] of ways(path)) {
      against(path, label, r, label.endsWith("before") ? oneBefore : one, label.endsWith("before") ? ", before" : "");
    }
    // Against the one-shard figure the issue started from (consume() before).
    against(path, `consume(${wide(4)})`, find(path, far, 4, wide(4)), oneBefore, ", before");
    absolute(path, "1 shard, consume(256), before", oneBefore, 1500);
    absolute(path, "1 shard, consume(256)", one, 1500);
    for (const [label, r] of ways(path)) absolute(path, `4 shards, ${label}`, r, 5000);
  }
  for (const t of targets) {
    figures[`target.${t.name}`] = t.value;
    figures[`target.${t.name}.steady`] = t.steady;
  }

  const secs = (performance.now() - started) / 1000;
  figures.seconds = secs;
  const lowHead = cfg.low.map((c) => `c=${c}`);
  const text = [
    "### Distance and shards: consume() through a latency proxy to sqld namespaces (issue 19)",
    "",
    `One sqld with namespaces (a shard is a namespace) behind a proxy that holds every answer +${cfg.distances.join("/")} ms (the round trip to a primary that far); a backlog of ${fmt(cfg.backlog)} messages over ${fmt(cfg.groups)} groups published straight to sqld, then drained by consume() with a handler that returns at once; each drain bounded by ${fmt(cfg.drainMs / 1000)} s (${fmt(cfg.lowDrainMs / 1000)} s below c=256; a rate marked * did not finish its backlog in that time). Each figure is the drain's rate (messages acked over the drain, as the issue measures), and in brackets the steady rate (from 10% to 90% of the backlog handled: no ramp, no tail). c is consume()'s concurrency: with N shards, c=256 is 256/N per shard; "N × consume(256)" is N loops on the one queue (256 per shard). The whole case took ${fmt(secs)} s.`,
    "",
    `**Library, as the issue measures it**: \`consume()\` on a \`ShardedQueue\` of N \`LibsqlTransport\`s (one shard: one \`LibsqlTransport\`, no sharding), msgs/s${before ? '; "before" is the consume() of the checkout given with --before, on the same queues in the same run' : ""}:`,
    "",
    table(
      [
        "round trip",
        "shards",
        ...lowHead,
        ...(before ? ["c=256 before"] : []),
        "c=256",
        ...(before ? ["c=256×N before"] : []),
        "c=256×N (≤1,000)",
        "c=256 vs 1 shard",
        "c=256×N vs 1 shard c=256",
      ],
      libRows,
    ),
    "",
    "**Library, N shards: one loop or N** (msgs/s): consume(256) and consume(256×N) on the ShardedQueue; N loops of consume(256) on it; N loops, each on one shard's own transport (no ShardedQueue):",
    "",
    table(
      ["round trip", "shards", "consume(256)", "consume(256×N)", "N × consume(256)", "N × consume(256), one per shard"],
      liftRows,
    ),
    "",
    ...(admin
      ? [
          '**Worker** (bundle under Miniflare, direct socket; queues from `PUT /v1/queues/{q}` `{"shards": N}`; consume() over the HTTP client), msgs/s:',
          "",
          table(
            [
              "round trip",
              "shards",
              ...(before ? ["c=256 before"] : []),
              "c=256",
              "c=256×N (≤1,000)",
              `N × consume(256) (1 shard: ${Math.max(...cfg.oneShardLoops)})`,
              "c=256 vs 1 shard",
              "N × consume(256) vs 1 shard c=256",
            ],
            wkRows,
          ),
          "",
        ]
      : []),
    "One database (the library) with more claimed per round trip (a write batch holds at most `maxBatchStatements`, 800 by default), msgs/s:",
    "",
    table(
      [
        "round trip",
        "consume(256)",
        ...cfg.oneShardLoops.map((l) => `${l} × consume(256)`),
        `consume(${MAX_CONCURRENCY})`,
        ...BATCHES.map((b) => `consume(${MAX_CONCURRENCY}), maxBatchStatements ${b}`),
      ],
      loopsRows,
    ),
    "",
    "Per message (consume(256), and N loops on N shards): requests reaching sqld (the proxy's count, the queue's namespaces only), messages and claim statements (claimMany calls) per write batch that carried claims, and rows billed (sqld's admin stats per namespace):",
    "",
    table(
      [
        "path",
        "round trip",
        "shards",
        "consumers",
        "msgs/s",
        "sqld requests / msg",
        "msgs / claim batch",
        "claims / claim batch",
        "rows written / msg",
        "rows read / msg",
      ],
      perMsgRows,
    ),
    "",
    "CPU per message (ms, /proc) and utilisation over the drain (cores busy; workerd's busiest thread in brackets; the machine has 2 cores for all; node is the consumer, the library or HTTP client, and the proxy):",
    "",
    table(
      [
        "path",
        "round trip",
        "shards",
        "consumers",
        "msgs/s",
        "sqld ms",
        "workerd ms",
        "node ms",
        "sqld cores",
        "workerd cores (thread)",
        "node cores",
        "all cores",
      ],
      cpuRows,
    ),
    "",
    ...(busiest
      ? [
          `The writer's ceiling: at +${near} ms on one shard (${busiest.loops > 1 ? `${busiest.loops} × ` : ""}consume(${busiest.concurrency}), ${fmt(busiest.msgsPerSec)} msgs/s), workerd spent ${fmt(busiest.cpu.workerd, 3)} ms of CPU per message (edge and writer together; the Durable Object is single-threaded), so one writer does at most ${fmt(1000 / busiest.cpu.workerd)} msgs/s on a core to itself.`,
          "",
        ]
      : []),
    ...(latRows.length > 0
      ? [
          `Publish→delivery latency through the Worker (ms), one publish every ${cfg.gapMs} ms over 8 groups (a publish waits for its answer): push to one subscription, or 4 consumers long-polling:`,
          "",
          table(
            ["round trip", "shards", "push n", "push p50", "push p99", "long poll n", "long poll p50", "long poll p99"],
            latRows,
          ),
          "",
        ]
      : []),
    `Targets (issue 19), at +${far} ms: met on the drain's rate (the issue's measure), and on the steady rate:`,
    "",
    table(
      ["target", "drain", "steady", "goal", "met", "met (steady)"],
      targets.map((t) => {
        const f = (v: number) => fmt(v, t.ratio ? 2 : 0);
        const met = (v: number) => (v >= t.goal ? "yes" : "NO");
        return [t.name, f(t.value), f(t.steady), `>= ${f(t.goal)}`, met(t.value), met(t.steady)];
      }),
    ),
    "",
  ].join("\n");
  return { text, figures };
}

if (process.argv[1]?.endsWith("distance.ts")) {
  const r = await distanceBench({ quick: process.argv.includes("--quick") });
  process.stdout.write(`${r.text}\n`);
  process.exit(0);
}
