/** Small helpers for the benchmark: bounded concurrent loops, percentiles, progress, formatting. */

export interface RunResult {
  /** Units done (cycles, messages). */
  units: number;
  /** Operations that threw (counted, not retried by the runner). */
  errors: number;
  /** Wall seconds the slice took. */
  secs: number;
  /** Per-operation latencies in ms (only when asked for). */
  lat: number[];
  firstError?: string;
}

export interface RunSpec {
  concurrency: number;
  /** Stop starting new operations after this many ms. */
  ms: number;
  /** ...or after this many operations in all, whichever comes first. */
  maxOps: number;
  /** One operation of worker `w`; returns the units it did (0: nothing left, the worker stops). */
  op: (w: number) => Promise<number>;
  latencies?: boolean;
  /** Stop the slice after this many errors. */
  maxErrors?: number;
}

/** Runs `concurrency` loops of `op`, each bounded by time, a shared op budget and an error budget. */
export async function runLoops(s: RunSpec): Promise<RunResult> {
  const started = performance.now();
  const end = started + s.ms;
  const maxErrors = s.maxErrors ?? 1000;
  let ops = 0;
  let units = 0;
  let errors = 0;
  let firstError: string | undefined;
  const lat: number[] = [];
  await Promise.all(
    Array.from({ length: s.concurrency }, async (_, w) => {
      while (performance.now() < end && ops < s.maxOps && errors < maxErrors) {
        ops++;
        const t0 = performance.now();
        try {
          const u = await s.op(w);
          if (s.latencies) lat.push(performance.now() - t0);
          units += u;
          if (u === 0) return;
        } catch (e) {
          errors++;
          firstError ??= e instanceof Error ? `${e.name}: ${e.message}` : String(e);
        }
      }
    }),
  );
  return { units, errors, secs: (performance.now() - started) / 1000, lat, firstError };
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] as number;
}

const t0 = Date.now();
export function progress(msg: string): void {
  const s = ((Date.now() - t0) / 1000).toFixed(0).padStart(4);
  process.stderr.write(`[bench ${s}s] ${msg}\n`);
}

export function fmt(n: number | undefined, digits = 0): string {
  if (n === undefined || !Number.isFinite(n)) return "-";
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] as number)).join(" | ")} |`;
  return [line(head), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...rows.map(line)].join("\n");
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A fetch whose every request is abandoned after `ms` (a stuck request must not stall a slice). */
export function timeoutFetch(ms: number): typeof fetch {
  return (input, init) => fetch(input, { ...init, signal: AbortSignal.timeout(ms) });
}

// ---------------------------------------------------------------------------------------------
// accumulating slices into rates (one accumulator per process: every case records into it)

export interface Acc {
  units: number;
  secs: number;
  errors: number;
  lat: number[];
  slices: number;
  firstError?: string;
  extra: Record<string, number>;
}
export const acc = new Map<string, Acc>();
export function record(key: string, r: RunResult, extra: Record<string, number> = {}): Acc {
  const a = acc.get(key) ?? { units: 0, secs: 0, errors: 0, lat: [], slices: 0, extra: {} };
  a.units += r.units;
  a.secs += r.secs;
  a.errors += r.errors;
  a.slices++;
  for (const l of r.lat) a.lat.push(l);
  a.firstError ??= r.firstError;
  for (const [k, v] of Object.entries(extra)) a.extra[k] = (a.extra[k] ?? 0) + v;
  acc.set(key, a);
  const perSec = r.units / r.secs;
  progress(`  ${key}: ${fmt(perSec)}/s${r.errors ? ` (${r.errors} errors: ${r.firstError})` : ""}`);
  return a;
}
export const rate = (key: string): number => {
  const a = acc.get(key);
  return a && a.secs > 0 ? a.units / a.secs : Number.NaN;
};
