/**
 * Every outage has its code, from the failures Node really meets (workerd's are in
 * test/worker/outages.test.ts): a real sqld of this file's own, behind the fault proxy
 * (scripts/support/proxy.ts), reached through both of the library's paths (the write batch of
 * hrana.ts over Node's keep-alive fetch and over undici's, and reads through @libsql/client), a
 * closed port, sqld's BLOCKED (its admin API blocks the database as Turso does one over quota),
 * and what the write path and the schema check do with each.
 */
import { createClient } from "@libsql/client";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type Fault, type Proxy as FaultProxy, startProxy } from "../../scripts/support/proxy.js";
import { freePort, type Sqld, startSqld } from "../../scripts/support/sqld.js";
import { isRetryable, QueueError, RETRYABLE_CODES, toQueueError } from "../../src/core/errors.js";
import { httpWriter } from "../../src/core/hrana.js";
import { clientOf } from "../../src/core/internals.js";
import { nodeFetch } from "../../src/core/node-fetch.js";
import { LibsqlTransport } from "../../src/index.js";
import { resetDatabase } from "../support/db.js";
import { expectQueueError, tableCounts } from "../support/trust.js";

let sqld: Sqld;
let proxy: FaultProxy;
let admin: LibsqlTransport;

beforeAll(async () => {
  sqld = await startSqld({ admin: true });
  proxy = await startProxy(sqld.port);
  admin = await LibsqlTransport.create(sqld.url);
}, 60_000);

afterAll(async () => {
  admin?.close();
  await proxy?.close();
  await sqld?.stop();
});

beforeEach(async () => {
  proxy.clear();
  proxy.refuse = false;
  await block(false);
  await resetDatabase(clientOf(admin));
});

/** Blocks the database's writes as Turso blocks a database over its plan's quota (sqld's admin API). */
async function block(writes: boolean): Promise<void> {
  const url = `${sqld.adminUrl}/v1/namespaces/default/config`;
  const config = (await (await fetch(url)).json()) as Record<string, unknown>;
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...config, block_writes: writes, block_reason: writes ? "over its quota (test)" : null }),
  });
  expect(res.status).toBe(200);
}

/** What a failed call rejected with (it must fail). */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => expect.fail("the call should have failed"),
    (e: unknown) => e,
  );
}

const INSERT = "INSERT INTO tq_meta(key, value) VALUES ('probe', 1)";
const fetches = { "keep-alive fetch": () => nodeFetch() as typeof fetch, "undici fetch": () => fetch };

interface Case {
  name: string;
  fault: Fault;
  code: string;
  outcomeUnknown: boolean;
  retryAfterMs?: number;
}

const CASES: Case[] = [
  {
    name: "a request cut before the primary read it",
    fault: { kind: "cut" },
    code: "UNAVAILABLE",
    outcomeUnknown: true,
  },
  { name: "an answer lost after the commit", fault: { kind: "drop" }, code: "UNAVAILABLE", outcomeUnknown: true },
  { name: "an answer cut mid-read", fault: { kind: "truncate" }, code: "UNAVAILABLE", outcomeUnknown: true },
  ...[500, 502, 503, 504].map((status) => ({
    name: `a ${status} before the primary`,
    fault: { kind: "status" as const, status },
    code: "UNAVAILABLE",
    outcomeUnknown: true,
  })),
  {
    name: "a 502 after the commit",
    fault: { kind: "status", status: 502, after: true },
    code: "UNAVAILABLE",
    outcomeUnknown: true,
  },
  {
    name: "a 503 with Retry-After",
    fault: { kind: "status", status: 503, retryAfter: "3" },
    code: "UNAVAILABLE",
    outcomeUnknown: true,
    retryAfterMs: 3000,
  },
  {
    name: "a 429 with Retry-After (refused before it ran)",
    fault: { kind: "status", status: 429, retryAfter: "2" },
    code: "UNAVAILABLE",
    outcomeUnknown: false,
    retryAfterMs: 2000,
  },
];

describe("the write batch (hrana.ts) maps what Node's fetch really throws", () => {
  for (const [via, fetchOf] of Object.entries(fetches)) {
    it.each(CASES)(`${via}: $name → $code`, async (c) => {
      proxy.inject(c.fault);
      const send = httpWriter({ url: proxy.url, fetch: fetchOf() });
      const err = toQueueError(await rejection(send([INSERT])));
      expect({ code: err.code, outcomeUnknown: err.outcomeUnknown }).toEqual({
        code: c.code,
        outcomeUnknown: c.outcomeUnknown,
      });
      expect(err.retryAfterMs).toBe(c.retryAfterMs);
      expect(isRetryable(err)).toBe(true);
    });
  }

  it("a closed port: UNAVAILABLE, and provably not applied", async () => {
    const port = await freePort();
    for (const f of Object.values(fetches)) {
      const err = toQueueError(await rejection(httpWriter({ url: `http://127.0.0.1:${port}`, fetch: f() })([INSERT])));
      expect({ code: err.code, outcomeUnknown: err.outcomeUnknown }).toEqual({
        code: "UNAVAILABLE",
        outcomeUnknown: false,
      });
    }
  });

  it("an answer that never comes, given up on by its signal: TIMEOUT, outcome unknown", async () => {
    proxy.inject({ kind: "hang" });
    const send = httpWriter({ url: proxy.url, fetch: nodeFetch() as typeof fetch });
    const err = toQueueError(await rejection(send([INSERT], AbortSignal.timeout(200))));
    expect({ code: err.code, outcomeUnknown: err.outcomeUnknown }).toEqual({ code: "TIMEOUT", outcomeUnknown: true });
  });

  it("a database blocked (over quota): BLOCKED, not retryable, nothing applied", async () => {
    await block(true);
    const send = httpWriter({ url: sqld.url, fetch: nodeFetch() as typeof fetch });
    const err = toQueueError(await rejection(send([INSERT])));
    expect({ code: err.code, outcomeUnknown: err.outcomeUnknown, retryable: isRetryable(err) }).toEqual({
      code: "BLOCKED",
      outcomeUnknown: false,
      retryable: false,
    });
    expect(err.message).toMatch(/quota.*Operation was blocked: over its quota \(test\)/);
  });

  it("a statement the database refuses is DATABASE (a bug of ours), never an outage", async () => {
    const send = httpWriter({ url: sqld.url, fetch: nodeFetch() as typeof fetch });
    const err = toQueueError(await rejection(send(["INSERT INTO no_such_table VALUES (1)"])));
    expect(err.code).toBe("DATABASE");
    proxy.inject({ kind: "status", status: 400, body: "bad request" });
    const refused = toQueueError(await rejection(httpWriter({ url: proxy.url, fetch })([INSERT])));
    expect(refused.code).toBe("DATABASE");
  });
});

describe("reads through @libsql/client map the same way", () => {
  it.each(CASES.filter((c) => c.fault.kind !== "status" || !c.fault.after))("$name → $code", async (c) => {
    proxy.inject(c.fault);
    const client = createClient({ url: proxy.url });
    try {
      const err = toQueueError(await rejection(client.execute("SELECT 1")));
      expect(err.code).toBe(c.code);
    } finally {
      client.close();
    }
  });

  it("reads answer while writes are blocked, and a blocked read is BLOCKED", async () => {
    await block(true);
    const client = createClient({ url: sqld.url });
    try {
      expect((await client.execute("SELECT 1 AS one")).rows[0]?.one).toBe(1);
    } finally {
      client.close();
    }
  });
});

describe("the write path with each outage", () => {
  const open = (o: { timeoutMs?: number; requestTimeoutMs?: number } = {}) =>
    LibsqlTransport.create(proxy.url, { timeoutMs: 5000, requestTimeoutMs: 1000, ...o });

  it("lists its retryable codes once: BUSY, UNAVAILABLE, TIMEOUT", () => {
    expect([...RETRYABLE_CODES].sort()).toEqual(["BUSY", "TIMEOUT", "UNAVAILABLE"]);
  });

  it("a burst of 5xx and 429, answers lost and cut: a publish rides it out and is stored once", async () => {
    const t = await open();
    try {
      const faults: Fault[] = [
        { kind: "status", status: 503 },
        { kind: "status", status: 500, after: true },
        { kind: "status", status: 429 },
        { kind: "drop" },
        { kind: "cut" },
        { kind: "truncate" },
        { kind: "status", status: 502, after: true },
      ];
      for (const f of faults) proxy.inject(f, { match: "INSERT INTO messages" });
      const seq = await t.publish("g", { n: 1 });
      expect(proxy.pending()).toBe(0);
      const rs = await clientOf(admin).execute("SELECT seq, event FROM messages");
      expect(rs.rows.map((r) => ({ ...r }))).toEqual([{ seq, event: JSON.stringify({ n: 1 }) }]);
    } finally {
      t.close();
    }
  });

  it("the database's Retry-After holds the next attempt back", async () => {
    const t = await open();
    try {
      proxy.inject({ kind: "status", status: 429, retryAfter: "1" }, { match: "INSERT INTO messages" });
      const started = Date.now();
      await t.publish("g", { n: 1 });
      expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    } finally {
      t.close();
    }
  });

  it("BLOCKED fails every write of the batch at once, after one request, and stores nothing", async () => {
    const t = await open();
    try {
      await block(true);
      const before = proxy.stats.requests;
      const calls = [t.publish("a", { n: 1 }), t.publish("b", { n: 2 }), t.publish("c", { n: 3 })];
      for (const call of calls) {
        const err = await expectQueueError(call, "BLOCKED");
        expect(err.outcomeUnknown).toBe(false);
      }
      expect(proxy.stats.requests - before).toBe(1);
      expect((await tableCounts(clientOf(admin))).messages).toBe(0);
      await block(false);
      await t.publish("a", { n: 1 });
    } finally {
      t.close();
    }
  });

  it("a database that stays unreachable: UNAVAILABLE or TIMEOUT by the call's deadline, outcome unknown", async () => {
    const t = await open({ timeoutMs: 1500, requestTimeoutMs: 500 });
    try {
      proxy.inject({ kind: "status", status: 503 }, { times: 1000 });
      const started = Date.now();
      const err = await rejection(t.publish("g", { n: 1 }));
      expect(err).toBeInstanceOf(QueueError);
      expect(["UNAVAILABLE", "TIMEOUT"]).toContain((err as QueueError).code);
      expect((err as QueueError).outcomeUnknown).toBe(true);
      expect(Date.now() - started).toBeLessThan(1500 + 600);
    } finally {
      t.close();
    }
  });
});

describe("the schema check migrates only on the database's own answer that it has no schema", () => {
  /** A fresh database each time: a sqld namespace-free server of its own. */
  let fresh: Sqld;
  let front: FaultProxy;
  beforeEach(async () => {
    fresh = await startSqld();
    front = await startProxy(fresh.port);
    return async () => {
      await front.close();
      await fresh.stop();
    };
  });

  const migrations = () => {
    let n = 0;
    front.observe = (r) => {
      if (r.includes("CREATE TABLE")) n++;
    };
    return () => n;
  };

  it("a new database: 'no such table: tq_meta', then one migration batch", async () => {
    const sent = migrations();
    const t = await LibsqlTransport.create(front.url);
    t.close();
    expect(sent()).toBe(1);
  });

  it.each<[string, Fault]>([
    ["an answer cut mid-read", { kind: "truncate" }],
    ["an answer lost", { kind: "drop" }],
    ["a 503", { kind: "status", status: 503 }],
    ["a refusal that is not 'no such table' (HTTP 400)", { kind: "status", status: 400, body: "no" }],
  ])("%s: the open fails, and no migration batch is sent", async (_, fault) => {
    const sent = migrations();
    front.inject(fault, { match: "tq_meta", times: 1000 });
    const err = await rejection(LibsqlTransport.create(front.url, { timeoutMs: 1000, requestTimeoutMs: 300 }));
    expect(err).toBeInstanceOf(QueueError);
    expect((err as QueueError).code).not.toBe("INVALID_ARGUMENT");
    expect(sent()).toBe(0);
    // The database was left as it was: still no schema.
    const client = createClient({ url: fresh.url });
    const tables = await client.execute("SELECT count(*) AS n FROM sqlite_master WHERE name = 'tq_meta'");
    client.close();
    expect(tables.rows[0]?.n).toBe(0);
  });
});
