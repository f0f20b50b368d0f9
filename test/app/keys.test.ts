/**
 * Keys, through the API app in Node over a real sqld with namespaces (the default queue and two named
 * queues, each a database): every route with every scope on an allowed and a forbidden queue (the
 * refused ones change nothing: no row written anywhere); queue restriction by exact name and prefix;
 * the root key and its rotation; keys made, listed, revoked and expired, each within its stated bound;
 * JWTs (HS256, ES256, EdDSA) and every way a forged one is refused; the audit of manage actions; and
 * what the check costs in rows (none for a known key, none for a made-up one).
 */
import { Hono } from "hono";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { billed } from "../../scripts/support/sqld.js";
import { createApp } from "../../src/app/app.js";
import { API_ROUTES } from "../../src/app/routes/index.js";
import { document } from "../../src/app/routes/pages.js";
import { sharedTransports } from "../../src/app/transports.js";
import type * as T from "../../src/contract/types.js";
import { sqldNamespaces } from "../../src/core/databases.js";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { KEYS, SCOPES, type Scope } from "../../src/rules.js";
import {
  ALL_TABLES,
  allowed,
  type Case,
  COUNT_ALL,
  cases,
  expectForbidden,
  FILTERED,
  jwt,
  SCOPE_OF,
} from "../support/keys.js";

const run = Date.now().toString(36);
const BILLING = `k${run}-billing`;
const OTHER = `k${run}-other`;
const PATTERN = `k${run}-bill*`;
const ROOT = "keys-root-token-0123456789abcdef";
const ROOT_NEXT = "keys-next-token-0123456789abcdef";
const JWT_SECRET = "jwt-secret-0123456789abcdef-0123456789";
const NAMESPACES = ["default", BILLING, OTHER];

let env: Record<string, string>;
let es: CryptoKeyPair;
let ed: CryptoKeyPair;
const dbs = new Map<string, LibsqlTransport>();
/** Two apps: two isolates, as far as what each knows of the keys goes. */
const app = createApp(sharedTransports());
const other = createApp(sharedTransports());

interface Sent {
  status: number;
  headers: Headers;
  body: T.ErrorAnswer & Record<string, unknown>;
  text: string;
}

async function call(
  path: string,
  o: { method?: string; token?: string | null; json?: unknown; via?: typeof app } = {},
): Promise<Sent> {
  const headers: Record<string, string> = {};
  const token = o.token === undefined ? ROOT : o.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (o.json !== undefined) headers["content-type"] = "application/json";
  const res = await (o.via ?? app).request(
    path,
    {
      method: o.method ?? (o.json === undefined ? "GET" : "POST"),
      headers,
      body: o.json === undefined ? undefined : JSON.stringify(o.json),
    },
    env,
  );
  const text = await res.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, body: body as Sent["body"], text };
}

async function makeKey(input: T.KeyRequest, token = ROOT): Promise<T.KeyCreated> {
  const res = await call("/v1/keys", { json: input, token });
  expect(res.status, res.text).toBe(201);
  return res.body as unknown as T.KeyCreated;
}

/** Every table's rows in every database, and the rows each has written so far (what Turso bills). */
async function snapshot() {
  const counts: Record<string, number> = {};
  for (const [ns, t] of dbs) {
    const rs = await clientOf(t).execute(COUNT_ALL);
    for (const x of ALL_TABLES) counts[`${ns}.${x}`] = Number((rs.rows[0] as Record<string, unknown>)[x]);
  }
  const written: Record<string, number> = {};
  for (const ns of NAMESPACES) written[ns] = (await billed(inject("nsAdminUrl"), ns)).written;
  return { counts, written };
}

beforeAll(async () => {
  es = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, [
    "sign",
    "verify",
  ])) as CryptoKeyPair;
  ed = (await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as CryptoKeyPair;
  const publicKeys = [
    { ...(await crypto.subtle.exportKey("jwk", es.publicKey)), kid: "es-1" },
    { ...(await crypto.subtle.exportKey("jwk", ed.publicKey)), kid: "ed-1" },
  ];
  env = {
    TURSO_DATABASE_URL: inject("nsSqldUrl"),
    QUEUE_DATABASES: "namespaces",
    SQLD_ADMIN_URL: inject("nsAdminUrl"),
    QUEUE_TOKEN: ROOT,
    QUEUE_TOKEN_NEXT: ROOT_NEXT,
    QUEUE_JWT_SECRET: JWT_SECRET,
    QUEUE_JWT_PUBLIC_KEYS: JSON.stringify({ keys: publicKeys }),
  };
  const provider = sqldNamespaces({ url: inject("nsSqldUrl"), adminUrl: inject("nsAdminUrl") });
  await provider.create("default");
  const home = await LibsqlTransport.create(inject("nsSqldUrl"), { namespace: "default" });
  dbs.set("default", home);
  await clientOf(home).batch(["DELETE FROM tq_keys", "DELETE FROM tq_audit"], "write");
  for (const q of [BILLING, OTHER]) {
    expect((await call(`/v1/queues/${q}`, { method: "PUT", json: {} })).status).toBe(201);
    dbs.set(q, await LibsqlTransport.create(inject("nsSqldUrl"), { namespace: q }));
  }
  // Never empty: a deleteQueue the matrix allows is refused (409), and every queue stays.
  for (const path of ["/v1", `/v1/queues/${BILLING}`, `/v1/queues/${OTHER}`]) {
    expect((await call(`${path}/groups/keep/messages`, { json: { event: "keep" } })).status).toBe(201);
  }
});

afterAll(async () => {
  for (const q of [BILLING, OTHER]) await call(`/v1/queues/${q}?force=true`, { method: "DELETE" });
  for (const t of dbs.values()) t.close();
});

afterEach(() => {
  vi.useRealTimers();
});

/**
 * Moves this process's clock (Date only: timers stay real) `seconds` on; past the revocation bound,
 * both apps ask the key store again at their next key.
 */
let lastLater = 0;
function later(seconds: number): number {
  // Never back: what an app learned at a moment stays in its past.
  const to = Math.max(Date.now(), lastLater) + seconds * 1000;
  lastLater = to;
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(to);
  return to;
}
const BOUND = KEYS.revocationSeconds;

describe("scopes, declared with each route", () => {
  it("every route declares the scope the issue gives it, and the OpenAPI document says it per operation", () => {
    for (const route of API_ROUTES) {
      expect(route.scope, route.operationId).toBe(SCOPE_OF[route.operationId]);
      expect(route.queues === "filtered", route.operationId).toBe(FILTERED.has(route.operationId));
    }
    expect(Object.keys(SCOPE_OF).sort()).toEqual(API_ROUTES.map((r) => r.operationId).sort());
    const paths = document().paths as Record<string, Record<string, { operationId: string; security: unknown }>>;
    let seen = 0;
    for (const ops of Object.values(paths)) {
      for (const op of Object.values(ops)) {
        const scope = SCOPE_OF[op.operationId.replace(/InQueue$/, "")];
        if (scope === undefined) continue;
        seen++;
        expect(op.security, op.operationId).toEqual([{ bearer: scope === "any" ? [] : [scope] }]);
      }
    }
    expect(seen).toBeGreaterThan(API_ROUTES.length);
  });
});

describe("the matrix: every route, every scope, an allowed and a forbidden queue", () => {
  /** Sends every case with `token`; the refused ones first, all at once, checked to have written nothing. */
  async function runMatrix(token: string, scopes: Scope[], keyQueues: string[] | undefined, list: Case[]) {
    const refused = list.filter((c) => !allowed(c, scopes, keyQueues));
    // Any key may ask who it is: this one syncs what the app knows of the keys (and writes the last
    // uses it had to report) before the snapshot; the clock then stands still, so no sync falls in.
    expect((await call("/v1/whoami", { token })).status).toBe(200);
    vi.useFakeTimers({ toFake: ["Date"] });
    const before = await snapshot();
    for (const c of refused) {
      const res = await call(c.path, { method: c.method, token, json: c.body });
      expectForbidden(c, `${c.method} ${c.path} with ${scopes.join("+")}`, res);
    }
    expect(await snapshot()).toEqual(before);
    vi.useRealTimers();
    for (const c of list.filter((x) => allowed(x, scopes, keyQueues))) {
      const res = await call(c.path, { method: c.method, token, json: c.body });
      expect([401, 403], `${c.method} ${c.path} with ${scopes.join("+")}: ${res.text}`).not.toContain(res.status);
    }
    return refused.length;
  }

  for (const scope of SCOPES) {
    it(`a ${scope} key limited to "${"k…-bill*"}": allowed on its queue, 403 on the default one and another, storing nothing`, async () => {
      const key = await makeKey({ name: `matrix ${scope}`, scopes: [scope], queues: [PATTERN] });
      const refused = await runMatrix(key.key, [scope], [PATTERN], cases(["default", BILLING, OTHER]));
      expect(refused).toBeGreaterThan(40);
    });

    it(`an unlimited ${scope} key on the routes about no one queue`, async () => {
      const key = await makeKey({ name: `matrix ${scope} everywhere`, scopes: [scope] });
      await runMatrix(
        key.key,
        [scope],
        undefined,
        cases([]).filter((c) => c.queue === undefined),
      );
    });
  }

  it("a JWT with scopes and queues is held to them the same way", async () => {
    const token = await jwt(
      { scopes: ["read", "publish"], queues: [BILLING], aud: "turso-queue", exp: Date.now() / 1000 + 600, sub: "fn" },
      { secret: JWT_SECRET },
    );
    await runMatrix(token, ["read", "publish"], [BILLING], cases(["default", BILLING, OTHER]));
  });
});

describe("mounted in another app", () => {
  it("under a prefix, in a Hono app of the user's, a key is held to the same scopes: every refusal a 403, nothing stored", async () => {
    // The user's app wraps each of ours (ours has its own error handler): the check must still find each route.
    const outer = new Hono();
    outer.route("/queue", createApp(sharedTransports()));
    const via = outer as unknown as typeof app;
    const key = await makeKey({ name: "mounted read", scopes: ["read"], queues: [PATTERN] });
    const refused = cases(["default", BILLING, OTHER]).filter((c) => !allowed(c, ["read"], [PATTERN]));
    expect(refused.length).toBeGreaterThan(40);
    expect((await call("/queue/v1/whoami", { token: key.key, via })).status).toBe(200);
    vi.useFakeTimers({ toFake: ["Date"] });
    const before = await snapshot();
    for (const c of refused) {
      const res = await call(`/queue${c.path}`, { method: c.method, token: key.key, json: c.body, via });
      expectForbidden(c, `mounted: ${c.method} ${c.path}`, res);
    }
    expect(await snapshot()).toEqual(before);
    vi.useRealTimers();
    expect((await call(`/queue/v1/queues/${BILLING}/stats`, { token: key.key, via })).status).toBe(200);
  });
});

describe("queue restriction", () => {
  it("a key limited to some queues sees only those in GET /v1/queues and /metrics", async () => {
    const key = await makeKey({ name: "reader", scopes: ["read"], queues: [PATTERN] });
    const list = await call("/v1/queues", { token: key.key });
    expect((list.body as unknown as T.QueueList).queues.map((q) => q.name)).toEqual([BILLING]);
    const metrics = await call("/metrics", { token: key.key });
    expect(metrics.status).toBe(200);
    expect(metrics.text).toContain(`queue="${BILLING}"`);
    expect(metrics.text).not.toContain(`queue="${OTHER}"`);
    expect(metrics.text).not.toContain('queue="default"');
    // The root key sees them all.
    const all = await call("/v1/queues");
    expect((all.body as unknown as T.QueueList).queues.map((q) => q.name)).toEqual(
      expect.arrayContaining(["default", BILLING, OTHER]),
    );
  });

  it("a manage key limited to a prefix may make a queue under it, and not elsewhere", async () => {
    const key = await makeKey({ name: "tenant admin", scopes: ["manage"], queues: [`k${run}-t*`] });
    const made = await call(`/v1/queues/k${run}-t1`, { method: "PUT", json: {}, token: key.key });
    expect(made.status).toBe(201);
    const refused = await call(`/v1/queues/k${run}-u1`, { method: "PUT", json: {}, token: key.key });
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toBe(
      `this key has the manage scope, but not on queue k${run}-u1 (it is limited to k${run}-t*)`,
    );
    expect((await call(`/v1/queues/k${run}-u1`)).status).toBe(404);
    expect((await call(`/v1/queues/k${run}-t1`, { method: "DELETE", token: key.key })).status).toBe(204);
  });
});

describe("refusals: 401 for a token that is not a valid key, nothing stored", () => {
  const publish = (token: string | null, raw?: string) =>
    app.request(
      "/v1/groups/g/messages",
      {
        method: "POST",
        headers: {
          ...(raw !== undefined ? { authorization: raw } : token === null ? {} : { authorization: `Bearer ${token}` }),
          "content-type": "application/json",
        },
        body: JSON.stringify({ event: 1 }),
      },
      env,
    );

  it("missing, malformed, unknown, forged, revoked", async () => {
    const real = await makeKey({ name: "to forge", scopes: ["publish"] });
    const revoked = await makeKey({ name: "to revoke", scopes: ["publish"] });
    expect((await publish(revoked.key)).status).toBe(201);
    expect((await call(`/v1/keys/${revoked.id}`, { method: "DELETE" })).status).toBe(204);
    const secret = real.key.slice(-43);
    const forged = [
      `tq_${real.id}_${secret.slice(0, -1)}${secret.endsWith("A") ? "B" : "A"}`,
      `tq_${"0".repeat(16)}_${secret}`,
      `tq_${real.id}_${"x".repeat(43)}`,
      revoked.key,
      `${ROOT}x`,
      ROOT.slice(0, -1),
    ];
    const before = await snapshot();
    const missing = await publish(null);
    expect(missing.status).toBe(401);
    expect(missing.headers.get("www-authenticate")).toBe('Bearer realm="turso-queue"');
    const malformed = await publish(null, "Basic abc");
    expect(malformed.status).toBe(401);
    for (const token of forged) {
      const res = await publish(token);
      expect(res.status, token).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe('Bearer realm="turso-queue", error="invalid_token"');
      const text = await res.text();
      // Never the token, nor a hint of which part was right.
      expect(text).not.toContain(token);
      expect(text).not.toContain(real.id);
    }
    expect(await snapshot()).toEqual(before);
    expect((await publish(real.key)).status).toBe(201);
  });

  it("the root key and, during a rotation, the next one; no other", async () => {
    expect((await publish(ROOT)).status).toBe(201);
    expect((await publish(ROOT_NEXT)).status).toBe(201);
    const who = await call("/v1/whoami", { token: ROOT_NEXT });
    expect(who.body).toMatchObject({ id: "root:next", kind: "root", scopes: [...SCOPES], queues: null });
    const rotated = { ...env, QUEUE_TOKEN: ROOT_NEXT, QUEUE_TOKEN_NEXT: "" };
    const after = await app.request("/v1/stats", { headers: { authorization: `Bearer ${ROOT}` } }, rotated);
    expect(after.status).toBe(401);
  });

  it("JWTs: HS256, ES256 and EdDSA verify; a wrong signature, alg none, expired, wrong audience or tampered claims do not", async () => {
    const claims = {
      scopes: ["publish"],
      aud: "turso-queue",
      exp: Math.floor(Date.now() / 1000) + 300,
      sub: "browser",
    };
    const good = [
      await jwt(claims, { secret: JWT_SECRET }),
      await jwt(claims, { alg: "ES256", privateKey: es.privateKey, kid: "es-1" }),
      await jwt(claims, { alg: "EdDSA", privateKey: ed.privateKey, kid: "ed-1" }),
      await jwt({ ...claims, aud: ["other", "turso-queue"] }, { secret: JWT_SECRET }),
    ];
    for (const token of good) expect((await publish(token)).status, token).toBe(201);
    const other = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, [
      "sign",
    ])) as CryptoKeyPair;
    const [h, p, s] = (good[0] as string).split(".") as [string, string, string];
    const tamperedPayload = btoa(JSON.stringify({ ...claims, scopes: ["publish", "manage"] }))
      .replaceAll("+", "-")
      .replaceAll("/", "_")
      .replace(/=+$/, "");
    const noneHeader = btoa(JSON.stringify({ alg: "none", typ: "JWT" })).replace(/=+$/, "");
    const bad: Array<[string, string, RegExp]> = [
      ["wrong secret", await jwt(claims, { secret: `${JWT_SECRET}-not` }), /signature does not verify/],
      ["wrong key", await jwt(claims, { alg: "ES256", privateKey: other.privateKey }), /signature does not verify/],
      ["alg none", `${noneHeader}.${p}.`, /alg none/],
      ["alg none, signature kept", `${noneHeader}.${p}.${s}`, /alg none|not accepted/],
      [
        "HS256 signed with the public key's text",
        await jwt(claims, { secret: JSON.stringify(await crypto.subtle.exportKey("jwk", es.publicKey)) }),
        /signature does not verify/,
      ],
      ["expired", await jwt({ ...claims, exp: Math.floor(Date.now() / 1000) - 1 }, { secret: JWT_SECRET }), /expired/],
      ["no exp", await jwt({ ...claims, exp: undefined }, { secret: JWT_SECRET }), /no exp/],
      ["wrong audience", await jwt({ ...claims, aud: "someone-else" }, { secret: JWT_SECRET }), /aud/],
      ["no audience", await jwt({ ...claims, aud: undefined }, { secret: JWT_SECRET }), /aud/],
      ["tampered claims", `${h}.${tamperedPayload}.${s}`, /signature does not verify/],
      ["unknown scope", await jwt({ ...claims, scopes: ["admin"] }, { secret: JWT_SECRET }), /scopes/],
      ["not yet valid", await jwt({ ...claims, nbf: Date.now() / 1000 + 60 }, { secret: JWT_SECRET }), /nbf/],
    ];
    const before = await snapshot();
    for (const [what, token, why] of bad) {
      const res = await publish(token);
      expect(res.status, what).toBe(401);
      const body = (await res.json()) as T.ErrorAnswer;
      expect(body.error.code).toBe("UNAUTHORIZED");
      expect(body.error.message, what).toMatch(why);
      expect(body.error.message).not.toContain(token);
    }
    expect(await snapshot()).toEqual(before);
    // A valid token without the scope: 403, not 401.
    const reader = await jwt({ ...claims, scopes: ["read"] }, { secret: JWT_SECRET });
    expect((await publish(reader)).status).toBe(403);
  });
});

describe("keys through the API", () => {
  it("made with the secret shown once, listed without it, stored as a hash only", async () => {
    const made = await makeKey({ name: "checkout", scopes: ["publish"], queues: [BILLING], expires_in: 3600 });
    expect(made.key).toMatch(/^tq_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
    expect(made.key.slice(3, 19)).toBe(made.id);
    expect(made).toMatchObject({ name: "checkout", scopes: ["publish"], queues: [BILLING] });
    expect((made.expires_at as number) - made.created_at).toBeCloseTo(3600, 0);
    const list = (await call("/v1/keys")).body as unknown as T.KeyList;
    const listed = list.keys.find((k) => k.id === made.id);
    expect(listed).toMatchObject({ name: "checkout", created_by: "root", last_used_at: null });
    expect(JSON.stringify(list)).not.toContain(made.key.slice(20));
    const rows = await clientOf(dbs.get("default") as LibsqlTransport).execute({
      sql: "SELECT * FROM tq_keys WHERE id = ?",
      args: [made.id],
    });
    expect(JSON.stringify(rows.rows)).not.toContain(made.key.slice(20));
  });

  it("bad input is a 400 naming the field; a key cannot give more than it has", async () => {
    const cases: Array<[unknown, string]> = [
      [{ scopes: ["publish"] }, "name: is required"],
      [{ name: "x", scopes: [] }, "scopes: must list 1 to 4"],
      [{ name: "x", scopes: ["admin"] }, "scopes[0]: must be one of publish, consume, read, manage"],
      [{ name: "x", scopes: ["read", "read"] }, "scopes: must not repeat a scope"],
      [{ name: "x", scopes: ["read"], queues: ["Bad"] }, "queues[0]: must be a queue name or a prefix"],
      [{ name: "x", scopes: ["read"], expires_in: 0 }, "expires_in: must be an integer from 1"],
    ];
    const before = await snapshot();
    for (const [json, message] of cases) {
      const res = await call("/v1/keys", { json });
      expect(res.status, JSON.stringify(json)).toBe(400);
      expect(res.body.error.message).toContain(message);
    }
    expect(await snapshot()).toEqual(before);
    const admin = await makeKey({ name: "admin", scopes: ["manage"] });
    // As in the matrix: synced first, then the clock stands still (no sync writes a last use meanwhile).
    expect((await call("/v1/whoami", { token: admin.key })).status).toBe(200);
    vi.useFakeTimers({ toFake: ["Date"] });
    const unchanged = await snapshot();
    const escalate = await call("/v1/keys", { json: { name: "more", scopes: ["publish"] }, token: admin.key });
    expect(escalate.status).toBe(403);
    expect(escalate.body.error.message).toContain("lacks the publish scope");
    const short = await jwt(
      { scopes: ["manage", "publish"], aud: "turso-queue", exp: Math.floor(Date.now() / 1000) + 60 },
      { secret: JWT_SECRET },
    );
    const outlive = await call("/v1/keys", { json: { name: "forever", scopes: ["publish"] }, token: short });
    expect(outlive.status).toBe(403);
    expect(outlive.body.error.message).toContain("cannot make one that outlives it");
    expect(await snapshot()).toEqual(unchanged);
  });

  it(`a key revoked through one isolate stops working on another within ${BOUND} s, and at once on the first`, async () => {
    const key = await makeKey({ name: "to revoke", scopes: ["read"] });
    const t0 = later(BOUND);
    expect((await call("/v1/stats", { token: key.key, via: other })).status).toBe(200);
    expect((await call(`/v1/keys/${key.id}`, { method: "DELETE" })).status).toBe(204);
    // The isolate that revoked it refuses it at once.
    expect((await call("/v1/stats", { token: key.key })).status).toBe(401);
    // The other one trusts what it knows for at most the bound (no read per request)...
    vi.setSystemTime(t0 + BOUND * 1000 - 1);
    expect((await call("/v1/stats", { token: key.key, via: other })).status).toBe(200);
    // ...and then refuses it.
    vi.setSystemTime(t0 + BOUND * 1000);
    const refused = await call("/v1/stats", { token: key.key, via: other });
    expect(refused.status).toBe(401);
    expect(refused.body.error.message).toBe("Authorization: unknown or revoked key");
  });

  it("a key that expires stops working at its expiry on every isolate, with no read to find out", async () => {
    const key = await makeKey({ name: "short", scopes: ["read"], expires_in: 30 });
    const expiresAt = (key.expires_at as number) * 1000;
    later(BOUND);
    vi.setSystemTime(expiresAt - 1000);
    expect((await call("/v1/stats", { token: key.key, via: other })).status).toBe(200);
    expect((await call("/v1/stats", { token: key.key })).status).toBe(200);
    vi.setSystemTime(expiresAt);
    for (const via of [app, other]) {
      const res = await call("/v1/stats", { token: key.key, via });
      expect(res.status).toBe(401);
      expect(res.body.error.message).toMatch(/^Authorization: the key expired at /);
    }
  });

  it("a new key works at once on the isolate that made it, and on every other within the bound", async () => {
    const key = await makeKey({ name: "fresh", scopes: ["read"] });
    expect((await call("/v1/stats", { token: key.key })).status).toBe(200);
    later(BOUND);
    const r = await call("/v1/stats", { token: key.key, via: other });
    expect(r.status, r.text).toBe(200);
  });

  it("records when a key was last used (to within a minute)", async () => {
    const key = await makeKey({ name: "used", scopes: ["read"] });
    later(BOUND);
    expect((await call("/v1/stats", { token: key.key, via: other })).status).toBe(200);
    // The use is reported at the isolate's next sync.
    later(BOUND);
    expect((await call("/v1/stats", { token: key.key, via: other })).status).toBe(200);
    vi.useRealTimers();
    const listed = ((await call("/v1/keys")).body as unknown as T.KeyList).keys.find((k) => k.id === key.id);
    expect(listed?.last_used_at).toEqual(expect.any(Number));
  });
});

describe("the audit", () => {
  it("records every manage action that succeeded, with who, when, what and on which queue; pages newest first", async () => {
    const admin = await makeKey({ name: "auditor", scopes: ["manage", "publish"] });
    const start = Date.now() / 1000 - 5;
    await call(`/v1/queues/${BILLING}/groups/audited/messages`, { json: { event: 1 }, token: admin.key });
    expect(
      (await call(`/v1/queues/${BILLING}/groups/audited/messages`, { method: "DELETE", token: admin.key })).status,
    ).toBe(200);
    expect(
      (
        await call(`/v1/queues/${BILLING}/subscriptions/audited`, {
          method: "PUT",
          json: { url: "http://127.0.0.1:9/x" },
          token: admin.key,
        })
      ).status,
    ).toBe(200);
    expect(
      (await call(`/v1/queues/${BILLING}/subscriptions/audited`, { method: "DELETE", token: admin.key })).status,
    ).toBe(204);
    const made = await makeKey({ name: "audited key", scopes: ["publish"] }, admin.key);
    expect((await call(`/v1/keys/${made.id}`, { method: "DELETE", token: admin.key })).status).toBe(204);
    // Refused and failed actions are not recorded.
    expect(
      (await call(`/v1/queues/${BILLING}/dead-letters/999999`, { method: "DELETE", token: admin.key })).status,
    ).toBe(404);

    const page = (await call("/v1/audit?limit=6")).body as unknown as T.AuditPage;
    expect(page.entries.slice(0, 5).map((e) => [e.action, e.queue, e.key_id])).toEqual([
      ["revokeKey", null, admin.id],
      ["createKey", null, admin.id],
      ["deleteSubscription", BILLING, admin.id],
      ["putSubscription", BILLING, admin.id],
      ["purge", BILLING, admin.id],
    ]);
    expect(page.entries).toHaveLength(6);
    const [revoked, created, , put, purged] = page.entries;
    expect(revoked?.detail).toEqual({ key_id: made.id });
    expect(created?.detail).toEqual({
      id: made.id,
      name: "audited key",
      scopes: ["publish"],
      queues: null,
      expires_at: null,
    });
    expect(put?.detail).toEqual({ name: "audited", url: "http://127.0.0.1:9/x" });
    expect(purged?.detail).toEqual({ group_id: "audited", purged: 1 });
    for (const e of page.entries.slice(0, 5)) expect(e.at).toBeGreaterThan(start);
    // No secret in the audit: not the key's, not the subscription's.
    expect(JSON.stringify(page)).not.toContain(made.key.slice(20));
    expect(JSON.stringify(page)).not.toContain("signing_secret");
    const next = (await call(`/v1/audit?limit=6&before=${page.next_before}`)).body as unknown as T.AuditPage;
    expect(next.entries[0]?.id).toBeLessThan(page.entries.at(-1)?.id as number);
  });
});

describe("what the check costs (rows Turso bills)", () => {
  it("a known key reads no more rows than the root key; made-up and forged keys read none", async () => {
    const key = await makeKey({ name: "cost", scopes: ["read", "publish"] });
    // Frozen: no sync falls in the measurement. Warm: this isolate learns the keys (one read of the key table per bound, not per request).
    vi.useFakeTimers({ toFake: ["Date"] });
    expect((await call("/v1/stats", { token: key.key })).status).toBe(200);
    const admin = inject("nsAdminUrl");
    const read = async (token: string, n: number) => {
      const before = await billed(admin, "default");
      for (let i = 0; i < n; i++) expect((await call("/v1/stats", { token })).status).toBe(200);
      const after = await billed(admin, "default");
      return { read: after.read - before.read, written: after.written - before.written };
    };
    const root = await read(ROOT, 10);
    expect(await read(key.key, 10)).toEqual(root);

    const before = await billed(admin, "default");
    const secret = key.key.slice(-43);
    for (let i = 0; i < 50; i++) {
      const madeUp = `tq_${i.toString(16).padStart(16, "0")}_${secret}`;
      const forged = `tq_${key.id}_${secret.slice(0, 40)}${i.toString().padStart(3, "0")}`;
      for (const token of [madeUp, forged]) expect((await call("/v1/stats", { token })).status).toBe(401);
    }
    const after = await billed(admin, "default");
    expect({ read: after.read - before.read, written: after.written - before.written }).toEqual({
      read: 0,
      written: 0,
    });
  });
});
