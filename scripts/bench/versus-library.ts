/**
 * bench/versus.ts, the library's cases: one tree's LibsqlTransport over HTTP to a sqld of its own,
 * started fresh for each case (so that a case's rows and backlog are its own, and no schema of the
 * other tree is in the way). Each case gives its rate, the rows sqld bills per message (admin stats)
 * and the CPU per message of this process and sqld (less sensitive than rates to a busy machine).
 */
import { billed, type Sqld, startSqld } from "../support/sqld.js";
import { percentile, runLoops } from "./lib.js";
import { cpuMsOf, nodeCpuMs } from "./procs.js";
import type { Figure } from "./versus-report.js";
import type { Transport, Tree } from "./versus-trees.js";

export interface LibraryConfig {
  /** Messages published by publishMany in batches of 100, 4 batches in flight. */
  publishMany: number;
  /** Single publishes, one at a time. */
  publishOne: number;
  /** Single publishes, 32 in flight (the group commit's case). */
  publish32: number;
  /** The backlog consume() drains, over `groups` groups, at each concurrency. */
  backlog: number;
  groups: number;
  drainConcurrency: number[];
  /** Longest a case may run, ms (a stuck case ends; its rate shows it). */
  maxMs: number;
}

const PAD = "x".repeat(48);
const event = (i: number) => ({ n: i, pad: PAD });

/** Runs `body` on a fresh sqld and a transport of the tree; measures rows and CPU around `body` only. */
async function onFreshSqld(
  name: string,
  tree: Tree,
  prepare: (t: Transport) => Promise<void>,
  body: (t: Transport) => Promise<{ units: number; secs: number; extra?: Figure[] }>,
): Promise<Figure[]> {
  const sqld: Sqld = await startSqld({ admin: true });
  const t = await tree.lib.LibsqlTransport.create(sqld.url);
  try {
    await prepare(t);
    const admin = sqld.adminUrl as string;
    const pid = sqld.process.pid ?? 0;
    const b0 = await billed(admin);
    const node0 = nodeCpuMs();
    const sqld0 = cpuMsOf([pid]);
    const r = await body(t);
    const node = nodeCpuMs() - node0;
    const sqldMs = cpuMsOf([pid]) - sqld0;
    const b1 = await billed(admin);
    return [
      { case: name, metric: "msgs/s", value: r.units / r.secs, better: "higher", digits: 0 },
      ...(r.extra ?? []),
      {
        case: name,
        metric: "rows written/msg",
        value: (b1.written - b0.written) / r.units,
        better: "lower",
        digits: 2,
        rows: true,
      },
      {
        case: name,
        metric: "rows read/msg",
        value: (b1.read - b0.read) / r.units,
        better: "lower",
        digits: 2,
        rows: true,
      },
      // Apart: this process (the library under test, and the bench) and sqld (what the SQL costs).
      { case: name, metric: "CPU ms/msg, node", value: node / r.units, better: "lower", digits: 3 },
      { case: name, metric: "CPU ms/msg, sqld", value: sqldMs / r.units, better: "lower", digits: 3 },
    ];
  } finally {
    t.close();
    await sqld.stop();
  }
}

const none = async () => {};

/** Publishes `n` messages with `op` (`per` messages a call) from `c` loops; throws on any error. */
async function publishLoop(c: number, n: number, per: number, maxMs: number, op: (i: number) => Promise<unknown>) {
  let next = 0;
  const r = await runLoops({
    concurrency: c,
    ms: maxMs,
    maxOps: Math.ceil(n / per),
    maxErrors: 1,
    latencies: true,
    op: async () => {
      const i = next;
      next += per;
      await op(i);
      return per;
    },
  });
  if (r.errors) throw new Error(`publish: ${r.firstError}`);
  return r;
}

async function drain(tree: Tree, t: Transport, concurrency: number, backlog: number, maxMs: number) {
  const stop = new AbortController();
  let handled = 0;
  let errors = 0;
  let firstError: unknown;
  const timer = setTimeout(() => stop.abort(), maxMs);
  const t0 = performance.now();
  // The handler acks at once (returns): what is measured is the loop and the queue, not the work.
  const summary = await tree.lib.consume(
    t,
    () => {
      if (++handled >= backlog) stop.abort();
    },
    {
      workerId: "versus",
      concurrency,
      visibility: 60,
      signal: stop.signal,
      onError: (e) => {
        firstError ??= e;
        if (++errors >= 50) stop.abort();
      },
    },
  );
  clearTimeout(timer);
  // Over the whole call: from the first claim to the last ack committed (consume() waits for it).
  const secs = (performance.now() - t0) / 1000;
  if (errors) throw new Error(`consume(): ${errors} errors, first: ${String(firstError)}`);
  if (summary.acked < backlog) throw new Error(`consume(): ${summary.acked} of ${backlog} acked in ${maxMs} ms`);
  return { units: summary.acked, secs };
}

/** A case: run on one tree, it gives that tree's figures (versus.ts runs A's and B's back to back). */
export interface Case {
  name: string;
  run: (tree: Tree) => Promise<Figure[]>;
}

/** The library's cases, in the order a round runs them. */
export function libraryCases(cfg: LibraryConfig): Case[] {
  const groups = (i: number) => `g${i % cfg.groups}`;
  const cases: Case[] = [
    {
      name: "publishMany ×100, 4 in flight",
      run: (tree) =>
        onFreshSqld("publishMany ×100, 4 in flight", tree, none, async (t) =>
          publishLoop(4, cfg.publishMany, 100, cfg.maxMs, (i) =>
            t.publishMany(Array.from({ length: 100 }, (_, k) => ({ groupId: groups(i + k), event: event(i + k) }))),
          ),
        ),
    },
  ];
  for (const [c, n] of [
    [1, cfg.publishOne],
    [32, cfg.publish32],
  ] as const) {
    const name = `publish, ${c} in flight`;
    cases.push({
      name,
      run: (tree) =>
        onFreshSqld(name, tree, none, async (t) => {
          const r = await publishLoop(c, n, 1, cfg.maxMs, (i) => t.publish(groups(i), event(i)));
          const lat = r.lat.sort((a, b) => a - b);
          const p = (q: number): Figure => ({
            case: name,
            metric: `p${q} ms`,
            value: percentile(lat, q),
            better: "lower",
            digits: 2,
          });
          return { ...r, extra: [p(50), p(99)] };
        }),
    });
  }
  for (const c of cfg.drainConcurrency) {
    const name = `consume() drain ${cfg.backlog} msgs / ${cfg.groups} groups, concurrency ${c}`;
    cases.push({
      name,
      run: (tree) =>
        onFreshSqld(
          name,
          tree,
          async (t) => {
            for (let i = 0; i < cfg.backlog; i += 1000) {
              const n = Math.min(1000, cfg.backlog - i);
              await t.publishMany(
                Array.from({ length: n }, (_, k) => ({ groupId: groups(i + k), event: event(i + k) })),
              );
            }
          },
          (t) => drain(tree, t, c, cfg.backlog, cfg.maxMs),
        ),
    });
  }
  return cases;
}
