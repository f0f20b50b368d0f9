/**
 * bench/versus.ts, the figures: each round gives every metric once for A and once for B, measured
 * back to back; the table shows the medians, their ratio A/B, and the range of the rounds' own A/B
 * ratios (a pair shares the machine's load of its moment, so their spread is the noise to judge by).
 */
import { fmt, table } from "./lib.js";

export interface Figure {
  case: string;
  metric: string;
  value: number;
  better: "higher" | "lower";
  digits: number;
  /** Rows sqld bills: A must not need more of them. */
  rows?: boolean;
}

interface Series {
  first: Figure;
  A: number[];
  B: number[];
}

export const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length === 0 ? Number.NaN : s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

const geomean = (xs: number[]): number => Math.exp(xs.reduce((t, x) => t + Math.log(x), 0) / xs.length);

export interface Verdict {
  key: string;
  verdict: string;
}

export class Samples {
  readonly #series = new Map<string, Series>();

  /** One round's figures of both trees (kept only in pairs, so that round i of A goes with round i of B). */
  addPair(a: Figure[], b: Figure[]): void {
    for (const [label, figs] of [
      ["A", a],
      ["B", b],
    ] as const) {
      for (const f of figs) {
        const key = `${f.case} | ${f.metric}`;
        const s = this.#series.get(key) ?? { first: f, A: [], B: [] };
        s[label].push(f.value);
        this.#series.set(key, s);
      }
    }
  }

  get rounds(): number {
    return Math.max(0, ...[...this.#series.values()].map((s) => Math.min(s.A.length, s.B.length)));
  }

  /** The markdown table, and the metrics where A does worse beyond the rounds' noise (or bills more rows). */
  render(): { md: string; flagged: Verdict[]; raw: Record<string, { A: number[]; B: number[] }> } {
    const rows: string[][] = [];
    const flagged: Verdict[] = [];
    const raw: Record<string, { A: number[]; B: number[] }> = {};
    let lastCase = "";
    for (const [key, s] of this.#series) {
      const f = s.first;
      raw[key] = { A: s.A, B: s.B };
      const a = median(s.A);
      const b = median(s.B);
      const pairs = s.A.map((x, i) => x / (s.B[i] as number)).filter(Number.isFinite);
      const verdict = f.rows ? rowsVerdict(pairs, a, b) : perfVerdict(pairs, f.better);
      if (verdict.startsWith("A worse") || verdict.startsWith("A more")) flagged.push({ key, verdict });
      rows.push([
        f.case === lastCase ? "" : f.case,
        f.metric,
        fmt(a, f.digits),
        fmt(b, f.digits),
        fmt(a / b, 3),
        pairs.length ? `${fmt(geomean(pairs), 3)} (${fmt(Math.min(...pairs), 2)}–${fmt(Math.max(...pairs), 2)})` : "-",
        verdict,
      ]);
      lastCase = f.case;
    }
    const md = table(
      ["case", "metric", "A median", "B median", "A/B of medians", "A/B by round: geomean (range)", "verdict"],
      rows,
    );
    return { md, flagged, raw };
  }
}

/**
 * Rows are counted, not timed, but where requests share a write batch (publishes 32 in flight) the
 * per-batch reads spread over however many messages a batch gathered: more only if every round says so.
 */
function rowsVerdict(pairs: number[], a: number, b: number): string {
  if (pairs.every((p) => p === 1)) return "same";
  if (pairs.every((p) => p > 1) && a > b * 1.005) return "A more rows";
  if (pairs.every((p) => p < 1) && a < b * 0.995) return "A fewer rows";
  const spread = Math.max(...pairs.map((p) => Math.abs(p - 1)));
  return `≈ same (rounds within ±${fmt(spread * 100, 2)}%)`;
}

/** Two-sided sign test: how likely `k` or fewer of `n` fair coin flips come up one side, either side. */
function signTestP(k: number, n: number): number {
  let c = 1;
  let sum = 0;
  for (let i = 0; i <= k; i++) {
    sum += c;
    c = (c * (n - i)) / (i + 1);
  }
  return Math.min(1, (2 * sum) / 2 ** n);
}

/**
 * Better or worse only when the rounds' pairs lean one way more than chance would (sign test, p <
 * 0.05: 6 of 6 rounds, 10 of 12, 15 of 20) and by at least 3% (geometric mean of the pairs): on a
 * shared two-core machine a single pair swings by 30% either way.
 */
function perfVerdict(pairs: number[], better: "higher" | "lower"): string {
  if (pairs.length === 0) return "-";
  const good = pairs.map((p) => (better === "higher" ? p : 1 / p));
  const worse = good.filter((g) => g < 1).length;
  const ahead = good.filter((g) => g > 1).length;
  const m = geomean(good);
  const p = signTestP(Math.min(worse, ahead), worse + ahead);
  const why = `${Math.max(worse, ahead)}/${pairs.length} rounds, p=${fmt(p, 3)}`;
  if (p < 0.05 && worse > ahead && m < 0.97) return `A worse ${fmt((1 - m) * 100)}% (${why})`;
  if (p < 0.05 && ahead > worse && m > 1.03) return `A better ${fmt((m - 1) * 100)}% (${why})`;
  return `≈ (A worse in ${worse}/${pairs.length})`;
}
