/**
 * Property: hostile input to any route is a 4xx JSON error, never a 5xx, and stores nothing.
 * Every generated request is invalid by construction (bad type, bad JSON, bad field, bad id, too
 * large, unknown route), so the database must stay empty throughout.
 */
import fc from "fast-check";
import { beforeAll, expect, it } from "vitest";
import { MAX_CLAIM_ACKS } from "../../src/rules.js";
import { api, EMPTY, resetDatabase, rowCounts } from "./support.js";

beforeAll(resetDatabase);

const LEASE = "1.0123456789abcdef0123456789abcdef";
const JSON_TYPE = { "content-type": "application/json" };

/** Strings nobody should trust: unicode, NUL, SQL, huge, path tricks. */
const nasty = fc.oneof(
  fc.string(),
  fc.string({ unit: "grapheme", maxLength: 50 }),
  fc.string({ unit: "binary", maxLength: 50 }),
  fc.constantFrom(
    "'; DROP TABLE messages; --",
    "1 OR 1=1",
    "\u0000",
    "a\u0000b",
    "../../etc",
    "%00",
    "__parked__",
    "",
    " ",
    "NaN",
  ),
  fc.integer({ min: 513, max: 5000 }).map((n) => "x".repeat(n)),
);

/** JSON values that no field of the API accepts where a number or an id is due. */
const badNumber = fc.oneof(
  fc.constantFrom(-1, 0, 5, 1.5, -0.0001, 1e308, -1e308, Number.MAX_SAFE_INTEGER + 2, "1", "", null, true, [], {}),
  fc.double({ noNaN: true }).filter((d) => d < 0 || d > 1e9),
);

/** What the number actually becomes on the wire (-0 is sent as 0, 1e400 never appears). */
const wire = (v: unknown) => JSON.parse(JSON.stringify(v)) as unknown;
const isNum = (v: unknown): v is number => typeof v === "number";
const badPriority = badNumber.filter((v) => {
  const w = wire(v);
  return !(isNum(w) && Number.isInteger(w) && w >= 0 && w <= 4);
});
const badVisibility = badNumber.filter((v) => {
  const w = wire(v);
  return !(isNum(w) && w > 0 && w <= 366 * 86400);
});
const badDelay = badNumber.filter((v) => {
  const w = wire(v);
  return !(isNum(w) && w >= 0 && w <= 366 * 86400);
});
const badMax = badNumber.filter((v) => {
  const w = wire(v);
  return !(isNum(w) && Number.isInteger(w) && w >= 1 && w <= 100);
});

/** Raw bodies that are not valid JSON text. */
const invalidJson = fc.oneof(
  fc.constantFrom(
    "{",
    "}",
    "{'a':1}",
    '{"event": NaN}',
    '{"event": -Infinity}',
    '{"event": 1,}',
    '{"event": undefined}',
    "\u0000{}",
    "{\u0000}",
    '{"a":"\\x"}',
  ),
  fc.string().map((s) => `{${s},}`),
  fc.integer({ min: 1, max: 20_000 }).map((n) => "[".repeat(n)),
);

type Req = { path: string; method: string; raw?: BodyInit; headers?: Record<string, string> };

const enc = (s: string) => encodeURIComponent(s);
const jsonReq = (path: string, body: unknown, headers: Record<string, string> = {}): Req => ({
  path,
  method: "POST",
  raw: JSON.stringify(body),
  headers: { ...JSON_TYPE, ...headers },
});
const deep = (n: number): unknown => {
  let v: unknown = 1;
  for (let i = 0; i < n; i++) v = [v];
  return v;
};

const publishPaths = [
  "/v1/groups/g/messages",
  "/v1/messages",
  "/v1/claims",
  `/v1/leases/${LEASE}/nack`,
  `/v1/leases/${LEASE}/extend`,
];

const hostile: fc.Arbitrary<Req> = fc.oneof(
  // Wrong content types on every body-taking route.
  fc
    .record({
      path: fc.constantFrom(...publishPaths),
      type: fc.oneof(
        fc.constantFrom(
          "text/plain",
          "application/xml",
          "application/json; charset=utf-16",
          "multipart/form-data",
          "json",
        ),
        fc.stringMatching(/^[a-z]{1,10}\/[a-z]{1,10}$/).filter((t) => !/json/.test(t)),
      ),
      body: fc.string({ minLength: 1 }),
    })
    .map(({ path, type, body }) => ({ path, method: "POST", raw: body, headers: { "content-type": type } })),
  // Invalid JSON.
  fc
    .record({ path: fc.constantFrom(...publishPaths), raw: invalidJson })
    .map(({ path, raw }) => ({ path, method: "POST", raw, headers: JSON_TYPE })),
  // Valid JSON, but not an object.
  fc
    .record({
      path: fc.constantFrom(...publishPaths),
      v: fc.oneof(fc.array(fc.jsonValue()), fc.string(), fc.double(), fc.constant(null)),
    })
    .map(({ path, v }) => jsonReq(path, v)),
  // Events nested too deep.
  fc.integer({ min: 65, max: 3000 }).map((n) => jsonReq("/v1/groups/g/messages", { event: deep(n) })),
  // Bad group ids in the path.
  fc
    .oneof(
      fc.integer({ min: 513, max: 3000 }).map((n) => "g".repeat(n)),
      nasty.map((s) => `${s}\u0000`),
    )
    .map((g) => jsonReq(`/v1/groups/${enc(g)}/messages`, { event: 1 })),
  // Bad priorities, unknown fields.
  badPriority.map((priority) => jsonReq("/v1/groups/g/messages", { event: "e", priority })),
  fc
    .record({ k: nasty.filter((k) => !["event", "priority", "delay"].includes(k)), v: fc.jsonValue() })
    .map(({ k, v }) => jsonReq("/v1/groups/g/messages", { event: 1, [k]: v })),
  // A batch with one bad message among good ones.
  fc
    .record({
      good: fc.array(fc.record({ group_id: fc.stringMatching(/^[a-z]{1,8}$/), event: fc.jsonValue() }), {
        maxLength: 20,
      }),
      bad: fc.oneof(
        badPriority.map((priority) => ({ group_id: "g", event: 1, priority })),
        nasty
          .filter((s) => s.length === 0 || s.length > 512 || s.includes("\u0000"))
          .map((group_id) => ({ group_id, event: 1 })),
        fc.constant({ group_id: "g" }),
        fc.jsonValue().filter((v) => typeof v !== "object" || v === null || Array.isArray(v)),
      ),
      at: fc.nat(),
    })
    .map(({ good, bad, at }) => {
      const list: unknown[] = [...good];
      list.splice(at % (good.length + 1), 0, bad);
      return jsonReq("/v1/messages", { messages: list });
    }),
  // Bad idempotency keys on an otherwise valid publish.
  fc
    .integer({ min: 513, max: 4000 })
    .map((n) => jsonReq("/v1/groups/g/messages", { event: 1 }, { "idempotency-key": "k".repeat(n) })),
  // Bad claims.
  fc
    .record({
      worker_id: fc.oneof(
        nasty.filter((s) => s.length === 0 || s.length > 512 || s.includes("\u0000") || s === "__parked__"),
        badNumber.filter((v) => typeof v !== "string" || v === ""),
      ),
      visibility: fc.double({ min: 1, max: 60 }),
    })
    .map((b) => jsonReq("/v1/claims", b)),
  fc.record({ worker_id: fc.constant("w"), visibility: badVisibility }).map((b) => jsonReq("/v1/claims", b)),
  fc
    .record({ worker_id: fc.constant("w"), visibility: fc.constant(5), max: badMax })
    .map((b) => jsonReq("/v1/claims", b)),
  // SQL, unicode and junk as lease ids and seqs.
  fc
    .record({ id: nasty, op: fc.constantFrom("ack", "nack", "extend") })
    .map(({ id, op }) => ({ path: `/v1/leases/${enc(id)}/${op}`, method: "POST" })),
  fc
    .record({ seq: fc.oneof(nasty, fc.constantFrom("0", "-1", "1.5", "1e3", "0x10", "99999999999999999999")) })
    .map(({ seq }) => ({ path: `/v1/dead-letters/${enc(seq)}/redrive`, method: "POST" })),
  badDelay.map((delay) => jsonReq(`/v1/leases/${LEASE}/nack`, { delay })),
  // Bad delays on publishes (one bad message in a batch stores none), bad waits and acks on claims.
  badDelay.map((delay) => jsonReq("/v1/groups/g/messages", { event: 1, delay })),
  badDelay.map((delay) =>
    jsonReq("/v1/messages", {
      messages: [
        { group_id: "a", event: 1 },
        { group_id: "b", event: 2, delay },
      ],
    }),
  ),
  badNumber
    .filter((v) => {
      const w = wire(v);
      return !(isNum(w) && w >= 0 && w <= 20);
    })
    .map((wait) => jsonReq("/v1/claims", { worker_id: "w", visibility: 5, wait })),
  fc
    .oneof(
      fc.jsonValue().filter((v) => !Array.isArray(v)),
      fc.constant([]),
      fc.array(nasty, { minLength: 1, maxLength: 5 }),
      fc.constant(Array.from({ length: MAX_CLAIM_ACKS + 1 }, () => LEASE)),
    )
    .map((ack) => jsonReq("/v1/claims", { worker_id: "w", visibility: 5, max: 2, ack })),
  fc.constant(jsonReq("/v1/claims", { worker_id: "w", visibility: 5, ack: [LEASE] })),
  // Unknown routes and methods.
  fc
    .record({ p: nasty, m: fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE") })
    .map(({ p, m }) => ({ path: `/v1/x/${enc(p)}`, method: m })),
  fc.constantFrom("PUT", "PATCH", "GET").map((m) => ({ path: "/v1/messages", method: m })),
  // Oversized bodies (valid JSON, but above the limit).
  fc
    .integer({ min: 1_048_577, max: 1_300_000 })
    .map((n) => ({ path: "/v1/messages", method: "POST", raw: `{"messages":[${" ".repeat(n)}]}`, headers: JSON_TYPE })),
);

it("hostile requests get a 4xx JSON error and store nothing", async () => {
  await fc.assert(
    fc.asyncProperty(hostile, async (req) => {
      const a = await api(req.path, { method: req.method, raw: req.raw, headers: req.headers });
      expect(a.status, `${req.method} ${req.path.slice(0, 80)}: ${a.text.slice(0, 200)}`).toBeGreaterThanOrEqual(400);
      expect(a.status).toBeLessThan(500);
      expect(a.body).toEqual({ error: { code: expect.any(String), message: expect.any(String) } });
    }),
    { numRuns: Number(process.env.HOSTILE_RUNS ?? 300) },
  );
  expect(await rowCounts()).toEqual(EMPTY);
});

/** The header the edge once used to name a writer's database: a client's must reach nothing. */
const DATABASE_HEADER = "x-tq-database";

it("a client cannot name the database a writer serves: the edge drops the header it alone may set", async () => {
  await resetDatabase();
  // A database that answers nothing: had the writer trusted this header, the publish would fail.
  const elsewhere = JSON.stringify({ url: "http://127.0.0.1:9" });
  for (const path of ["/v1/groups/g/messages", "/v1/queues/default/groups/g/messages"]) {
    const r = await api(path, { json: { event: { path } }, headers: { [DATABASE_HEADER]: elsewhere } });
    expect(r.status, r.text).toBe(201);
  }
  expect((await rowCounts()).messages).toBe(2);
});
