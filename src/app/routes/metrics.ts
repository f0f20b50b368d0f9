/** `/metrics`: every queue's counts and counters, for Prometheus (src/app/metrics.ts writes them). */
import { Hono } from "hono";
import type { AppEnv } from "../context.js";
import { PROMETHEUS_CONTENT_TYPE, prometheusText } from "../metrics.js";
import { defineRoute, handle } from "../route.js";

export const metrics = defineRoute({
  method: "get",
  path: "/metrics",
  operationId: "metrics",
  tag: "Service",
  summary: "Metrics for Prometheus",
  description:
    "Every queue's messages by state, groups and oldest-message age (read at the scrape: one read per database; `turso_queue_up` is 0 for a queue whose databases did not answer, and its other gauges are left out), and its writers' counters (published, acked, nacked, dead-lettered, released, pushed, push failures) and claim-to-ack histogram, added up over a sharded queue's shards. The counters are kept by the QueueWriters, in their Durable Objects' storage: they survive an eviction, and a Worker without the QueueWriter reports the gauges only. Labelled `queue`.",
  auth: true,
  responses: {
    200: {
      description: "The Prometheus text format, version 0.0.4.",
      content: "text/plain",
      example:
        '# TYPE turso_queue_messages gauge\nturso_queue_messages{queue="default",state="ready"} 3\n# TYPE turso_queue_acked_total counter\nturso_queue_acked_total{queue="default"} 1200\n',
    },
  },
});

export const service = new Hono<AppEnv>();

handle(service, metrics, async (c) => {
  const queues = await c.var.catalog.listWithCounts();
  const gathered = await Promise.all(
    queues.map(async (q) => ({
      name: q.name,
      stats: q.stats,
      // Counters are the writers': an unreachable database's writer may still answer them.
      readings: await c.var.meters(q).catch(() => []),
    })),
  );
  return c.body(prometheusText(gathered), 200, { "content-type": PROMETHEUS_CONTENT_TYPE });
});
