/**
 * The scope matrix shared by the Node and workerd key tests: the scope each API operation needs, as
 * issue 25 lists them (written here, not read from the declarations, so that a declaration that drifts
 * fails), and one request per route and queue, to send with keys of every scope.
 */

import { expect } from "vitest";
import type { RouteSpec } from "../../src/app/route.js";
import { scopedPath } from "../../src/app/route.js";
import { API_ROUTES } from "../../src/app/routes/index.js";
import { DEFAULT_QUEUE, queueAllowed, type Scope } from "../../src/rules.js";

/** publish: publish; consume: claims, settling leases; read: what only reads; manage: what changes or deletes. */
export const SCOPE_OF: Record<string, Scope | "any"> = {
  publish: "publish",
  publishBatch: "publish",
  claim: "consume",
  ack: "consume",
  nack: "consume",
  release: "consume",
  settle: "consume",
  extend: "consume",
  putSubscription: "manage",
  listSubscriptions: "read",
  deleteSubscription: "manage",
  stats: "read",
  history: "read",
  listGroups: "read",
  peek: "read",
  purge: "manage",
  listDeadLetters: "read",
  redrive: "manage",
  deleteDeadLetter: "manage",
  listQueues: "read",
  putQueue: "manage",
  getQueue: "read",
  deleteQueue: "manage",
  createKey: "manage",
  listKeys: "manage",
  revokeKey: "manage",
  whoami: "any",
  listAudit: "manage",
  metrics: "read",
  getSettings: "read",
  putSettings: "manage",
  getGroup: "read",
  putGroup: "manage",
  resetGroup: "manage",
  putSchedule: "manage",
  listSchedules: "read",
  deleteSchedule: "manage",
};

/** Routes about no one queue that a key limited to some queues may still call (they answer only those). */
export const FILTERED = new Set(["listQueues", "metrics", "whoami"]);

/** Every table a request could write, ours and the spec's: what "stored nothing" is checked against. */
export const ALL_TABLES = [
  "messages",
  "groups",
  "tq_dead_letters",
  "tq_idempotency",
  "tq_publishers",
  "tq_subscriptions",
  "tq_queues",
  "tq_keys",
  "tq_audit",
];

/** One query counting the rows of every table. */
export const COUNT_ALL = `SELECT ${ALL_TABLES.map((t) => `(SELECT count(*) FROM ${t}) AS ${t}`).join(", ")}`;

/** What a refused case answers: 403 FORBIDDEN naming the scope, and the queue (or every queue). */
export function expectForbidden(
  c: Case,
  what: string,
  res: { status: number; text: string; headers: Headers; body: { error: { code: string; message: string } } },
): void {
  const need = SCOPE_OF[c.route.operationId] as string;
  expect(res.status, `${what}: ${res.text}`).toBe(403);
  expect(res.body.error.code).toBe("FORBIDDEN");
  expect(res.body.error.message, what).toContain(need);
  if (c.queue !== undefined) expect(res.body.error.message, what).toContain(`queue ${c.queue}`);
  else if (!FILTERED.has(c.route.operationId)) expect(res.body.error.message, what).toContain("every queue");
  expect(res.headers.get("www-authenticate")).toBe(
    `Bearer realm="turso-queue", error="insufficient_scope", scope="${need}"`,
  );
}

export interface Case {
  route: RouteSpec;
  method: string;
  path: string;
  body: unknown;
  /** The queue the request is about; undefined for a route about no one queue. */
  queue: string | undefined;
}

const VALUES: Record<string, string> = {
  group_id: "g",
  lease_id: "1.0123456789abcdef0123456789abcdef",
  seq: "1",
  name: "sub",
  key_id: "0123456789abcdef",
};

/** Bodies that change little when allowed (no long poll, no push anywhere but a closed loopback port). */
const BODIES: Record<string, unknown> = {
  publish: { event: { n: 1 } },
  publishBatch: { messages: [{ group_id: "g", event: 1 }] },
  claim: { worker_id: "w", visibility: 30 },
  extend: { visibility: 30 },
  putSubscription: { url: "http://127.0.0.1:9/never" },
  putQueue: {},
  createKey: { name: "made by the matrix", scopes: ["manage"] },
};

const fill = (template: string, queue: string | undefined) =>
  template.replace(/\{([^}]+)\}/g, (_, name: string) =>
    name === "queue" ? (queue as string) : (VALUES[name] ?? `no-${name}`),
  );

/** One request per route about one queue, for each of `queues` (the default one by `/v1/...`), and one per other route. */
export function cases(queues: string[]): Case[] {
  const out: Case[] = [];
  for (const route of API_ROUTES) {
    const body = BODIES[route.operationId] ?? (route.request?.body?.required ? route.request.body.example : undefined);
    const base = { route, method: route.method.toUpperCase(), body };
    const scoped = scopedPath(route);
    if (scoped !== undefined) {
      for (const q of queues) {
        out.push({ ...base, path: fill(q === DEFAULT_QUEUE ? route.path : scoped, q), queue: q });
      }
    } else if (route.path.includes("{queue}")) {
      for (const q of queues) out.push({ ...base, path: fill(route.path, q), queue: q });
    } else {
      out.push({ ...base, path: fill(route.path, undefined), queue: undefined });
    }
  }
  return out;
}

/** Whether a key with `scopes` on `keyQueues` (undefined: every queue) may send `c`, by the table above. */
export function allowed(c: Case, scopes: Scope[], keyQueues: string[] | undefined): boolean {
  const need = SCOPE_OF[c.route.operationId];
  if (need === undefined) throw new Error(`no scope listed for ${c.route.operationId}`);
  if (need === "any") return true;
  if (!scopes.includes(need)) return false;
  if (c.queue !== undefined) return queueAllowed(keyQueues, c.queue);
  return keyQueues === undefined || FILTERED.has(c.route.operationId);
}

/** A JWT signed with `sign` (HS256 over a secret, or a CryptoKey for ES256/EdDSA). */
export async function jwt(
  claims: Record<string, unknown>,
  key: { secret: string } | { alg: "ES256" | "EdDSA"; privateKey: CryptoKey; kid?: string },
  header: Record<string, unknown> = {},
): Promise<string> {
  const b64 = (bytes: Uint8Array) =>
    btoa(String.fromCharCode(...bytes))
      .replaceAll("+", "-")
      .replaceAll("/", "_")
      .replace(/=+$/, "");
  const text = (o: unknown) => b64(new TextEncoder().encode(JSON.stringify(o)));
  const alg = "secret" in key ? "HS256" : key.alg;
  const kid = "secret" in key ? undefined : key.kid;
  const signed = `${text({ alg, typ: "JWT", ...(kid ? { kid } : {}), ...header })}.${text(claims)}`;
  const data = new TextEncoder().encode(signed);
  let sig: ArrayBuffer;
  if ("secret" in key) {
    const k = await crypto.subtle.importKey(
      "raw",
      new TextEncoder().encode(key.secret),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign"],
    );
    sig = await crypto.subtle.sign("HMAC", k, data);
  } else {
    sig = await crypto.subtle.sign(
      key.alg === "ES256" ? { name: "ECDSA", hash: "SHA-256" } : "Ed25519",
      key.privateKey,
      data,
    );
  }
  return `${signed}.${b64(new Uint8Array(sig))}`;
}
