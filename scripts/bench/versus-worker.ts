/**
 * bench/versus.ts, the Worker's cases: one tree's production bundle under Miniflare on its direct
 * socket (scripts/support/miniflare.ts), QueueWriter bound, against a fresh sqld of its own. Publishes
 * (one message a request to /v1/messages), then claim+ack cycles (/v1/claims, /v1/leases/{id}/ack)
 * until those messages are gone, both at a fixed concurrency: requests/s, latency, rows per message
 * and CPU per message of workerd, sqld and this process. A's and B's routes and bindings are the same.
 */
import { nodeFetch } from "../../src/core/node-fetch.js";
import { serveWorker } from "../support/miniflare.js";
import { billed, startSqld } from "../support/sqld.js";
import { TOKEN } from "./config.js";
import { percentile, runLoops } from "./lib.js";
import { cpuMsOf, descendantsNamed, nodeCpuMs } from "./procs.js";
import type { Figure } from "./versus-report.js";
import type { Tree } from "./versus-trees.js";

export interface WorkerConfig {
  /** Messages published (and then claimed and acked), over `groups` groups. */
  messages: number;
  groups: number;
  concurrency: number;
  maxMs: number;
}

// The same keep-alive client for both trees: it is the bench's side, not what is measured.
const http = nodeFetch() ?? fetch;

async function post(url: string, path: string, body: unknown, want: number[]): Promise<unknown> {
  const res = await http(`${url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  if (!want.includes(res.status)) throw new Error(`${path}: HTTP ${res.status} ${text.slice(0, 200)}`);
  return text ? JSON.parse(text) : undefined;
}

/** A tree's Worker, up for one round: its cases run one at a time, interleaved with the other tree's. */
export interface WorkerRig {
  /** Publishes `messages`, one a request. */
  publish(): Promise<Figure[]>;
  /** Claims and acks until what was published is gone. */
  claimAck(): Promise<Figure[]>;
  stop(): Promise<void>;
}

export const workerCaseNames = (cfg: WorkerConfig) => ({
  publish: `Worker publish (1 msg a request), ${cfg.concurrency} in flight`,
  claimAck: `Worker claim+ack, ${cfg.concurrency} in flight`,
});

type Ran = Awaited<ReturnType<typeof runLoops>>;

/** Starts a fresh sqld and the tree's bundle on it, and warms it up (not measured). */
export async function startWorkerRig(tree: Tree, cfg: WorkerConfig): Promise<WorkerRig> {
  const sqld = await startSqld({ admin: true });
  const before = new Set(descendantsNamed("workerd"));
  let worker: Awaited<ReturnType<typeof serveWorker>>;
  try {
    // The tree's own library makes the schema the bundle expects (the two trees' schemas differ).
    (await tree.lib.LibsqlTransport.create(sqld.url)).close();
    worker = await serveWorker({ databaseUrl: sqld.url, queueToken: TOKEN, root: tree.root, outdir: tree.outdir });
  } catch (e) {
    await sqld.stop();
    throw e;
  }
  const url = worker.url;
  const names = workerCaseNames(cfg);
  // Apart: workerd (the edge and the QueueWriter: the code under test), sqld, and this process (the
  // client). Only this rig's workerd: the other tree's is up too.
  const workerd = descendantsNamed("workerd").filter((pid) => !before.has(pid));
  const cpuNow = () => ({ workerd: cpuMsOf(workerd), sqld: cpuMsOf([sqld.process.pid ?? 0]), node: nodeCpuMs() });
  const admin = sqld.adminUrl as string;
  const c = cfg.concurrency;
  let n = 0;
  const publish = async () => {
    const i = n++;
    await post(url, "/v1/messages", { messages: [{ group_id: `g${i % cfg.groups}`, event: { n: i } }] }, [201]);
    return 1;
  };
  const claimLat: number[] = [];
  const ackLat: number[] = [];
  const cycle = async (w: number) => {
    const t0 = performance.now();
    const lease = (await post(url, "/v1/claims", { worker_id: `w${w}`, visibility: 60 }, [200, 204])) as
      | { lease_id: string }
      | undefined;
    const t1 = performance.now();
    if (!lease) return 0; // nothing left: this loop is done
    await post(url, `/v1/leases/${encodeURIComponent(lease.lease_id)}/ack`, undefined, [204]);
    claimLat.push(t1 - t0);
    ackLat.push(performance.now() - t1);
    return 1;
  };
  const stop = async () => {
    await worker.stop();
    await sqld.stop();
  };

  const measure = async (
    name: string,
    run: () => Promise<Ran>,
    requestsPerUnit: number,
    lat: (r: Ran, f: (metric: string, l: number[]) => Figure[]) => Figure[],
  ): Promise<{ r: Ran; figures: Figure[] }> => {
    const b0 = await billed(admin);
    const cpu0 = cpuNow();
    const r = await run();
    const cpu1 = cpuNow();
    const b1 = await billed(admin);
    if (r.errors) throw new Error(`${name}: ${r.errors} errors, first: ${r.firstError}`);
    const latFigs = (metric: string, l: number[]): Figure[] => {
      const s = l.sort((a, b) => a - b);
      return [50, 99].map((q) => ({
        case: name,
        metric: `${metric} p${q} ms`,
        value: percentile(s, q),
        better: "lower",
        digits: 2,
      }));
    };
    const perMsg = (metric: string, v: number, digits: number, rows?: boolean): Figure => ({
      case: name,
      metric,
      value: v / r.units,
      better: "lower",
      digits,
      ...(rows ? { rows } : {}),
    });
    const figures: Figure[] = [
      { case: name, metric: "requests/s", value: (r.units * requestsPerUnit) / r.secs, better: "higher", digits: 0 },
      ...lat(r, latFigs),
      perMsg("rows written/msg", b1.written - b0.written, 2, true),
      perMsg("rows read/msg", b1.read - b0.read, 2, true),
      ...(["workerd", "sqld", "node"] as const).map((k) => perMsg(`CPU ms/msg, ${k}`, cpu1[k] - cpu0[k], 3)),
    ];
    return { r, figures };
  };

  try {
    // Warm-up, not measured: the writer's first requests (its schema check, workerd's JIT).
    await runLoops({ concurrency: c, ms: cfg.maxMs, maxOps: 2 * c, op: publish, maxErrors: 1 });
    await runLoops({ concurrency: c, ms: cfg.maxMs, maxOps: 10 * c, op: cycle, maxErrors: 1 });
  } catch (e) {
    await stop();
    throw e;
  }
  claimLat.length = 0;
  ackLat.length = 0;
  n = 0;

  return {
    stop,
    publish: async () =>
      (
        await measure(
          names.publish,
          () =>
            runLoops({
              concurrency: c,
              ms: cfg.maxMs,
              maxOps: cfg.messages,
              op: publish,
              latencies: true,
              maxErrors: 5,
            }),
          1,
          (r, f) => f("request", r.lat),
        )
      ).figures,
    claimAck: async () => {
      const { r, figures } = await measure(
        names.claimAck,
        () => runLoops({ concurrency: c, ms: cfg.maxMs, maxOps: cfg.messages + 10 * c, op: cycle, maxErrors: 5 }),
        2,
        (_, f) => [...f("claim", claimLat), ...f("ack", ackLat)],
      );
      if (r.units < cfg.messages)
        throw new Error(`claim+ack: ${r.units} of ${cfg.messages} messages in ${cfg.maxMs} ms`);
      return figures;
    },
  };
}
