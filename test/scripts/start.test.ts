/**
 * `npm start` (scripts/dev.ts) stopped and started again, twice, as a user does from one day to the
 * next: a named and a sharded queue holding messages are listed, counted, claimed, acked and scraped
 * after each restart. The first restart keeps sqld's ports; for the second, another process holds
 * the old one, so sqld moves (and says so) and the queues follow it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "vitest";
import { freePort } from "../../scripts/support/sqld.js";
import type * as T from "../../src/contract/types.js";
import { apiAt } from "../support/api.js";
import { scrape } from "../support/prometheus.js";
import { waitFor } from "../support/wait.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const TOKEN = "start-test-token-0123456789";
const dataDir = mkdtempSync(join(tmpdir(), "turso-queue-start-"));
let port = 0;
let running: { child: ChildProcess; out: string[] } | undefined;
let squatter: Server | undefined;

async function start(): Promise<string> {
  port = await freePort();
  const child = spawn(join(ROOT, "node_modules", ".bin", "tsx"), ["scripts/dev.ts"], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), QUEUE_TOKEN: TOKEN, TQ_DATA_DIR: dataDir },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const out: string[] = [];
  child.stdout?.on("data", (d: Buffer) => out.push(d.toString()));
  child.stderr?.on("data", (d: Buffer) => out.push(d.toString()));
  running = { child, out };
  await waitFor(async () => out.join("").includes("turso-queue is up:") || child.exitCode !== null, {
    timeoutMs: 120_000,
  });
  expect(child.exitCode, out.join("")).toBeNull();
  return out.join("");
}

async function stop(): Promise<void> {
  const r = running;
  running = undefined;
  if (r === undefined || r.child.exitCode !== null) return;
  const exited = new Promise((resolve) => r.child.once("exit", resolve));
  r.child.kill("SIGINT");
  await exited;
}

afterAll(async () => {
  await stop();
  squatter?.close();
});

const api = apiAt(() => `http://127.0.0.1:${port}`, TOKEN);
const sqldPort = () => (JSON.parse(readFileSync(join(dataDir, "ports.json"), "utf8")) as { http: number }).http;

it("named and sharded queues survive npm start stopped and started again, twice", { timeout: 400_000 }, async () => {
  await start();
  expect((await api("/v1/queues/emails", "PUT", {})).status).toBe(201);
  expect((await api("/v1/queues/billing", "PUT", { shards: 4 })).status).toBe(201);
  await api("/v1/queues/emails/groups/to-ada/messages", "POST", { event: { n: 1 } });
  const invoices = Array.from({ length: 8 }, (_, i) => ({ group_id: `customer-${i % 4}`, event: { invoice: i } }));
  expect((await api("/v1/queues/billing/messages", "POST", { messages: invoices })).status).toBe(201);

  for (const round of [1, 2]) {
    const before = sqldPort();
    await stop();
    if (round === 2) {
      // Another process holds sqld's old port now.
      squatter = createServer();
      await new Promise<void>((resolve) => squatter?.listen(before, "127.0.0.1", resolve));
    }
    const out = await start();
    if (round === 1) expect(sqldPort()).toBe(before);
    else {
      expect(sqldPort()).not.toBe(before);
      expect(out).toContain(`ports ${before} and`);
    }

    const list = (await api<T.QueueList>("/v1/queues")).body.queues;
    expect(list.map((q) => [q.name, q.error])).toEqual([
      ["default", undefined],
      ["billing", undefined],
      ["emails", undefined],
    ]);
    const count = (name: string) => {
      const s = list.find((q) => q.name === name)?.stats;
      return s ? s.ready + s.waiting : undefined;
    };
    expect(count("emails")).toBe(1);
    expect(count("billing")).toBe(8 - (round - 1) * 4);

    const mail = await api<T.Lease>("/v1/queues/emails/claims", "POST", { worker_id: "w", visibility: 30 });
    expect(mail.body.event).toEqual({ n: round });
    expect((await api(`/v1/queues/emails/leases/${mail.body.lease_id}/ack`, "POST")).status).toBe(204);
    await api("/v1/queues/emails/groups/to-ada/messages", "POST", { event: { n: round + 1 } });
    const bills = await api<T.LeaseList>("/v1/queues/billing/claims", "POST", {
      worker_id: "w",
      visibility: 30,
      max: 8,
    });
    expect(bills.body.leases).toHaveLength(4);
    for (const l of bills.body.leases) {
      expect((await api(`/v1/queues/billing/leases/${l.lease_id}/ack`, "POST")).status).toBe(204);
    }

    const res = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    const scraped = scrape(await res.text());
    for (const queue of ["default", "emails", "billing"]) expect(scraped.value("turso_queue_up", { queue })).toBe(1);
    expect(scraped.value("turso_queue_messages", { queue: "billing", state: "ready" })).toBe(8 - round * 4);
  }
});
