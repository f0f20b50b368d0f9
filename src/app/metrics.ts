/**
 * `/metrics` in the Prometheus text format (0.0.4): each queue's counts (gauges, read from its
 * databases at the scrape) and its writers' counters and claim-to-ack histogram (kept by each
 * writer, src/app/writer/meter.ts; added up over a sharded queue's shards). Pure: the route gathers,
 * this writes.
 */
import type { QueueStats } from "../core/types.js";
import { addReadings, type Counters, HELD_BUCKETS, type MeterReading } from "./writer/meter.js";

export interface QueueMetrics {
  name: string;
  /** Null when its databases could not be read. */
  stats: QueueStats | null;
  /** One per database that has a writer; empty where none keeps counters (the Worker without its QueueWriter). */
  readings: MeterReading[];
}

export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

const STATES = {
  ready: "ready",
  waiting: "waiting",
  in_flight: "inFlight",
  parked: "parked",
  delayed: "delayed",
  dead: "deadLetters",
} as const satisfies Record<string, keyof QueueStats>;

const COUNTERS: Array<[name: string, key: keyof Counters, help: string]> = [
  ["turso_queue_published_total", "published", "Messages published."],
  ["turso_queue_acked_total", "acked", "Messages acked (done and deleted)."],
  ["turso_queue_nacked_total", "nacked", "Nacks: a message given back for a retry, or dead-lettered."],
  ["turso_queue_dead_lettered_total", "deadLettered", "Messages moved to the dead letters (out of attempts)."],
  ["turso_queue_released_total", "released", "Leases given back without an attempt counted."],
  ["turso_queue_pushed_total", "pushed", "Push deliveries made (each POST to a subscription)."],
  ["turso_queue_push_failures_total", "pushFailures", "Push deliveries not answered 2xx (retried later)."],
];

export function prometheusText(queues: QueueMetrics[]): string {
  const out: string[] = [];
  const family = (name: string, type: "gauge" | "counter" | "histogram", help: string) =>
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
  const line = (name: string, labels: Record<string, string>, value: number) =>
    out.push(`${name}{${labelText(labels)}} ${numberText(value)}`);

  family("turso_queue_up", "gauge", "1 when the queue's databases answered this scrape, 0 when they did not.");
  for (const q of queues) line("turso_queue_up", { queue: q.name }, q.stats === null ? 0 : 1);
  const read = queues.flatMap((q) => (q.stats === null ? [] : [{ name: q.name, stats: q.stats }]));
  family("turso_queue_messages", "gauge", "Messages in the queue by state; dead: its dead letters.");
  for (const q of read) {
    for (const [state, key] of Object.entries(STATES))
      line("turso_queue_messages", { queue: q.name, state }, q.stats[key] as number);
  }
  family("turso_queue_groups", "gauge", "Groups with messages.");
  for (const q of read) line("turso_queue_groups", { queue: q.name }, q.stats.groups);
  family(
    "turso_queue_oldest_age_seconds",
    "gauge",
    "Seconds the oldest message has waited, since its publish or since it came due (0 when none).",
  );
  for (const q of read) line("turso_queue_oldest_age_seconds", { queue: q.name }, q.stats.oldestAge ?? 0);

  const kept = queues.filter((q) => q.readings.length > 0).map((q) => ({ name: q.name, r: addReadings(q.readings) }));
  for (const [name, key, help] of COUNTERS) {
    family(name, "counter", help);
    for (const q of kept) line(name, { queue: q.name }, q.r.counters[key]);
  }
  const h = "turso_queue_claim_to_ack_seconds";
  family(h, "histogram", "Seconds from a message's claim to its ack, on the database's clock.");
  for (const q of kept) {
    let below = 0;
    HELD_BUCKETS.forEach((le, i) => {
      below += q.r.held.counts[i] ?? 0;
      line(`${h}_bucket`, { queue: q.name, le: String(le) }, below);
    });
    line(`${h}_bucket`, { queue: q.name, le: "+Inf" }, q.r.held.count);
    line(`${h}_sum`, { queue: q.name }, q.r.held.sum);
    line(`${h}_count`, { queue: q.name }, q.r.held.count);
  }
  return `${out.join("\n")}\n`;
}

const labelText = (labels: Record<string, string>) =>
  Object.entries(labels)
    .map(([k, v]) => `${k}="${v.replaceAll("\\", "\\\\").replaceAll("\n", "\\n").replaceAll('"', '\\"')}"`)
    .join(",");

const numberText = (n: number) => (Number.isFinite(n) ? String(n) : n > 0 ? "+Inf" : n < 0 ? "-Inf" : "NaN");
