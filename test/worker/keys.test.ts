/**
 * Keys through the Worker inside workerd, as deployed: the edge checks every request (the keys made
 * through the API it learns from the default queue's writer, by RPC) and the QueueWriters serve them.
 * Every route with every scope on an allowed and a forbidden named queue (a refused request changes
 * nothing in any database); revocation by another isolate and expiry within their bound; forged keys
 * and JWTs refused; a made-up key costs no request to the database; the audit, recorded at the edge.
 */
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createApp } from "../../src/app/app.js";
import type { KeyCall } from "../../src/app/key-port.js";
import { perRequestTransports } from "../../src/app/transports.js";
import type { Outcome } from "../../src/app/writer/calls.js";
import type * as T from "../../src/contract/types.js";
import { KEYS, SCOPES, type Scope } from "../../src/rules.js";
import { allowed, type Case, COUNT_ALL, cases, expectForbidden, jwt } from "../support/keys.js";
import { waitFor } from "../support/wait.js";
import { TEST_ED25519, TEST_JWT_SECRET, TEST_TOKEN, TEST_TOKEN_NEXT } from "./constants.js";
import { api, db, resetDatabase, sqldRequests, withoutQueues, writer } from "./support.js";

/** Text only the read of every key carries (src/core/sql/keys.ts, listKeysPlan). */
const KEY_READS = "FROM tq_keys ORDER BY created_at";

/** Every table's rows in the default queue's database and in the named queues' ones. */
async function snapshot(): Promise<Record<string, unknown>> {
  const client = db();
  const out: Record<string, unknown> = { default: { ...(await client.execute(COUNT_ALL)).rows[0] } };
  client.close();
  const map = JSON.parse(inject("workerQueueDatabases")) as Record<string, { url: string; namespace: string }>;
  for (const name of ["emails", "orders"]) {
    const d = map[name] as { url: string; namespace: string };
    const res = await fetch(`${d.url}/v2/pipeline`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-namespace-bin": btoa(d.namespace).replace(/=+$/, "") },
      body: JSON.stringify({ requests: [{ type: "execute", stmt: { sql: COUNT_ALL } }, { type: "close" }] }),
    });
    const body = (await res.json()) as {
      results: Array<{ response: { result: { rows: Array<Array<{ value: string }>> } } }>;
    };
    out[name] = body.results[0]?.response.result.rows[0]?.map((v) => v.value);
  }
  return out;
}

async function makeKey(input: T.KeyRequest): Promise<T.KeyCreated> {
  const res = await api<T.KeyCreated>("/v1/keys", { method: "POST", json: input });
  expect(res.status, res.text).toBe(201);
  return res.body;
}

/** The default queue's writer's key store, as another isolate's edge reaches it. */
const keysRpc = (call: KeyCall) => (writer() as unknown as { keys(c: KeyCall): Promise<Outcome<unknown>> }).keys(call);

beforeAll(async () => {
  await resetDatabase();
  const client = db();
  await client.batch(["DELETE FROM tq_keys", "DELETE FROM tq_audit"], "write");
  client.close();
});
withoutQueues("emails", "orders");
beforeAll(async () => {
  for (const q of ["emails", "orders"]) {
    expect((await api(`/v1/queues/${q}`, { method: "PUT", json: {} })).status).toBe(201);
  }
  for (const path of ["/v1", "/v1/queues/emails", "/v1/queues/orders"]) {
    expect((await api(`${path}/groups/keep/messages`, { method: "POST", json: { event: "keep" } })).status).toBe(201);
  }
});
afterAll(async () => {
  // What the matrix subscribed (to a closed port) would keep the writers trying.
  for (const path of ["/v1", "/v1/queues/emails", "/v1/queues/orders"]) {
    await api(`${path}/subscriptions/sub`, { method: "DELETE" });
  }
});

describe("the matrix through the edge and the writers", () => {
  async function runMatrix(token: string, scopes: Scope[], keyQueues: string[] | undefined, list: Case[]) {
    const before = await snapshot();
    for (const c of list.filter((x) => !allowed(x, scopes, keyQueues))) {
      const res = await api(c.path, { method: c.method, token, json: c.body });
      expectForbidden(c, `${c.method} ${c.path} with ${scopes.join("+")}`, res);
    }
    // A refused request changes nothing, in any database (a key's last use is stamped only for requests it may make).
    expect(await snapshot()).toEqual(before);
    for (const c of list.filter((x) => allowed(x, scopes, keyQueues))) {
      const res = await api(c.path, { method: c.method, token, json: c.body });
      expect([401, 403], `${c.method} ${c.path} with ${scopes.join("+")}: ${res.text}`).not.toContain(res.status);
    }
  }

  for (const scope of SCOPES) {
    it(`a ${scope} key limited to "email*"`, async () => {
      const key = await makeKey({ name: `matrix ${scope}`, scopes: [scope], queues: ["email*"] });
      await runMatrix(key.key, [scope], ["email*"], cases(["default", "emails", "orders"]));
      const everywhere = await makeKey({ name: `matrix ${scope} everywhere`, scopes: [scope] });
      await runMatrix(
        everywhere.key,
        [scope],
        undefined,
        cases([]).filter((c) => c.queue === undefined),
      );
    });
  }

  it("an EdDSA JWT limited to one queue is held to it the same way", async () => {
    const privateKey = await crypto.subtle.importKey("jwk", TEST_ED25519.private, { name: "Ed25519" }, false, ["sign"]);
    const token = await jwt(
      { scopes: ["consume", "read"], queues: ["emails"], aud: "turso-queue", exp: Date.now() / 1000 + 600 },
      { alg: "EdDSA", privateKey, kid: "test-ed" },
    );
    await runMatrix(token, ["consume", "read"], ["emails"], cases(["default", "emails", "orders"]));
  });
});

describe("keys at the edge", () => {
  it("a limited key sees only its queues in the list and /metrics, and says who it is (forwarded to the writer)", async () => {
    const key = await makeKey({ name: "prometheus", scopes: ["read"], queues: ["emails"] });
    const list = await api<T.QueueList>("/v1/queues", { token: key.key });
    expect(list.body.queues.map((q) => q.name)).toEqual(["emails"]);
    const metrics = await api("/metrics", { token: key.key });
    expect(metrics.status).toBe(200);
    expect(metrics.text).toContain('queue="emails"');
    expect(metrics.text).not.toMatch(/queue="(default|orders)"/);
    const who = await api<T.WhoAmI>("/v1/whoami", { token: key.key });
    expect(who.body).toEqual({ id: key.id, kind: "key", scopes: ["read"], queues: ["emails"], expires_at: null });
    // A client cannot name itself someone else to the writer.
    const spoofed = await api<T.QueueList>("/v1/queues", {
      token: key.key,
      headers: { "x-tq-principal": JSON.stringify({ id: "root", kind: "root", scopes: SCOPES, queues: null }) },
    });
    expect(spoofed.body.queues.map((q) => q.name)).toEqual(["emails"]);
  });

  it("the next root key is accepted during a rotation", async () => {
    const who = await api<T.WhoAmI>("/v1/whoami", { token: TEST_TOKEN_NEXT });
    expect(who.body).toMatchObject({ id: "root:next", kind: "root" });
  });

  it("forged keys and JWTs are 401, storing nothing", async () => {
    const real = await makeKey({ name: "real", scopes: ["publish"] });
    const secret = real.key.slice(-43);
    const claims = { scopes: ["publish"], aud: "turso-queue", exp: Math.floor(Date.now() / 1000) + 60 };
    const good = await jwt(claims, { secret: TEST_JWT_SECRET });
    const [h, p] = good.split(".") as [string, string];
    const none = `${btoa(JSON.stringify({ alg: "none" })).replace(/=+$/, "")}.${p}.`;
    const forged = [
      `tq_${real.id}_${"A".repeat(43)}`,
      `tq_${"f".repeat(16)}_${secret}`,
      await jwt(claims, { secret: `${TEST_JWT_SECRET}!` }),
      none,
      await jwt({ ...claims, exp: Math.floor(Date.now() / 1000) - 1 }, { secret: TEST_JWT_SECRET }),
      await jwt({ ...claims, aud: "elsewhere" }, { secret: TEST_JWT_SECRET }),
      `${h}.${btoa(JSON.stringify({ ...claims, scopes: ["manage"] })).replace(/=+$/, "")}.${good.split(".")[2]}`,
    ];
    const before = await snapshot();
    for (const token of forged) {
      const res = await api("/v1/groups/g/messages", { method: "POST", json: { event: 1 }, token });
      expect(res.status, token).toBe(401);
      expect(res.headers.get("www-authenticate")).toContain('error="invalid_token"');
    }
    expect(await snapshot()).toEqual(before);
    expect((await api("/v1/groups/g/messages", { method: "POST", json: { event: 1 }, token: good })).status).toBe(201);
    expect((await api("/v1/groups/g/messages", { method: "POST", json: { event: 1 }, token: real.key })).status).toBe(
      201,
    );
  });

  it("made-up and forged keys cost no request to the database; a known key none beyond its route's", async () => {
    const key = await makeKey({ name: "counted", scopes: ["read"] });
    expect((await api("/v1/stats", { token: key.key })).status).toBe(200);
    await sqldRequests(KEY_READS);
    const before = await sqldRequests(KEY_READS);
    const secret = key.key.slice(-43);
    for (let i = 0; i < 20; i++) {
      for (const token of [
        `tq_${i.toString(16).padStart(16, "0")}_${secret}`,
        `tq_${key.id}_${"B".repeat(40)}${i + 100}`,
      ]) {
        expect((await api("/v1/stats", { token })).status).toBe(401);
      }
      expect((await api("/v1/stats", { token: key.key })).status).toBe(200);
    }
    // The writer answers the edge's syncs from what it read: no request to the database about keys.
    expect(await sqldRequests(KEY_READS)).toBe(before);
  });

  it(`a key revoked by another isolate stops working here within ${KEYS.revocationSeconds} s`, async () => {
    const key = await makeKey({ name: "revoked elsewhere", scopes: ["read"] });
    expect((await api("/v1/stats", { token: key.key })).status).toBe(200);
    // Another isolate's edge revokes it through the writer: this isolate's edge is not told.
    const revokedAt = Date.now();
    expect(await keysRpc({ op: "revoke", id: key.id })).toEqual({ ok: true });
    await waitFor(async () => (await api("/v1/stats", { token: key.key })).status === 401, {
      what: "the revoked key refused",
      timeoutMs: (KEYS.revocationSeconds + 5) * 1000,
    });
    expect(Date.now() - revokedAt).toBeLessThanOrEqual((KEYS.revocationSeconds + 1) * 1000);
  });

  it("a key that expires is refused from its expiry, with no read to find out", async () => {
    const key = await makeKey({ name: "short-lived", scopes: ["read"], expires_in: 2 });
    expect((await api("/v1/stats", { token: key.key })).status).toBe(200);
    const requests = await sqldRequests(KEY_READS);
    await waitFor(async () => (await api("/v1/stats", { token: key.key })).status === 401, {
      what: "the expired key refused",
      timeoutMs: 10_000,
    });
    expect(Date.now() / 1000).toBeGreaterThanOrEqual(key.expires_at as number);
    expect(Date.now() / 1000).toBeLessThanOrEqual((key.expires_at as number) + 1);
    const res = await api("/v1/stats", { token: key.key });
    expect(res.body.error.message).toMatch(/^Authorization: the key expired at /);
    expect(await sqldRequests(KEY_READS)).toBe(requests);
  });

  it("audits manage actions on named queues at the edge, with the key that did them", async () => {
    const admin = await makeKey({ name: "ops", scopes: ["manage", "publish"] });
    await api("/v1/queues/emails/groups/purged/messages", { method: "POST", json: { event: 1 }, token: admin.key });
    const purge = await api("/v1/queues/emails/groups/purged/messages", { method: "DELETE", token: admin.key });
    expect(purge.status).toBe(200);
    const page = await api<T.AuditPage>("/v1/audit?limit=1");
    expect(page.body.entries[0]).toMatchObject({
      key_id: admin.id,
      action: "purge",
      queue: "emails",
      detail: { group_id: "purged", purged: 1 },
    });
    const listed = await api<T.KeyList>("/v1/keys");
    expect(listed.body.keys.find((k) => k.id === admin.id)).toMatchObject({ name: "ops", created_by: "root" });
    expect(env.QUEUE_WRITER).toBeDefined();
  });
});

describe("without the Durable Object", () => {
  it("the same checks; the keys read from the database at most once per bound, never per request", async () => {
    const app = createApp(perRequestTransports());
    const call = (path: string, token: string, json?: unknown) =>
      app.request(
        path,
        {
          method: json === undefined ? "GET" : "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: json === undefined ? undefined : JSON.stringify(json),
        },
        env,
      );
    const made = (await (
      await call("/v1/keys", TEST_TOKEN, { name: "standalone", scopes: ["publish"] })
    ).json()) as T.KeyCreated;
    expect((await call("/v1/groups/g/messages", made.key, { event: 1 })).status).toBe(201);
    const refused = await call("/v1/stats", made.key);
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as T.ErrorAnswer).error.message).toBe(
      "this key lacks the read scope on queue default (it has publish)",
    );
    const reads = await sqldRequests(KEY_READS);
    for (let i = 0; i < 10; i++) {
      expect(
        (await call("/v1/groups/g/messages", `tq_${"e".repeat(16)}_${made.key.slice(-43)}`, { event: i })).status,
      ).toBe(401);
    }
    expect(await sqldRequests(KEY_READS)).toBe(reads);
  });
});
