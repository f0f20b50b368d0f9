/** The report: the tables of one run, its targets, and the machine it ran on. */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { cpus } from "node:os";
import { SQLD_BIN } from "../support/sqld.js";
import { BATCH_N, CFG, CONCURRENCY, DEPTH_GROUPS, NO_DEPTH, NO_FILE, QUICK } from "./config.js";
import { frames } from "./file.js";
import { acc, fmt, percentile, rate, table } from "./lib.js";

// ---------------------------------------------------------------------------------------------
// report

export interface Target {
  name: string;
  value: number;
  goal: string;
  met: boolean;
}

export function machine() {
  let sqldVersion = "?";
  try {
    sqldVersion = execFileSync(SQLD_BIN, ["--version"]).toString().trim();
  } catch {}
  let nproc = String(cpus().length);
  try {
    nproc = execFileSync("nproc").toString().trim();
  } catch {}
  let load = "?";
  try {
    load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  } catch {}
  return { nproc, cpu: cpus()[0]?.model ?? "?", node: process.version, sqld: sqldVersion, loadavg: load };
}

export function report(started: Date, machineAtStart: ReturnType<typeof machine>) {
  const floors = CONCURRENCY.map((c) => rate(`http.floor.c${c}`));
  const bestFloor = Math.max(...floors.filter(Number.isFinite));
  const depthP = (n: number, p: number) =>
    percentile(
      [...(acc.get(`depth.${n}`)?.lat ?? [])].sort((a, b) => a - b),
      p,
    );
  const dMin = CFG.depth[0] as number;
  const dMax = CFG.depth[CFG.depth.length - 1] as number;
  const targets: Target[] = [
    {
      name: "ours c=8 / best floor",
      value: rate("http.ours.c8") / bestFloor,
      goal: ">= 0.45",
      met: rate("http.ours.c8") / bestFloor >= 0.45,
    },
    {
      name: "ours / naive at c=8",
      value: rate("http.ours.c8") / rate("http.naive.c8"),
      goal: ">= 2",
      met: rate("http.ours.c8") / rate("http.naive.c8") >= 2,
    },
    {
      name: "ours c=32 / best floor",
      value: rate("http.ours.c32") / bestFloor,
      goal: ">= 1.0",
      met: rate("http.ours.c32") / bestFloor >= 1,
    },
    {
      name: `depth p50 ${fmt(dMax)} / ${fmt(dMin)}`,
      value: depthP(dMax, 50) / depthP(dMin, 50),
      goal: "<= 1.5",
      met: depthP(dMax, 50) / depthP(dMin, 50) <= 1.5,
    },
    {
      name: "claimMany n=32 / n=1 msgs/s",
      value: rate("http.claimMany.n32") / rate("http.claimMany.n1"),
      goal: ">= 10",
      met: rate("http.claimMany.n32") / rate("http.claimMany.n1") >= 10,
    },
  ];
  if (NO_DEPTH) targets.splice(3, 1);
  if (!NO_FILE) {
    const ratio = rate("file.ours-normal.c1") / rate("file.plainjob.claim_done.c1");
    targets.push({
      name: "local file claim+ack, ours / plainjob (both synchronous=NORMAL)",
      value: ratio,
      goal: ">= 1.0",
      met: ratio >= 1,
    });
  }

  const httpRows = CONCURRENCY.map((c) => {
    const o = acc.get(`http.ours.c${c}`);
    return [
      String(c),
      fmt(rate(`http.floor.c${c}`)),
      fmt(rate(`http.ours.c${c}`)),
      fmt(rate(`http.ours.c${c}`) / bestFloor, 2),
      o?.extra.batches ? fmt((2 * o.units) / o.extra.batches, 1) : "-",
      fmt(rate(`http.naive.c${c}`)),
      fmt(rate(`http.ours.c${c}`) / rate(`http.naive.c${c}`), 2),
      `${o?.extra.busy ?? 0} / ${acc.get(`http.naive.c${c}`)?.extra.busy ?? 0}`,
    ];
  });
  const out: string[] = [];
  out.push(
    `### HTTP (sqld on loopback): claim+ack cycles/s\n\nbest floor = ${fmt(bestFloor)} one-row write batches/s\n`,
    table(
      [
        "concurrency",
        "floor batches/s",
        "ours cycles/s",
        "ours / best floor",
        "ops per batch",
        "naive cycles/s",
        "ours / naive",
        "BUSY ours / naive",
      ],
      httpRows,
    ),
  );
  out.push(
    "\n### HTTP: publish and batch claim (messages/s)\n",
    table(
      ["case", "msgs/s"],
      [
        ["publish, c=1", fmt(rate("http.publish.single.c1"))],
        ["publish, c=32 (group commit)", fmt(rate("http.publish.single.c32"))],
        [`publishMany(${CFG.publishBatch}), c=1`, fmt(rate(`http.publish.many${CFG.publishBatch}.c1`))],
        ...BATCH_N.map((k) => [
          `claimMany n=${k} + acks, 1 worker`,
          `${fmt(rate(`http.claimMany.n${k}`))} (${fmt(rate(`http.claimMany.n${k}`) / rate("http.claimMany.n1"), 1)}x)`,
        ]),
        ...BATCH_N.map((k) => [
          `claimMany n=${k} + acks, maxAttempts=Infinity (3 statements per claim, not 5)`,
          `${fmt(rate(`http.claimMany.noDL.n${k}`))} (${fmt(rate(`http.claimMany.noDL.n${k}`) / rate("http.claimMany.noDL.n1"), 1)}x)`,
        ]),
      ],
    ),
  );
  {
    // Fit "2 requests + k statements" to the n=1 and n=32 cycles (5+2 and 160+64 statements): what
    // one request and one claim/ack statement cost, and so what bounds the claimMany ratio.
    const t1 = 1000 / rate("http.claimMany.n1");
    const t32 = (32 * 1000) / rate("http.claimMany.n32");
    const perStmt = (t32 - t1) / (224 - 7);
    const twoReq = t1 - 7 * perStmt;
    out.push(
      `\nFit of claimMany cycles (n=1: 2 requests + 7 statements, n=32: 2 requests + 224 statements): ${fmt(twoReq, 1)} ms per 2 requests, ${fmt(perStmt, 3)} ms per statement; the n=32/n=1 ratio can reach 10 only if a statement costs <= ${fmt((twoReq * 22) / 2016, 3)} ms.`,
    );
  }
  if (!NO_DEPTH) {
    out.push(
      `\n### Depth: claim latency at concurrency 1 (ms), messages over min(n, ${fmt(DEPTH_GROUPS)}) groups, all never claimed at the start\n`,
      table(
        ["queued messages", "samples", "p50", "p99", "p50 / shallowest"],
        CFG.depth.map((n) => [
          fmt(n),
          String(acc.get(`depth.${n}`)?.lat.length ?? 0),
          fmt(depthP(n, 50), 2),
          fmt(depthP(n, 99), 2),
          fmt(depthP(n, 50) / depthP(dMin, 50), 2),
        ]),
      ),
    );
  }
  if (!NO_FILE) {
    const r = (k: string) => fmt(rate(k));
    out.push(
      "\n### Local file (no network): ours vs plainjob 0.0.14 on better-sqlite3 12.4.1\n",
      table(
        ["case", "ours (synchronous=FULL, default)", "ours (synchronous=NORMAL)", "plainjob (synchronous=NORMAL)"],
        [
          ["one-row write batch (floor), c=1", r("file.floor.c1"), "-", "-"],
          [
            "WAL frames (pages) committed per claim+ack",
            "-",
            frames.ours === undefined ? "-" : fmt(frames.ours, 2),
            frames.plainjob === undefined ? "-" : fmt(frames.plainjob, 2),
          ],
          [
            "claim+ack (claim+done) cycles/s, c=1",
            r("file.ours.c1"),
            r("file.ours-normal.c1"),
            r("file.plainjob.claim_done.c1"),
          ],
          ["claim+ack cycles/s, c=8", r("file.ours.c8"), "-", "-"],
          [
            "publish (add) msgs/s, one at a time",
            r("file.ours.publish.single"),
            r("file.ours-normal.publish.single"),
            r("file.plainjob.add.single"),
          ],
          [
            `publishMany(${CFG.publishBatch}) (addMany) msgs/s`,
            r(`file.ours.publish.many${CFG.publishBatch}`),
            r(`file.ours-normal.publish.many${CFG.publishBatch}`),
            r(`file.plainjob.add.many${CFG.publishBatch}`),
          ],
          ["claimMany n=32 + acks msgs/s", r("file.ours.claimMany.n32"), r("file.ours-normal.claimMany.n32"), "-"],
        ],
      ),
    );
  }
  out.push(
    "\n### Targets (ratios from this run)\n",
    table(
      ["target", "value", "goal", "met"],
      targets.map((t) => [t.name, fmt(t.value, 2), t.goal, t.met ? "yes" : "NO"]),
    ),
  );
  const errs = [...acc.entries()]
    .filter(([, a]) => a.errors > 0)
    .map(([k, a]) => `${k}: ${a.errors} errors (${a.firstError})`);
  if (errs.length) out.push(`\nErrors: ${errs.join("; ")}`);
  const m = machine();
  const header = `Run ${started.toISOString()} (${QUICK ? "--quick" : "full"}, ${CFG.rounds} interleaved rounds, ${CFG.sliceMs} ms slices); ${m.nproc} cores, ${m.cpu}, node ${m.node}, ${m.sqld}; load average at start ${machineAtStart.loadavg}, at end ${m.loadavg}.`;
  return { text: `${header}\n\n${out.join("\n")}\n`, targets, machine: m, bestFloor };
}
