/**
 * Named queues follow their databases: the catalog keeps what a queue is, and the configuration says
 * where it lives. A sqld restarted on other ports (its data kept) serves the same named and sharded
 * queues through a Worker configured with its new URL; a queue whose database is gone fails alone
 * (listed with its error, `turso_queue_up` 0 in /metrics, a retryable 503 on its routes), and every
 * other queue is listed, scraped and served. The Worker's production bundle under Miniflare, its
 * QueueWriters included, against a real sqld with namespaces.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { type ServedWorker, serveWorker } from "../../scripts/support/miniflare.js";
import { type Sqld, startSqld } from "../../scripts/support/sqld.js";
import type * as T from "../../src/contract/types.js";
import { sqldNamespaces } from "../../src/core/databases.js";
import { LibsqlTransport } from "../../src/index.js";
import { apiAt } from "../support/api.js";
import { scrape } from "../support/prometheus.js";

const TOKEN = "restart-test-token-0123456789";
const dataDir = join(mkdtempSync(join(tmpdir(), "turso-queue-restart-")), "data.sqld");
let sqld: Sqld | undefined;
let worker: ServedWorker | undefined;

/** sqld on this test's data, then the Worker bound to it by its URL of the moment. */
async function start(): Promise<{ sqld: Sqld; worker: ServedWorker }> {
  sqld = await startSqld({ dataDir, namespaces: true });
  // The default queue's database, as `npm start` makes it.
  await sqldNamespaces({ url: sqld.url, adminUrl: sqld.adminUrl as string }).create("default");
  worker = await serveWorker({
    databaseUrl: sqld.url,
    queueToken: TOKEN,
    vars: { QUEUE_DATABASES: "namespaces", SQLD_ADMIN_URL: sqld.adminUrl as string },
  });
  return { sqld, worker };
}

async function stop(): Promise<void> {
  await worker?.stop();
  await sqld?.stop();
  worker = sqld = undefined;
}

afterAll(stop);

const api = apiAt(() => worker?.url as string, TOKEN);
const metrics = async () => {
  const res = await fetch(`${worker?.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.status).toBe(200);
  return scrape(await res.text());
};
const listed = async () => (await api<T.QueueList>("/v1/queues")).body.queues;

describe("named queues when their databases move", () => {
  it("a sqld restarted on other ports serves the same named and sharded queues, twice", async () => {
    const first = await start();
    expect((await api("/v1/queues/emails", "PUT", {})).status).toBe(201);
    expect((await api("/v1/queues/billing", "PUT", { shards: 4 })).status).toBe(201);
    expect((await api("/v1/queues/emails/groups/to-ada/messages", "POST", { event: { n: 1 } })).status).toBe(201);
    const batch = Array.from({ length: 8 }, (_, i) => ({ group_id: `customer-${i % 4}`, event: { invoice: i } }));
    expect((await api("/v1/queues/billing/messages", "POST", { messages: batch })).status).toBe(201);
    const ports = [first.sqld.port, Number(new URL(first.sqld.adminUrl as string).port)];

    for (const round of [1, 2]) {
      await stop();
      const again = await start();
      // Another port each time: what the catalog kept must not be an address.
      expect(again.sqld.port).not.toBe(ports[0]);
      const queues = await listed();
      expect(queues.map((q) => [q.name, q.error])).toEqual([
        ["default", undefined],
        ["billing", undefined],
        ["emails", undefined],
      ]);
      const held = (name: string) => {
        const stats = queues.find((q) => q.name === name)?.stats;
        return stats ? stats.ready + stats.waiting : undefined;
      };
      expect(held("emails")).toBe(1);
      expect(held("billing")).toBe(8 - (round - 1) * 4);

      // Claimed and acked where they are: one message of emails, one per customer of billing.
      const mail = await api<T.Lease>("/v1/queues/emails/claims", "POST", { worker_id: "w", visibility: 30 });
      expect(mail.status).toBe(200);
      expect(mail.body.event).toEqual({ n: round });
      expect((await api(`/v1/queues/emails/leases/${mail.body.lease_id}/ack`, "POST")).status).toBe(204);
      const bills = await api<T.LeaseList>("/v1/queues/billing/claims", "POST", {
        worker_id: "w",
        visibility: 30,
        max: 8,
      });
      expect(bills.body.leases.map((l) => l.group_id).sort()).toEqual([0, 1, 2, 3].map((i) => `customer-${i}`));
      for (const l of bills.body.leases) {
        expect((await api(`/v1/queues/billing/leases/${l.lease_id}/ack`, "POST")).status).toBe(204);
      }
      // The next round's message for emails.
      await api("/v1/queues/emails/groups/to-ada/messages", "POST", { event: { n: round + 1 } });

      const scraped = await metrics();
      expect(scraped.value("turso_queue_up", { queue: "emails" })).toBe(1);
      expect(scraped.value("turso_queue_up", { queue: "billing" })).toBe(1);
      expect(scraped.value("turso_queue_messages", { queue: "billing", state: "ready" })).toBe(8 - round * 4);
      ports.splice(0, 2, again.sqld.port, Number(new URL(again.sqld.adminUrl as string).port));
    }
  });

  it("a queue whose database is gone fails alone: listed with its error, up 0 in /metrics, 503 on its routes", async () => {
    if (sqld === undefined) await start();
    const s = sqld as Sqld;
    expect((await api("/v1/queues/spare", "PUT", {})).status).toBe(201);
    // Its database dropped behind the catalog's back (an operator's mistake, a lost volume).
    const res = await fetch(`${s.adminUrl}/v1/namespaces/spare`, { method: "DELETE" });
    expect(res.status).toBe(200);

    const queues = await listed();
    const spare = queues.find((q) => q.name === "spare");
    expect(spare?.stats).toBeNull();
    expect(spare?.error?.code).toMatch(/^(UNAVAILABLE|TIMEOUT)$/);
    expect(queues.filter((q) => q.name !== "spare").every((q) => q.stats !== null)).toBe(true);

    const scraped = await metrics();
    expect(scraped.value("turso_queue_up", { queue: "spare" })).toBe(0);
    expect(scraped.value("turso_queue_up", { queue: "emails" })).toBe(1);
    expect(scraped.value("turso_queue_up", { queue: "default" })).toBe(1);

    const publish = await api<T.ErrorAnswer>("/v1/queues/spare/groups/g/messages", "POST", { event: 1 });
    expect(publish.status).toBe(503);
    expect(publish.body.error.code).toBe("UNAVAILABLE");
    // The others are served as before.
    expect((await api("/v1/queues/emails/groups/g/messages", "POST", { event: 1 })).status).toBe(201);
    const t = await LibsqlTransport.create(s.url, { namespace: "emails" });
    expect((await t.stats()).ready).toBeGreaterThan(0);
    t.close();
  });
});
