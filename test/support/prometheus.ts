/** A `/metrics` answer read with a real Prometheus text parser (parse-prometheus-text-format). */
import parsePrometheusTextFormat from "parse-prometheus-text-format";

export interface Scrape {
  /** Each family's type, by name. */
  types: Record<string, string>;
  /** The value of the sample of `name` whose labels include `labels` (undefined when none). */
  value(name: string, labels: Record<string, string>): number | undefined;
  /** A histogram's sample: cumulative counts by upper bound, its count and sum. */
  histogram(
    name: string,
    labels: Record<string, string>,
  ): { buckets: Record<string, number>; count: number; sum: number } | undefined;
}

export function scrape(text: string): Scrape {
  const families = parsePrometheusTextFormat(text);
  // The parser merges a histogram's labelled series into one (it keeps labels only for unlabelled
  // histograms): its `_bucket`, `_sum` and `_count` series are read again as untyped samples.
  const series = parsePrometheusTextFormat(text.replace(/^# TYPE \S+ histogram$/gm, ""));
  const matching = (labels: Record<string, string>) => (m: { labels?: Record<string, string> }) =>
    Object.entries(labels).every(([k, v]) => m.labels?.[k] === v);
  const find = (name: string, labels: Record<string, string>) =>
    families.find((f) => f.name === name)?.metrics.find(matching(labels));
  const all = (name: string, labels: Record<string, string>) =>
    series.filter((f) => f.name === name).flatMap((f) => f.metrics.filter(matching(labels)));
  return {
    types: Object.fromEntries(families.map((f) => [f.name, f.type])),
    value: (name, labels) => {
      const m = find(name, labels);
      return m?.value === undefined ? undefined : Number(m.value);
    },
    histogram: (name, labels) => {
      if (families.find((f) => f.name === name)?.type !== "HISTOGRAM") return undefined;
      const buckets = all(`${name}_bucket`, labels);
      const [count] = all(`${name}_count`, labels);
      const [sum] = all(`${name}_sum`, labels);
      if (buckets.length === 0 || count === undefined || sum === undefined) return undefined;
      return {
        buckets: Object.fromEntries(buckets.map((b) => [b.labels?.le as string, Number(b.value)])),
        count: Number(count.value),
        sum: Number(sum.value),
      };
    },
  };
}
