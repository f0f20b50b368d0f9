/**
 * The Worker without its QueueWriter Durable Object: the same app, serving each request itself with
 * a transport per request (src/app/transports.ts, perRequestTransports), inside workerd.
 */
import { env } from "cloudflare:workers";
import { beforeEach, expect, it } from "vitest";
import { createApp } from "../../src/app/app.js";
import { perRequestTransports } from "../../src/app/transports.js";
import { scrape } from "../support/prometheus.js";
import { waitFor } from "../support/wait.js";
import { CLAIM, EMPTY, resetDatabase, rowCounts, sqldRequests, TEST_TOKEN } from "./support.js";

const app = createApp(perRequestTransports());

async function call(path: string, json?: unknown) {
  const res = await app.request(
    path,
    {
      method: "POST",
      headers: { authorization: `Bearer ${TEST_TOKEN}`, "content-type": "application/json" },
      body: json === undefined ? undefined : JSON.stringify(json),
    },
    env,
  );
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

beforeEach(resetDatabase);

it("publishes, claims and acks with a transport per request; parallel claims stay one per group", async () => {
  const p = await call("/v1/messages", {
    messages: Array.from({ length: 8 }, (_, i) => ({ group_id: `g${i % 2}`, event: { i } })),
  });
  expect(p.status).toBe(201);
  const claims = await Promise.all(
    Array.from({ length: 6 }, (_, w) => call("/v1/claims", { worker_id: `w${w}`, visibility: 30 })),
  );
  const leased = claims.filter((c) => c.status === 200).map((c) => c.body);
  // Two groups: exactly two leases, one in each, each its group's oldest message.
  expect(leased.map((l) => l.group_id).sort()).toEqual(["g0", "g1"]);
  expect(leased.map((l) => l.event.i).sort()).toEqual([0, 1]);
  expect(claims.filter((c) => c.status === 204)).toHaveLength(4);
  for (const l of leased) expect((await call(`/v1/leases/${l.lease_id}/ack`)).status).toBe(204);
  expect((await rowCounts()).messages).toBe(6);
});

it("refuses bad input before touching the database", async () => {
  const r = await call("/v1/claims", { worker_id: "w", visibility: -1 });
  expect(r.status).toBe(400);
  expect(r.body.error.message).toMatch(/^visibility/);
  expect(await rowCounts()).toEqual(EMPTY);
});

it("wait without the writer: polls with pauses, and lets other requests of the isolate at the database meanwhile", async () => {
  await sqldRequests(CLAIM);
  const before = await sqldRequests(CLAIM);
  const waiting = call("/v1/claims", { worker_id: "w", visibility: 30, wait: 10 });
  // One request at a time may use the database in this isolate: this publish gets in only because
  // the waiting claim lets go of it between polls.
  await waitFor(async () => (await sqldRequests(CLAIM)) > before, { what: "the first (empty) claim" });
  expect((await call("/v1/groups/g/messages", { event: "late" })).status).toBe(201);
  const got = await waiting;
  expect([got.status, got.body.event]).toEqual([200, "late"]);
});

it("answers /metrics with the counts by state, and no counters (no writer keeps them)", async () => {
  await call("/v1/messages", { messages: [{ group_id: "a", event: 1 }] });
  const res = await app.request("/metrics", { headers: { authorization: `Bearer ${TEST_TOKEN}` } }, env);
  expect(res.status).toBe(200);
  const s = scrape(await res.text());
  expect(s.value("turso_queue_messages", { queue: "default", state: "ready" })).toBe(1);
  expect(s.types.turso_queue_published_total).toBe("COUNTER");
  expect(s.value("turso_queue_published_total", { queue: "default" })).toBeUndefined();
});
