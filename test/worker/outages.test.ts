/**
 * Every outage has its code inside workerd, from the failures workerd's `fetch` really throws (a
 * plain Error "Network connection lost.", for a refused connection as for a lost one), with the
 * fault proxies of test/worker/global-setup.ts between workerd and a real sqld: the library's write
 * batch and reads, the schema check (no migration on a misread outage), the writer's own health
 * (a stall that hangs writes while reads answer; its counters in /metrics), and the API's answers
 * (BLOCKED, a writer reset mid-batch). Node's side of the same mapping: test/core/errors.test.ts.
 */
import { runInDurableObject } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { createClient as createDbClient } from "@libsql/client/web";
import { afterEach, beforeEach, describe, expect, inject, it, vi } from "vitest";
import { Meter } from "../../src/app/writer/meter.js";
import { createClient, QueueHttpError } from "../../src/client/index.js";
import { QueueError, toQueueError } from "../../src/core/errors.js";
import { httpWriter } from "../../src/core/hrana.js";
import { LibsqlTransport } from "../../src/core/transport.js";
import { scrape } from "../support/prometheus.js";
import { waitFor } from "../support/wait.js";
import { api, post, resetDatabase, rowCounts, TEST_TOKEN, writer } from "./support.js";

type Fault =
  | { kind: "cut" | "drop" | "truncate" | "hang" | "stall" }
  | { kind: "delay"; ms: number }
  | { kind: "status"; status: number; retryAfter?: string; body?: string; after?: boolean };

/** A fault proxy, driven through its control (scripts/support/proxy.ts controlProxy). */
function proxyAt(controlUrl: string) {
  const call = async (path: string, body?: unknown) => {
    const res = await fetch(`${controlUrl}${path}`, {
      method: body === undefined ? "GET" : "POST",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return res.json() as Promise<Record<string, number>>;
  };
  return {
    inject: (fault: Fault, o: { match?: string; times?: number } = {}) => call("/inject", { fault, ...o }),
    clear: () => call("/clear", {}),
    /** Requests so far: pass it to `count` later. */
    requests: async () => (await call("/stats")).requests as number,
    /** Requests holding `match` after the `since`th. */
    count: async (match: string, since: number) =>
      (await call(`/count?match=${encodeURIComponent(match)}&since=${since}`)).requests as number,
  };
}

const faulty = proxyAt(inject("faultControlUrl"));
const workerDb = proxyAt(inject("sqldControlUrl"));
const FAULT_URL = inject("faultSqldUrl");

afterEach(async () => {
  await faulty.clear();
  await workerDb.clear();
  await block(false);
  vi.restoreAllMocks();
});

/** Blocks the Worker's database's writes, as Turso blocks a database over its plan's quota. */
async function block(writes: boolean): Promise<void> {
  const url = `${inject("sqldAdminUrl")}/v1/namespaces/default/config`;
  const config = await (await fetch(url)).json<Record<string, unknown>>();
  if (config.block_writes === writes) return;
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...config, block_writes: writes, block_reason: writes ? "over its quota (test)" : null }),
  });
  expect(res.status).toBe(200);
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => expect.fail("the call should have failed"),
    (e: unknown) => e,
  );
}

const INSERT = "INSERT INTO tq_meta(key, value) VALUES ('probe', 1) ON CONFLICT(key) DO NOTHING";

describe("what workerd's fetch throws, and its code", () => {
  it("a refused connection and a lost one are both workerd's plain 'Network connection lost.': UNAVAILABLE, outcome unknown", async () => {
    await faulty.inject({ kind: "drop" });
    for (const url of ["http://127.0.0.1:1/", FAULT_URL]) {
      const raw = await rejection(fetch(url, { method: "POST", body: "{}" }));
      expect(raw).toBeInstanceOf(Error);
      expect(raw).not.toBeInstanceOf(TypeError);
      expect({ message: (raw as Error).message, retryable: (raw as { retryable?: boolean }).retryable }).toEqual({
        message: "Network connection lost.",
        retryable: true,
      });
      const err = toQueueError(raw);
      // workerd does not tell a refused connection from a lost one: the outcome is unknown for both.
      expect({ code: err.code, outcomeUnknown: err.outcomeUnknown }).toEqual({
        code: "UNAVAILABLE",
        outcomeUnknown: true,
      });
    }
  });

  it.each<[string, Fault, string, boolean, number?]>([
    ["a request cut before the primary", { kind: "cut" }, "UNAVAILABLE", true],
    ["an answer lost after the commit", { kind: "drop" }, "UNAVAILABLE", true],
    ["an answer cut mid-read", { kind: "truncate" }, "UNAVAILABLE", true],
    ["a 500", { kind: "status", status: 500 }, "UNAVAILABLE", true],
    ["a 502 after the commit", { kind: "status", status: 502, after: true }, "UNAVAILABLE", true],
    ["a 503 with Retry-After", { kind: "status", status: 503, retryAfter: "3" }, "UNAVAILABLE", true, 3000],
    ["a 504", { kind: "status", status: 504 }, "UNAVAILABLE", true],
    ["a 429 with Retry-After", { kind: "status", status: 429, retryAfter: "2" }, "UNAVAILABLE", false, 2000],
  ])("the write batch: %s → %s", async (_, fault, code, outcomeUnknown, retryAfterMs) => {
    await faulty.inject(fault);
    const send = httpWriter({ url: FAULT_URL, fetch: (i, init) => fetch(i, init) });
    const err = toQueueError(await rejection(send([INSERT])));
    expect({ code: err.code, outcomeUnknown: err.outcomeUnknown, retryAfterMs: err.retryAfterMs }).toEqual({
      code,
      outcomeUnknown,
      retryAfterMs,
    });
  });

  it("an answer that never comes, abandoned by the write path's signal: TIMEOUT", async () => {
    await faulty.inject({ kind: "hang" });
    const send = httpWriter({ url: FAULT_URL, fetch: (i, init) => fetch(i, init) });
    const err = toQueueError(await rejection(send([INSERT], AbortSignal.timeout(300))));
    expect({ code: err.code, outcomeUnknown: err.outcomeUnknown }).toEqual({ code: "TIMEOUT", outcomeUnknown: true });
  });

  it.each<[string, Fault]>([
    ["a lost answer", { kind: "drop" }],
    ["a cut read", { kind: "truncate" }],
    ["a 503", { kind: "status", status: 503 }],
  ])("a read through @libsql/client/web: %s → UNAVAILABLE", async (_, fault) => {
    await faulty.inject(fault);
    const client = createDbClient({ url: FAULT_URL });
    const err = toQueueError(await rejection(client.execute("SELECT 1")));
    client.close();
    expect(err.code).toBe("UNAVAILABLE");
  });
});

describe("the schema check sends no migration on a misread outage", () => {
  // The schema in place: a second open then has nothing to migrate.
  beforeEach(resetDatabase);

  it.each<[string, Fault]>([
    ["workerd's 'Network connection lost.'", { kind: "drop" }],
    ["a proxy that cuts the read", { kind: "truncate" }],
  ])("%s: the open fails UNAVAILABLE, and no migration batch goes out", async (_, fault) => {
    const since = await faulty.requests();
    await faulty.inject(fault, { match: "tq_meta", times: 1000 });
    const client = createDbClient({ url: FAULT_URL });
    const err = await rejection(
      LibsqlTransport.fromClient(client, { http: { url: FAULT_URL }, timeoutMs: 1000, requestTimeoutMs: 300 }),
    );
    expect(err).toBeInstanceOf(QueueError);
    expect((err as QueueError).code).toBe("UNAVAILABLE");
    expect(await faulty.count("tq_meta", since)).toBeGreaterThan(0);
    expect(await faulty.count("CREATE TABLE", since)).toBe(0);
    await faulty.clear();
    // The database's own answer: the schema is there, so no migration either.
    const t = await LibsqlTransport.fromClient(client, { http: { url: FAULT_URL } });
    expect(await faulty.count("CREATE TABLE", since)).toBe(0);
    t.close();
    client.close();
  });
});

describe("the writer's own health", () => {
  beforeEach(resetDatabase);

  it("writes that hang while reads answer: every call ends by its deadline, then it recovers by itself, counted and logged", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const client = createDbClient({ url: FAULT_URL });
    const t = await LibsqlTransport.fromClient(client, {
      http: { url: FAULT_URL },
      timeoutMs: 1500,
      requestTimeoutMs: 400,
    });
    const meter = new Meter(t, { sampleMs: 3_600_000 });
    // sqld's stall (docs/guarantees.md): every write batch hangs, reads answer.
    await faulty.inject({ kind: "stall" }, { match: "BEGIN IMMEDIATE", times: 1000 });
    const started = Date.now();
    // More writes than workerd's connections: none of them may wait behind another's hung request.
    const calls = Array.from({ length: 8 }, (_, i) => rejection(t.publish(`g${i}`, { i })));
    expect((await t.stats()).ready).toBe(0);
    for (const e of await Promise.all(calls)) {
      expect(e).toBeInstanceOf(QueueError);
      expect((e as QueueError).code).toBe("TIMEOUT");
    }
    expect(Date.now() - started).toBeLessThan(1500 + 1000);
    await faulty.clear();
    await t.publish("g", { after: true });
    const { counters } = await meter.reading();
    expect(counters.dbTimeouts).toBeGreaterThan(0);
    expect(counters.dbRecoveries).toBe(1);
    const lines = warn.mock.calls.map((c) => String(c[0]));
    expect(lines.filter((l) => l.includes("the database is failing"))).toHaveLength(1);
    expect(lines.filter((l) => l.includes("the database answers again"))).toHaveLength(1);
    await meter.stop();
    t.close();
    client.close();
  });

  it("the Worker's writer rides out a burst of 503s and reports it in /metrics", async () => {
    const failures = async () => {
      const res = await api("/metrics");
      const s = scrape(res.text);
      return {
        unavailable: s.value("turso_queue_database_failures_total", { queue: "default", code: "UNAVAILABLE" }) ?? 0,
        recoveries: s.value("turso_queue_database_recoveries_total", { queue: "default" }) ?? 0,
      };
    };
    const before = await failures();
    await workerDb.inject({ kind: "status", status: 503 }, { match: "INSERT INTO messages", times: 3 });
    const res = await post("/v1/messages", { messages: [{ group_id: "g", event: { n: 1 } }] });
    expect(res.status, res.text).toBe(201);
    const after = await failures();
    expect(after.unavailable - before.unavailable).toBe(3);
    expect(after.recoveries - before.recoveries).toBe(1);
  });
});

describe("the API's answer to each outage", () => {
  beforeEach(resetDatabase);

  it("a database over its quota: 503 BLOCKED without Retry-After, after one request, nothing stored; the client does not retry it", async () => {
    await block(true);
    const since = await workerDb.requests();
    const res = await post("/v1/messages", { messages: [{ group_id: "g", event: { n: 1 } }] });
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe("BLOCKED");
    expect(res.body.error.message).toMatch(/quota/);
    expect(res.headers.get("retry-after")).toBeNull();
    expect(await workerDb.count("INSERT INTO messages", since)).toBe(1);

    let sent = 0;
    const c = createClient({
      url: "http://queue.test",
      token: TEST_TOKEN,
      fetch: (url, init) => {
        sent++;
        return exports.default.fetch(url, init);
      },
    });
    const err = await rejection(c.publish("g", { n: 2 }));
    expect(err).toBeInstanceOf(QueueHttpError);
    expect({ code: (err as QueueHttpError).code, status: (err as QueueHttpError).status }).toEqual({
      code: "BLOCKED",
      status: 503,
    });
    expect(sent).toBe(1);
    expect((await rowCounts()).messages).toBe(0);
  });

  it("a writer reset mid-batch: 503 UNAVAILABLE with Retry-After; sent again with its key, stored once", async () => {
    const since = await workerDb.requests();
    // The batch reaches sqld (applied) and its answer never comes back: the writer is reset meanwhile.
    await workerDb.inject({ kind: "hang" }, { match: "INSERT INTO messages" });
    const headers = { "idempotency-key": "reset-mid-batch" };
    const first = post("/v1/messages", { messages: [{ group_id: "g", event: { n: 1 } }] }, { headers });
    await waitFor(async () => (await workerDb.count("INSERT INTO messages", since)) > 0, { what: "the batch sent" });
    await runInDurableObject(writer(), (_o, state) => {
      try {
        state.abort("reset mid-batch (test)");
      } catch {
        // abort() throws in the caller too
      }
    }).catch(() => undefined);
    const res = await first;
    expect(res.status, res.text).toBe(503);
    expect(res.body.error.code).toBe("UNAVAILABLE");
    expect(res.headers.get("retry-after")).not.toBeNull();
    const again = await post("/v1/messages", { messages: [{ group_id: "g", event: { n: 1 } }] }, { headers });
    expect(again.status, again.text).toBe(201);
    expect((await rowCounts()).messages).toBe(1);
  });
});
