/** Keys: make one (its secret shown once), list them, revoke one; who a key is; the audit of `manage` actions. */
import { Hono } from "hono";
import { withCommas } from "../../contract/kit.js";
import { AuditPage, AuditQuery, KeyBody, KeyCreated, KeyList, KeyPath, WhoAmI } from "../../contract/schemas.js";
import type * as T from "../../contract/types.js";
import { auditEntryToWire, grantToWire, keyToWire } from "../../contract/wire.js";
import { AUDIT, KEYS } from "../../rules.js";
import type { AppEnv } from "../context.js";
import { HttpError, notFound } from "../errors.js";
import { defineRoute, handle } from "../route.js";

const KEY = {
  id: "3f9a1c0e5b7d2a48",
  name: "checkout function",
  scopes: ["publish" as const],
  queues: ["billing"],
  created_at: 1796230500.5,
  expires_at: null,
};

export const createKey = defineRoute({
  method: "post",
  path: "/v1/keys",
  operationId: "createKey",
  tag: "Keys",
  summary: "Make a key",
  description: `Answers the key (\`tq_<id>_<secret>\`) this once: only a SHA-256 of its secret is kept. It works at once on this isolate, and on every other within ${KEYS.revocationSeconds} s. A key may only give the scopes it has, and cannot make one that outlives it. At most ${withCommas(KEYS.max)} keys.`,
  scope: "manage",
  queues: "every",
  audit: ["id", "name", "scopes", "queues", "expires_at"],
  request: {
    body: {
      schema: KeyBody,
      required: true,
      example: { name: "checkout function", scopes: ["publish"], queues: ["billing"], expires_in: 7_776_000 },
    },
  },
  responses: {
    201: {
      description: "Made: keep `key` now, it is not shown again.",
      schema: KeyCreated,
      example: { ...KEY, key: "tq_3f9a1c0e5b7d2a48_8rHwq3Zb0m2xkVdQyE1uJ5nLcT7aPfGs9oWiRt4XhKv" },
    },
  },
  errors: ["KEY_LIMIT"],
});

export const listKeys = defineRoute({
  method: "get",
  path: "/v1/keys",
  operationId: "listKeys",
  tag: "Keys",
  summary: "List the keys",
  description:
    "Every key made through the API, without secrets. Revoked keys are gone; expired ones are listed a day more.",
  scope: "manage",
  queues: "every",
  responses: {
    200: {
      description: "The keys.",
      schema: KeyList,
      example: { keys: [{ ...KEY, created_by: "root", last_used_at: 1796230530.1 }] },
    },
  },
});

export const revokeKey = defineRoute({
  method: "delete",
  path: "/v1/keys/{key_id}",
  operationId: "revokeKey",
  tag: "Keys",
  summary: "Revoke a key",
  description: `It stops working at once on this isolate, and on every other within ${KEYS.revocationSeconds} s.`,
  scope: "manage",
  queues: "every",
  request: { params: KeyPath },
  responses: { 204: { description: "Revoked." } },
  errors: ["NOT_FOUND"],
});

export const whoami = defineRoute({
  method: "get",
  path: "/v1/whoami",
  operationId: "whoami",
  tag: "Keys",
  summary: "The key this request carries",
  description:
    "Who it is and what it may do: any valid key may ask (the dashboard does, to offer only what the key can do).",
  scope: "any",
  queues: "filtered",
  responses: {
    200: {
      description: "The key's grant.",
      schema: WhoAmI,
      example: {
        id: "3f9a1c0e5b7d2a48",
        kind: "key",
        scopes: ["read"],
        queues: ["billing", "tenant-*"],
        expires_at: null,
      },
    },
  },
});

export const listAudit = defineRoute({
  method: "get",
  path: "/v1/audit",
  operationId: "listAudit",
  tag: "Keys",
  summary: "The audit of changes",
  description: `Every \`manage\` action that succeeded (a queue made, changed or deleted, a purge, a redrive, a dead letter deleted, a subscription changed, a key made or revoked), with who did it, when, and on which queue; newest first. The last ${withCommas(AUDIT.retention)} entries are kept.`,
  scope: "manage",
  queues: "every",
  request: { query: AuditQuery },
  responses: {
    200: {
      description: "A page of the audit.",
      schema: AuditPage,
      example: {
        entries: [
          {
            id: 42,
            at: 1796230530.1,
            key_id: "root",
            action: "purge",
            queue: "billing",
            detail: { group_id: "order-42", purged: 3 },
          },
        ],
        next_before: null,
      },
    },
  },
});

export const KEY_ROUTES = [createKey, listKeys, revokeKey, whoami, listAudit] as const;

export const keys = new Hono<AppEnv>();

handle(keys, createKey, async (c) => {
  const body = c.req.valid("json");
  const p = c.var.principal;
  // No key makes a key with more than it has: not a scope it lacks, not a longer life.
  const extra = body.scopes.find((s) => !p.scopes.includes(s));
  if (extra !== undefined) {
    throw new HttpError(403, "FORBIDDEN", `scopes: this key lacks the ${extra} scope, so it cannot give it`);
  }
  if (
    p.expiresAt !== undefined &&
    (body.expires_in === undefined || Date.now() / 1000 + body.expires_in > p.expiresAt)
  ) {
    throw new HttpError(
      403,
      "FORBIDDEN",
      `expires_in: this key expires at ${new Date(p.expiresAt * 1000).toISOString()}, and cannot make one that outlives it`,
    );
  }
  const { key, secret } = await c.var
    .keys()
    .create({ name: body.name, scopes: body.scopes, queues: body.queues, expiresIn: body.expires_in }, p.id);
  const { created_by: _, last_used_at: __, ...shown } = keyToWire(key);
  return c.json({ ...shown, key: secret } satisfies T.KeyCreated, 201);
});

handle(keys, listKeys, async (c) => {
  const all = await c.var.keys().list();
  return c.json({ keys: all.map(keyToWire) } satisfies T.KeyList, 200);
});

handle(keys, revokeKey, async (c) => {
  const { key_id } = c.req.valid("param");
  if (!(await c.var.keys().revoke(key_id))) throw notFound(`key_id: no key ${key_id}`);
  return c.body(null, 204);
});

handle(keys, whoami, (c) => c.json(grantToWire(c.var.principal) satisfies T.WhoAmI, 200));

handle(keys, listAudit, async (c) => {
  const q = c.req.valid("query");
  const page = await c.var.keys().auditPage(q.before, q.limit ?? AUDIT.page.default);
  return c.json(
    { entries: page.entries.map(auditEntryToWire), next_before: page.nextBefore ?? null } satisfies T.AuditPage,
    200,
  );
});
