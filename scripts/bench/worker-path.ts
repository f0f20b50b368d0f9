/**
 * The Worker path's own cost: claim+ack cycles per second through Worker → QueueWriter → sqld (the
 * production bundle under Miniflare on a socket straight to the Worker) against the library straight to the same
 * sqld, slice by slice in alternating turns, at concurrency 1, 8 and 32. "Worker, ack with claim"
 * sends each ack in the next claim's request (`ack: [...]`): one request per message.
 */
import { execSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { nodeFetch } from "../../src/core/node-fetch.js";
import { LibsqlTransport } from "../../src/index.js";
import { serveWorker } from "../support/miniflare.js";
import { startSqld } from "../support/sqld.js";
import { TOKEN } from "./config.js";
import { fmt, progress, runLoops, table } from "./lib.js";

const GROUPS = 256;

/** CPU ms used so far by the processes named (Linux /proc; 0 where unreadable). */
function cpuMs(pids: number[]): number {
  let ms = 0;
  for (const pid of pids) {
    try {
      const f = (readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1] ?? "").split(" ");
      ms += (Number(f[11]) + Number(f[12])) * 10; // utime + stime, in 10 ms ticks
    } catch {
      // gone, or not Linux
    }
  }
  return ms;
}
const workerdPids = (): number[] => {
  try {
    return execSync("pgrep -f workerd").toString().trim().split("\n").map(Number);
  } catch {
    return [];
  }
};
const nodeCpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

export async function workerPathBench(opts: {
  quick: boolean;
}): Promise<{ text: string; figures: Record<string, number> }> {
  const rounds = opts.quick ? 1 : 3;
  const sliceMs = opts.quick ? 700 : 1500;
  const sqld = await startSqld();
  const worker = await serveWorker({ databaseUrl: sqld.url, queueToken: TOKEN });
  const lib = await LibsqlTransport.create(sqld.url);
  // The same keep-alive fetch the library uses for sqld: both sides pay the same client cost.
  const http = nodeFetch() ?? fetch;
  const workerd = workerdPids();
  const cpu = new Map<string, { workerd: number; sqld: number; node: number; units: number }>();
  const post = async (path: string, body?: unknown) => {
    const res = await http(`${worker.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${path}: ${res.status} ${text.slice(0, 200)}`);
    return text ? (JSON.parse(text) as unknown) : undefined;
  };
  const topUp = async () => {
    const { ready } = await lib.stats();
    for (let have = ready; have < 20_000; have += 1000) {
      await lib.publishMany(Array.from({ length: 1000 }, (_, i) => ({ groupId: `g${(have + i) % GROUPS}`, event: i })));
    }
  };
  type Case = "library" | "worker" | "worker, ack with claim";
  const cases: Case[] = ["library", "worker", "worker, ack with claim"];
  const totals = new Map<string, { units: number; secs: number; errors: number }>();
  try {
    for (let round = 0; round < rounds; round++) {
      for (const c of [1, 8, 32]) {
        for (const name of cases) {
          await topUp();
          progress(`worker path: round ${round + 1}/${rounds}, ${name}, c=${c}`);
          const pending: (string | undefined)[] = Array(c).fill(undefined);
          const op = async (w: number): Promise<number> => {
            if (name === "library") {
              const l = await lib.claim(`lib${w}`, 60);
              if (!l) return 0;
              await lib.ack(l);
              return 1;
            }
            if (name === "worker") {
              const l = (await post("/v1/claims", { worker_id: `w${w}`, visibility: 60 })) as { lease_id: string };
              if (!l) return 0;
              await post(`/v1/leases/${l.lease_id}/ack`);
              return 1;
            }
            const prev = pending[w];
            const got = (await post("/v1/claims", {
              worker_id: `r${w}`,
              visibility: 60,
              max: 1,
              ...(prev ? { ack: [prev] } : {}),
            })) as { leases: { lease_id: string }[] };
            pending[w] = got.leases[0]?.lease_id;
            return got.leases.length;
          };
          const before = { workerd: cpuMs(workerd), sqld: cpuMs([sqld.process.pid ?? 0]), node: nodeCpuMs() };
          const r = await runLoops({ concurrency: c, ms: sliceMs, maxOps: 100_000, op, maxErrors: 20 });
          const used = cpu.get(`${name}|${c}`) ?? { workerd: 0, sqld: 0, node: 0, units: 0 };
          used.workerd += cpuMs(workerd) - before.workerd;
          used.sqld += cpuMs([sqld.process.pid ?? 0]) - before.sqld;
          used.node += nodeCpuMs() - before.node;
          used.units += r.units;
          cpu.set(`${name}|${c}`, used);
          // Acks still riding: send them, so the next slice starts with nothing in flight.
          await Promise.all(pending.filter(Boolean).map((id) => post(`/v1/leases/${id}/ack`)));
          const key = `${name}|${c}`;
          const t = totals.get(key) ?? { units: 0, secs: 0, errors: 0 };
          t.units += r.units;
          t.secs += r.secs;
          t.errors += r.errors;
          totals.set(key, t);
          if (r.firstError) progress(`  error: ${r.firstError}`);
        }
      }
    }
    const rate = (name: Case, c: number) => {
      const t = totals.get(`${name}|${c}`);
      return t && t.secs > 0 ? t.units / t.secs : Number.NaN;
    };
    const figures: Record<string, number> = {};
    const rows = [1, 8, 32].map((c) => {
      const l = rate("library", c);
      const w = rate("worker", c);
      const r = rate("worker, ack with claim", c);
      figures[`c${c}.library`] = l;
      figures[`c${c}.worker`] = w;
      figures[`c${c}.workerAckWithClaim`] = r;
      figures[`c${c}.ratio`] = w / l;
      figures[`c${c}.ratioAckWithClaim`] = r / l;
      return [String(c), fmt(l), fmt(w), fmt(w / l, 2), fmt(r), fmt(r / l, 2)];
    });
    const cpuRows = cases.map((name) => {
      const u = cpu.get(`${name}|8`);
      const per = (k: "workerd" | "sqld" | "node") => (u && u.units > 0 ? u[k] / u.units : Number.NaN);
      figures[`c8.cpuPerCycle.${name}`] = per("workerd") + per("sqld") + per("node");
      return [name, fmt(per("workerd"), 2), fmt(per("sqld"), 2), fmt(per("node"), 2)];
    });
    const text = [
      "### The Worker path: claim+ack cycles/s, Worker → QueueWriter → sqld against the library → sqld",
      "",
      `Bundle under Miniflare on a socket straight to the Worker, the same sqld, ${rounds} alternating round(s) of ${sliceMs} ms slices.`,
      "",
      table(
        ["concurrency", "library", "worker (claim, ack)", "worker / library", "worker, ack with claim", "ratio"],
        rows,
      ),
      "",
      "CPU per claim+ack cycle at concurrency 8 (ms, from /proc; the machine has 2 cores for all three):",
      "",
      table(["case", "workerd (edge + writer)", "sqld", "node (client, library)"], cpuRows),
      "",
    ].join("\n");
    return { text, figures };
  } finally {
    lib.close();
    await worker.stop();
    await sqld.stop();
  }
}

if (process.argv[1]?.endsWith("worker-path.ts")) {
  const r = await workerPathBench({ quick: process.argv.includes("--quick") });
  process.stdout.write(`${r.text}\n`);
  process.exit(0);
}
