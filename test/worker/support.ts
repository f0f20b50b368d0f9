/** Helpers for the tests that run inside workerd: requests to the Worker, and the database behind it. */

import { env, exports } from "cloudflare:workers";
import { createClient } from "@libsql/client/web";
import { afterAll, beforeAll, inject } from "vitest";
import type * as T from "../../src/contract/types.js";
import { LibsqlTransport } from "../../src/core/transport.js";
import { TEST_TOKEN } from "./constants.js";

export { TEST_TOKEN };

export interface Call {
  method?: string;
  /** A value to send as JSON (with Content-Type: application/json), unless `raw` is given. */
  json?: unknown;
  /** A body sent as is. */
  raw?: BodyInit;
  headers?: Record<string, string>;
  /** The bearer token; `null` sends no Authorization header. */
  token?: string | null;
  signal?: AbortSignal;
}

/**
 * Every field an answer of the API can hold (src/contract/types.ts), for tests that read answers by
 * field name: a misspelt field does not compile. (`GroupList` is left out: its `groups` is not the
 * counter of `Stats`; read it with `api<T.GroupList>(...)`.)
 */
export type AnyAnswer = T.Lease &
  T.LeaseList &
  T.ExtendAnswer &
  T.Stats &
  T.DeadLetterPage &
  T.PublishBatchAnswer &
  T.ErrorAnswer &
  T.Health;

export interface Answer<B = AnyAnswer> {
  status: number;
  headers: Headers;
  /** The parsed JSON body; undefined when empty. */
  body: B;
  text: string;
}

/** One request to the Worker under test (its default export, in this isolate). */
export async function api<B = AnyAnswer>(path: string, call: Call = {}): Promise<Answer<B>> {
  const headers: Record<string, string> = { ...(call.headers ?? {}) };
  const token = call.token === undefined ? TEST_TOKEN : call.token;
  if (token !== null) headers.authorization ??= `Bearer ${token}`;
  let body: BodyInit | undefined = call.raw;
  if (call.json !== undefined) {
    body = JSON.stringify(call.json);
    headers["content-type"] ??= "application/json";
  }
  const method = call.method ?? (body === undefined ? "GET" : "POST");
  const res = await exports.default.fetch(`http://queue.test${path}`, { method, headers, body, signal: call.signal });
  const text = await res.text();
  let parsed: unknown;
  if (text.length > 0) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
  }
  return { status: res.status, headers: res.headers, body: parsed as B, text };
}

export const post = <B = AnyAnswer>(path: string, json?: unknown, extra: Omit<Call, "json"> = {}) =>
  api<B>(path, { method: "POST", json, ...extra });

/**
 * Requests that reached sqld so far holding every one of `texts`, counted by the proxy in front of
 * it (test/worker/global-setup.ts) from the first time this question was asked.
 */
export async function sqldRequests(...texts: string[]): Promise<number> {
  const q = texts.map((t) => `match=${encodeURIComponent(t)}`).join("&");
  const res = await fetch(`${inject("sqldCounterUrl")}/?${q}`);
  return ((await res.json()) as { requests: number }).requests;
}
/** Text only a claim statement carries. */
export const CLAIM = "tq_claimed_at AS stamp";

/** A direct client on the sqld the Worker is bound to (for resets and checks, not for the API). */
export function db() {
  return createClient({ url: env.TURSO_DATABASE_URL as string });
}

const TABLES = [
  "messages",
  "groups",
  "tq_dead_letters",
  "tq_idempotency",
  "tq_publishers",
  "tq_subscriptions",
  "tq_queues",
  "tq_settings",
  "tq_group_settings",
  "tq_rates",
  "tq_schedules",
  "tq_shard",
];

/** The QueueWriter of the database the Worker is bound to. */
export function writer() {
  const ns = env.QUEUE_WRITER;
  return ns.get(ns.idFromName(env.TURSO_DATABASE_URL as string));
}

/**
 * Ensures the schema, then empties every queue table. Files run one at a time (fileParallelism:
 * false). Subscriptions deleted behind the writer's back are forgotten by its pusher only at its
 * next wake: wake it now, so that no delivery of a later test goes to an earlier test's consumer.
 */
export async function resetDatabase(): Promise<void> {
  const client = db();
  await LibsqlTransport.fromClient(client);
  const rs = await client.batch(
    [...TABLES.map((t) => `DELETE FROM ${t}`), "DELETE FROM sqlite_sequence WHERE name = 'messages'"],
    "write",
  );
  client.close();
  if ((rs[TABLES.indexOf("tq_subscriptions")]?.rowsAffected ?? 0) > 0) await writer().wake();
}

/** Rows in every queue table: what "nothing stored" is checked against. */
export async function rowCounts(): Promise<Record<string, number>> {
  const client = db();
  const rs = await client.execute(`SELECT ${TABLES.map((t) => `(SELECT count(*) FROM ${t}) AS ${t}`).join(", ")}`);
  client.close();
  const row = rs.rows[0] as Record<string, unknown>;
  return Object.fromEntries(TABLES.map((t) => [t, Number(row[t])]));
}

export const EMPTY = Object.fromEntries(TABLES.map((t) => [t, 0]));

/** Groups holding more than one live lease right now (must always be empty). */
export async function groupsWithTwoLiveLeases(): Promise<unknown[]> {
  const client = db();
  const rs = await client.execute(`SELECT group_id, count(*) AS live FROM messages
     WHERE locked_by IS NOT NULL AND locked_by <> '__parked__' AND lock_expiry >= unixepoch('subsec')
     GROUP BY group_id HAVING count(*) > 1`);
  client.close();
  return rs.rows.map((r) => ({ ...r }));
}

/** Empties the databases the Worker's static map names (QUEUE_DATABASES), for a file that makes named queues. */
export async function emptyMappedDatabases(): Promise<void> {
  const map = JSON.parse(inject("workerQueueDatabases")) as Record<string, { url: string; namespace: string }>;
  const stmts = TABLES.filter((t) => t !== "tq_queues")
    .map((t) => `DELETE FROM ${t}`)
    .concat(["DELETE FROM sqlite_sequence WHERE name = 'messages'"]);
  for (const db of Object.values(map)) {
    const res = await fetch(`${db.url}/v2/pipeline`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-namespace-bin": btoa(db.namespace).replace(/=+$/, "") },
      body: JSON.stringify({
        requests: [...stmts.map((sql) => ({ type: "execute", stmt: { sql } })), { type: "close" }],
      }),
    });
    await res.text();
  }
}

/** For a file that makes the named queues `names`: gone (with their databases emptied) before it, and after. */
export function withoutQueues(...names: string[]): void {
  const drop = async () => {
    for (const q of names) {
      const res = await api(`/v1/queues/${q}?force=true`, { method: "DELETE" });
      if (res.status !== 204 && res.status !== 404) throw new Error(`could not delete queue ${q}: ${res.text}`);
    }
  };
  beforeAll(async () => {
    await drop();
    await emptyMappedDatabases();
  });
  afterAll(drop);
}
