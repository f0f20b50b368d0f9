/**
 * A client that hangs up while its claim is under way gets nothing, and what the claim took goes
 * back at once, unspent: claimable again with no attempt counted, long before its visibility ends.
 * workerd runs nothing more of a request whose client went away, so the giving back must not wait
 * for the handler to resume. The Worker's production bundle under Miniflare, its writer reaching
 * sqld through a proxy that slows every answer, so that each hang-up lands while the claim is out.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@libsql/client";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type ServedWorker, serveWorker } from "../../scripts/support/miniflare.js";
import { type Proxy as FaultProxy, startProxy } from "../../scripts/support/proxy.js";
import { type Sqld, startSqld } from "../../scripts/support/sqld.js";
import { resetDatabase } from "../support/db.js";
import { sleep } from "../support/trust.js";

const TOKEN = "hangup-test-token-0123456789";
/** Long enough that a lease seen free again within the test was given back, not lapsed. */
const VISIBILITY = 60;
/** Each answer from sqld to the writer is held this long: the claim is out when the client leaves. */
const LATENCY_MS = 400;

let dir: string;
let sqld: Sqld;
let dbProxy: FaultProxy;
let worker: ServedWorker;
const db = () => createClient({ url: sqld.url });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "turso-queue-hangup-"));
  sqld = await startSqld({ dataDir: join(dir, "data.sqld") });
  dbProxy = await startProxy(sqld.port);
  worker = await serveWorker({ databaseUrl: dbProxy.url, queueToken: TOKEN });
  // The schema, made by the writer's first call.
  await api("/v1/messages", { messages: [{ group_id: "setup", event: {} }] });
}, 180_000);

afterAll(async () => {
  await worker?.stop();
  await dbProxy?.close();
  await sqld?.stop();
  rmSync(dir, { recursive: true, force: true });
});

beforeEach(async () => {
  dbProxy.latencyMs = 0;
  await resetDatabase(db());
});

async function api(path: string, body: unknown): Promise<Response> {
  const res = await fetch(`${worker.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(res.status, await res.clone().text()).toBeLessThan(300);
  return res;
}

/**
 * Sends a claim on a raw socket and resets the connection once `leaving` resolves, as a front line
 * cancels the request of a client who left. Answers what came back before that (nothing, here).
 */
async function claimAndHangUp(body: unknown, leaving: Promise<void>): Promise<string> {
  const { port } = new URL(worker.url);
  const socket = connect(Number(port), "127.0.0.1");
  await new Promise((resolve) => socket.once("connect", resolve));
  let got = "";
  socket.on("data", (d) => {
    got += d.toString();
  });
  socket.on("error", () => {});
  const json = JSON.stringify(body);
  socket.write(
    `POST /v1/claims HTTP/1.1\r\nhost: queue\r\nauthorization: Bearer ${TOKEN}\r\n` +
      `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
  );
  await leaving;
  socket.resetAndDestroy();
  return got;
}

/** The message's lock and attempts, once no lease holds it (or what it is after `ms`). */
async function settledRow(seq: number, ms = 10_000): Promise<Record<string, unknown> | undefined> {
  const until = Date.now() + ms;
  for (;;) {
    const rs = await db().execute({
      sql: "SELECT locked_by, tq_attempts FROM messages WHERE seq = ?",
      args: [seq],
    });
    const row = rs.rows[0] ? { ...rs.rows[0] } : undefined;
    if (row?.locked_by === null || Date.now() > until) return row;
    await sleep(50);
  }
}

/** Resolves once the proxy in front of sqld has carried a write batch whose answer it now holds. */
async function claimOut(before: number): Promise<void> {
  while (dbProxy.stats.requests <= before) await sleep(5);
  await sleep(LATENCY_MS / 4);
}

function expectFree(row: Record<string, unknown> | undefined): void {
  expect(row?.locked_by, "the message is free again").toBeNull();
  expect(row?.tq_attempts ?? 0, "its attempt not counted").toBe(0);
}

async function publish(group: string): Promise<number> {
  const res = await api("/v1/messages", { messages: [{ group_id: group, event: { group } }] });
  return ((await res.json()) as { seqs: number[] }).seqs[0] as number;
}

describe("a client hanging up while its claim is under way", () => {
  it("mid-claim: what the claim took goes back at once, no attempt counted", { timeout: 60_000 }, async () => {
    for (let i = 0; i < 3; i++) {
      const seq = await publish(`g${i}`);
      dbProxy.latencyMs = LATENCY_MS;
      const got = await claimAndHangUp({ worker_id: "gone", visibility: VISIBILITY }, claimOut(dbProxy.stats.requests));
      expect(got, "no answer reached the client").toBe("");
      expectFree(await settledRow(seq));
      dbProxy.latencyMs = 0;
      // Claimable at once by the next consumer, its first attempt.
      const res = await api("/v1/claims", { worker_id: "next", visibility: VISIBILITY });
      expect(((await res.json()) as { seq: number; attempts: number }).seq).toBe(seq);
    }
  });

  it("mid-long-poll: what a claim for it took goes back at once, no attempt counted", { timeout: 60_000 }, async () => {
    dbProxy.latencyMs = LATENCY_MS;
    const before = dbProxy.stats.requests;
    const gone = claimAndHangUp(
      { worker_id: "gone", visibility: VISIBILITY, wait: 10 },
      (async () => {
        // The long poll is held; a publish's batch carries a claim for it; the client leaves while it is out.
        await sleep(300);
        const published = publish("lp");
        await claimOut(before + 1);
        void published;
      })(),
    );
    expect(await gone, "no answer reached the client").toBe("");
    dbProxy.latencyMs = 0;
    const rs = await db().execute("SELECT seq FROM messages WHERE group_id = 'lp'");
    const seq = Number(rs.rows[0]?.seq);
    expectFree(await settledRow(seq));
  });
});
