/**
 * The QueueWriter evicted for real: its workerd process stopped and a new one started on the same
 * Durable Object storage (the Worker bundle under Miniflare, scripts/support/miniflare.ts). A message
 * published while it was gone, by a writer that bypasses the Worker, is pushed by the alarm the
 * writer left behind, with no request arriving; and the counters `/metrics` reported are still there.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, inject, it } from "vitest";
import { type Consumer, startConsumer } from "../../scripts/support/consumer.js";
import { type ServedWorker, serveWorker } from "../../scripts/support/miniflare.js";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { resetDatabase } from "../support/db.js";
import { scrape } from "../support/prometheus.js";
import { waitFor } from "../support/wait.js";

const TOKEN = "eviction-test-token-0123456789";
let worker: ServedWorker | undefined;
let consumer: Consumer | undefined;
let t: LibsqlTransport | undefined;

afterEach(async () => {
  await worker?.stop();
  await consumer?.close();
  if (t) {
    await resetDatabase(clientOf(t));
    t.close();
  }
  worker = consumer = t = undefined;
});

it("after an eviction, the alarm resumes push deliveries with no request arriving", async () => {
  t = await LibsqlTransport.create(inject("sqldUrl"));
  await resetDatabase(clientOf(t));
  consumer = await startConsumer(() => ({ status: 200 }));
  const dir = mkdtempSync(join(tmpdir(), "turso-queue-writer-"));
  const serve = () =>
    serveWorker({
      databaseUrl: inject("sqldUrl"),
      queueToken: TOKEN,
      persist: dir,
      vars: { QUEUE_RECHECK_SECONDS: "1" },
    });
  worker = await serve();
  const put = await fetch(`${worker.url}/v1/subscriptions/after-eviction`, {
    method: "PUT",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ url: `${consumer.url}/hook` }),
  });
  expect(put.status).toBe(200);
  // The writer answers once its alarm is stored; then it goes away at once.
  await worker.stop();
  worker = undefined;

  await t.publish("g", "published while the writer was gone");
  expect(consumer.received).toHaveLength(0);
  worker = await serve();
  const [got] = await waitFor(async () => consumer?.received.length === 1 && consumer.received, {
    what: "the delivery",
  });
  expect(got?.delivery).toMatchObject({ event: "published while the writer was gone", subscription: "after-eviction" });
  await waitFor(async () => (await t?.stats())?.groups === 0, { what: "the ack" });
});

it("the counters /metrics reports outlive the writer's eviction", async () => {
  t = await LibsqlTransport.create(inject("sqldUrl"));
  await resetDatabase(clientOf(t));
  const dir = mkdtempSync(join(tmpdir(), "turso-queue-writer-"));
  const serve = () => serveWorker({ databaseUrl: inject("sqldUrl"), queueToken: TOKEN, persist: dir });
  const call = async (path: string, body?: unknown) => {
    const res = await fetch(`${worker?.url}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, text: await res.text() };
  };
  const counted = async () => {
    const s = scrape((await call("/metrics")).text);
    return {
      published: s.value("turso_queue_published_total", { queue: "default" }),
      acked: s.value("turso_queue_acked_total", { queue: "default" }),
      held: s.histogram("turso_queue_claim_to_ack_seconds", { queue: "default" })?.count,
    };
  };
  worker = await serve();
  await call("/v1/messages", {
    messages: [
      { group_id: "a", event: 1 },
      { group_id: "b", event: 2 },
    ],
  });
  const lease = JSON.parse((await call("/v1/claims", { worker_id: "w", visibility: 30 })).text) as { lease_id: string };
  expect((await call(`/v1/leases/${lease.lease_id}/ack`, {})).status).toBe(204);
  // A scrape answers what is stored: then the writer goes away at once.
  expect(await counted()).toEqual({ published: 2, acked: 1, held: 1 });
  await worker.stop();

  worker = await serve();
  expect(await counted()).toEqual({ published: 2, acked: 1, held: 1 });
  await call("/v1/groups/c/messages", { event: 3 });
  expect((await counted()).published).toBe(3);
});
