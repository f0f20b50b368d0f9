/**
 * `/metrics` through the Worker and its QueueWriters inside workerd, read with a real Prometheus
 * text parser: the counts by state, the oldest age, the counters and the claim-to-ack histogram move
 * as messages flow, per queue, added up over a sharded queue's shards. (That the counters outlive
 * the writer's eviction: test/app/eviction.test.ts.)
 */
import { beforeEach, expect, inject, it } from "vitest";
import type * as T from "../../src/contract/types.js";
import { type Scrape, scrape } from "../support/prometheus.js";
import { waitFor } from "../support/wait.js";
import { api, post, resetDatabase, withoutQueues } from "./support.js";

const metrics = async (): Promise<Scrape> => {
  const res = await api("/metrics");
  expect(res.status, res.text).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  return scrape(res.text);
};

const COUNTERS = ["published", "acked", "nacked", "dead_lettered", "released", "pushed", "push_failures"] as const;

/** The counters of `queue`, as numbers (0 where the family has no sample for it yet). */
const counters = (s: Scrape, queue: string) =>
  Object.fromEntries(COUNTERS.map((k) => [k, s.value(`turso_queue_${k}_total`, { queue }) ?? 0])) as Record<
    (typeof COUNTERS)[number],
    number
  >;

const claim = (path = "/v1/claims", extra: Record<string, unknown> = {}) =>
  post<T.Lease>(path, { worker_id: "w", visibility: 30, ...extra });

beforeEach(resetDatabase);
withoutQueues("billing");

it("needs the bearer token", async () => {
  const res = await api("/metrics", { token: null });
  expect(res.status).toBe(401);
  expect((await api("/metrics", { token: "not-the-token-at-all" })).status).toBe(401);
});

it("moves as messages flow: counts by state, oldest age, counters, the claim-to-ack histogram", async () => {
  const before = await metrics();
  expect(before.types).toMatchObject({
    turso_queue_messages: "GAUGE",
    turso_queue_groups: "GAUGE",
    turso_queue_oldest_age_seconds: "GAUGE",
    turso_queue_published_total: "COUNTER",
    turso_queue_push_failures_total: "COUNTER",
    turso_queue_claim_to_ack_seconds: "HISTOGRAM",
  });
  const was = counters(before, "default");
  const heldBefore = before.histogram("turso_queue_claim_to_ack_seconds", { queue: "default" });

  await post("/v1/messages", {
    messages: [
      { group_id: "a", event: 1 },
      { group_id: "a", event: 2 },
      { group_id: "b", event: 3 },
      { group_id: "c", event: 4, delay: 3600 },
    ],
  });
  const a = await claim();
  const b = await claim();
  expect(a.body.group_id).toBe("a");
  expect(b.body.group_id).toBe("b");
  expect((await post(`/v1/leases/${a.body.lease_id}/ack`)).status).toBe(204);
  expect((await post(`/v1/leases/${b.body.lease_id}/nack`, { delay: 600 })).status).toBe(204);

  const now = await metrics();
  const state = (s: string) => now.value("turso_queue_messages", { queue: "default", state: s });
  // a:2 ready; b:3 parked; c:4 delayed.
  expect({
    ready: state("ready"),
    waiting: state("waiting"),
    in_flight: state("in_flight"),
    parked: state("parked"),
    delayed: state("delayed"),
    dead: state("dead"),
  }).toEqual({ ready: 1, waiting: 0, in_flight: 0, parked: 1, delayed: 1, dead: 0 });
  expect(now.value("turso_queue_groups", { queue: "default" })).toBe(3);
  // The delayed message is not due: it does not count; the oldest is a's second, waiting since its publish.
  const age = now.value("turso_queue_oldest_age_seconds", { queue: "default" }) as number;
  expect(age).toBeGreaterThan(0);
  expect(age).toBeLessThan(60);

  expect(counters(now, "default")).toEqual({
    ...was,
    published: was.published + 4,
    acked: was.acked + 1,
    nacked: was.nacked + 1,
  });
  const held = now.histogram("turso_queue_claim_to_ack_seconds", { queue: "default" });
  expect(held?.count).toBe((heldBefore?.count ?? 0) + 1);
  expect(held?.buckets["+Inf"]).toBe(held?.count);
  // Cumulative: never fewer below a higher bound.
  const bounds = Object.entries(held?.buckets ?? {})
    .map(([le, n]) => [le === "+Inf" ? Number.POSITIVE_INFINITY : Number(le), n] as const)
    .sort((x, y) => x[0] - y[0]);
  bounds.forEach(([, n], i) => {
    if (i > 0) expect(n).toBeGreaterThanOrEqual((bounds[i - 1] as readonly [number, number])[1]);
  });
  expect(held?.buckets["60"]).toBe(held?.count);
  expect(held?.sum).toBeGreaterThan(heldBefore?.sum ?? 0);
});

it("counts dead letters and push deliveries, failures apart", async () => {
  const was = counters(await metrics(), "default");
  await post("/v1/groups/poison/messages", { event: "never handled" });
  // Five attempts (the default), each nacked: the fifth nack dead-letters it.
  for (let i = 0; i < 5; i++) {
    const l = await claim();
    expect(l.body.group_id).toBe("poison");
    await post(`/v1/leases/${l.body.lease_id}/nack`, {});
  }
  const dead = await metrics();
  expect(dead.value("turso_queue_messages", { queue: "default", state: "dead" })).toBe(1);
  expect(counters(dead, "default")).toMatchObject({ dead_lettered: was.dead_lettered + 1, nacked: was.nacked + 5 });

  const failing = await api(`/v1/subscriptions/failing`, {
    method: "PUT",
    json: { url: `${inject("consumerUrl")}/status-500/metrics-${Date.now()}` },
  });
  expect(failing.status).toBe(200);
  await post("/v1/groups/pushed/messages", { event: "hook" });
  await waitFor(async () => counters(await metrics(), "default").push_failures > was.push_failures, {
    what: "a failed delivery",
  });
  await api("/v1/subscriptions/failing", { method: "DELETE" });
  await api(`/v1/subscriptions/taking`, {
    method: "PUT",
    json: { url: `${inject("consumerUrl")}/metrics-${Date.now()}` },
  });
  // The retry is due after its backoff; the message is acked by the 200.
  const after = await waitFor(
    async () => {
      const c = counters(await metrics(), "default");
      return c.acked > was.acked && c;
    },
    { what: "the delivery that was taken", timeoutMs: 30_000 },
  );
  await api("/v1/subscriptions/taking", { method: "DELETE" });
  expect(after.pushed - was.pushed).toBe(after.push_failures - was.push_failures + 1);
});

it("labels each queue; a sharded queue's counters add up its shards'", async () => {
  expect((await api("/v1/queues/billing", { method: "PUT", json: { shards: 4 } })).status).toBe(201);
  const messages = Array.from({ length: 40 }, (_, i) => ({ group_id: `g${i}`, event: i }));
  expect((await post("/v1/queues/billing/messages", { messages })).status).toBe(201);
  for (let i = 0; i < 10; i++) {
    const l = await claim("/v1/queues/billing/claims");
    expect((await post(`/v1/queues/billing/leases/${l.body.lease_id}/ack`)).status).toBe(204);
  }
  const s = await metrics();
  expect(counters(s, "billing")).toMatchObject({ published: 40, acked: 10 });
  expect(s.value("turso_queue_messages", { queue: "billing", state: "ready" })).toBe(30);
  expect(s.histogram("turso_queue_claim_to_ack_seconds", { queue: "billing" })?.count).toBe(10);
  expect(s.value("turso_queue_groups", { queue: "billing" })).toBe(30);
});
