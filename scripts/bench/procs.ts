/**
 * CPU time of the processes a bench started, from Linux's /proc (0 where unreadable: not Linux, or
 * gone). Processes are found as descendants of this one, by name, so that another workerd or sqld
 * on a shared machine is never counted.
 */
import { readdirSync, readFileSync } from "node:fs";

/** The fields after the command name of a /proc stat line (state is [0], utime [11], stime [12]). */
function statFields(path: string): string[] | undefined {
  try {
    const s = readFileSync(path, "utf8");
    return s.slice(s.lastIndexOf(") ") + 2).split(" ");
  } catch {
    return undefined;
  }
}

const ticksMs = (f: string[] | undefined): number => (f ? (Number(f[11]) + Number(f[12])) * 10 : 0); // 10 ms ticks

/** CPU ms used so far by these processes (all their threads). */
export function cpuMsOf(pids: number[]): number {
  let ms = 0;
  for (const pid of pids) ms += ticksMs(statFields(`/proc/${pid}/stat`));
  return ms;
}

/** CPU ms used so far by each thread of these processes, by `pid/tid`. */
export function threadCpuMs(pids: number[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const pid of pids) {
    let tids: string[] = [];
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) out.set(`${pid}/${tid}`, ticksMs(statFields(`/proc/${pid}/task/${tid}/stat`)));
  }
  return out;
}

/** The largest per-thread increase between two `threadCpuMs` readings: the busiest thread's CPU ms. */
export function busiestThreadMs(before: Map<string, number>, after: Map<string, number>): number {
  let most = 0;
  for (const [k, v] of after) most = Math.max(most, v - (before.get(k) ?? 0));
  return most;
}

/** Descendants of `root` (default: this process) whose command name is `comm` (e.g. "workerd"). */
export function descendantsNamed(comm: string, root = process.pid): number[] {
  const parent = new Map<number, number>();
  const name = new Map<number, string>();
  let entries: string[] = [];
  try {
    entries = readdirSync("/proc").filter((e) => /^\d+$/.test(e));
  } catch {
    return [];
  }
  for (const e of entries) {
    try {
      const s = readFileSync(`/proc/${e}/stat`, "utf8");
      const open = s.indexOf("(");
      const close = s.lastIndexOf(") ");
      name.set(Number(e), s.slice(open + 1, close));
      parent.set(Number(e), Number(s.slice(close + 2).split(" ")[1]));
    } catch {
      // gone meanwhile
    }
  }
  const isUnder = (pid: number): boolean => {
    for (let p = parent.get(pid), hops = 0; p !== undefined && p > 1 && hops < 64; p = parent.get(p), hops++) {
      if (p === root) return true;
    }
    return false;
  };
  return [...name].filter(([pid, n]) => n === comm && isUnder(pid)).map(([pid]) => pid);
}

/** This process's CPU ms so far (user + system, all its threads). */
export function nodeCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}
