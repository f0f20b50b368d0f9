/**
 * The distance bench's figures and tables (scripts/bench/distance.ts): the issue's grid, one loop or N,
 * the Worker, rows and requests per message, CPU, delivery latency, and the targets.
 */
import {
  BATCHES,
  type CellResult,
  type DistanceConfig,
  key,
  label,
  MAX_CONCURRENCY,
  type Path,
  type Variant,
  wide,
} from "./distance-cells.js";
import { fmt, percentile, table } from "./lib.js";

export interface Latencies {
  distance: number;
  shards: number;
  /** One publish every `gapMs`, each waiting for its answer. */
  gapMs: number;
  push: number[];
  longPoll: number[];
}

/**
 * `before`: cells of another checkout's consume() ran beside these; `worker`: the Worker's cells ran;
 * `secs`: how long the whole case took.
 */
export function distanceReport(
  cfg: DistanceConfig,
  results: CellResult[],
  latencies: Map<string, Latencies>,
  { before, worker: admin, secs }: { before: boolean; worker: boolean; secs: number },
): { text: string; figures: Record<string, number> } {
  const figures: Record<string, number> = {};
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
  const latRows = [...latencies.values()].map((l) => {
    return [
      `+${l.distance} ms`,
      String(l.shards),
      `${l.gapMs} ms`,
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

  // Targets of issues 28 (the Worker beside the library, delivery in one round trip) and 24 (the
  // edge's CPU on 4 shards against 1), at the farthest distance.
  const bounds: { name: string; value: number; goal: number; atMost: boolean }[] = [];
  const bound = (name: string, a: number | undefined, b: number | undefined, goal: number, atMost = false) => {
    if (a !== undefined && b !== undefined && b > 0) bounds.push({ name, value: a / b, goal, atMost });
  };
  const rate = (path: Path, shards: number, c: number) => find(path, far, shards, c)?.msgsPerSec;
  const edgeCpu = (shards: number, c: number) => find("worker", far, shards, c)?.cpu.workerd;
  bound(`+${far} ms, 1 shard, consume(256): Worker / library`, rate("worker", 1, 256), rate("library", 1, 256), 0.9);
  bound(
    `+${far} ms, 4 shards, consume(${wide(4)}): Worker / library`,
    rate("worker", 4, wide(4)),
    rate("library", 4, wide(4)),
    0.7,
  );
  for (const c of [256, wide(4)]) {
    bound(
      `+${far} ms, workerd CPU per message, consume(${c}) on 4 shards / consume(256) on 1`,
      edgeCpu(4, c),
      edgeCpu(1, 256),
      1.5,
      true,
    );
  }
  for (const l of latencies.values()) {
    if (l.distance !== far) continue;
    for (const [how, xs] of [
      ["push", l.push],
      ["long poll", l.longPoll],
    ] as const) {
      const p50 = percentile(xs, 50);
      bounds.push({
        name: `+${far} ms, ${l.shards} shard(s), publish every ${l.gapMs} ms: ${how} p50, ms`,
        value: p50,
        goal: 1.5 * far,
        atMost: true,
      });
    }
  }
  for (const b of bounds) figures[`bound.${b.name}`] = b.value;

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
          `Publish→delivery latency through the Worker (ms), one publish every ${cfg.gapMs} ms over 8 groups (a publish waits for its answer; at +${far} ms also every ${cfg.spacedGapMs} ms, more than a round trip apart): push to one subscription, or 4 consumers long-polling:`,
          "",
          table(
            [
              "round trip",
              "shards",
              "publish every",
              "push n",
              "push p50",
              "push p99",
              "long poll n",
              "long poll p50",
              "long poll p99",
            ],
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
    ...(bounds.length > 0
      ? [
          `Targets (issues 28 and 24), at +${far} ms:`,
          "",
          table(
            ["target", "value", "goal", "met"],
            bounds.map((b) => [
              b.name,
              fmt(b.value, b.value < 10 ? 2 : 1),
              `${b.atMost ? "<=" : ">="} ${fmt(b.goal, b.goal < 10 ? 2 : 0)}`,
              (b.atMost ? b.value <= b.goal : b.value >= b.goal) ? "yes" : "NO",
            ]),
          ),
          "",
        ]
      : []),
  ].join("\n");
  return { text, figures };
}
