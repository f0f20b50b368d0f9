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
import { createClient } from "../../src/client/index.js";
import type { ConsumerQueue } from "../../src/consume/consume.js";
import { sqldNamespaces } from "../../src/core/databases.js";
import { consume, LibsqlTransport, ShardedQueue } from "../../src/index.js";
import { shardDatabaseName } from "../../src/rules.js";
import { serveWorker } from "../support/miniflare.js";
import { startProxy } from "../support/proxy.js";
import { startSqld } from "../support/sqld.js";
import { TOKEN } from "./config.js";
import {
  BATCHES,
  batchOf,
  beforeConsume,
  type Cell,
  type CellResult,
  type Consume,
  Counter,
  DISTANCE_FULL,
  DISTANCE_QUICK,
  type DistanceConfig,
  drain,
  key,
  MAX_CONCURRENCY,
  rowsOf,
  seed,
  wide,
} from "./distance-cells.js";
import { longPollLatency, pushLatency } from "./distance-delivery.js";
import { distanceReport, type Latencies } from "./distance-report.js";
import { fmt, percentile, progress } from "./lib.js";
import { busiestThreadMs, cpuMsOf, descendantsNamed, nodeCpuMs, threadCpuMs } from "./procs.js";

export { DISTANCE_FULL, DISTANCE_QUICK, type DistanceConfig } from "./distance-cells.js";

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
  const latencies = new Map<string, Latencies>();
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
      const far = distance === Math.max(...cfg.distances);
      for (const gapMs of far ? [cfg.gapMs, cfg.spacedGapMs] : [cfg.gapMs]) {
        progress(
          `  latency d=${distance} shards=${shards} gap=${gapMs} ms: push, then long poll, ${cfg.latencyMessages} messages each`,
        );
        const push = await pushLatency(q, cfg.latencyMessages, gapMs);
        const longPoll = await longPollLatency(q, cfg.latencyMessages, gapMs);
        latencies.set(`d${distance}.s${shards}.g${gapMs}`, { distance, shards, gapMs, push, longPoll });
        progress(
          `    push p50 ${fmt(percentile(push, 50), 1)} p99 ${fmt(percentile(push, 99), 1)}; long poll p50 ${fmt(percentile(longPoll, 50), 1)} p99 ${fmt(percentile(longPoll, 99), 1)}`,
        );
      }
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

  return distanceReport(cfg, results, latencies, {
    before: before !== undefined,
    worker: admin !== undefined,
    secs: (performance.now() - started) / 1000,
  });
}

if (process.argv[1]?.endsWith("distance.ts")) {
  const r = await distanceBench({ quick: process.argv.includes("--quick") });
  process.stdout.write(`${r.text}\n`);
  process.exit(0);
}
