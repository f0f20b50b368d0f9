/** The HTTP contract of the Worker, end to end inside workerd against a real sqld. */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import type { ErrorAnswer } from "../../src/contract/types.js";
import { MAX_CLAIM_BATCH } from "../../src/rules.js";
import worker from "../../src/worker.js";
import { api, EMPTY, post, resetDatabase, rowCounts, TEST_TOKEN } from "./support.js";

beforeEach(resetDatabase);

const LEASE = /^[1-9][0-9]*\.[0-9a-f]{32}$/;
const claimBody = { worker_id: "w1", visibility: 30 };

function expectError(a: { status: number; body: unknown }, status: number, code: string, mentions?: string) {
  expect(a.status, JSON.stringify(a.body)).toBe(status);
  expect(a.body).toEqual({ error: { code, message: expect.any(String) } });
  if (mentions !== undefined) expect((a.body as ErrorAnswer).error.message).toContain(mentions);
}

describe("happy paths", () => {
  it("healthz needs no auth", async () => {
    const a = await api("/healthz", { token: null });
    expect(a.status).toBe(200);
    expect(a.body).toEqual({ status: "ok" });
  });

  it("publish, claim, ack", async () => {
    const p = await post("/v1/groups/orders/messages", { event: { hello: "world" }, priority: 2 });
    expect(p.status).toBe(201);
    expect(p.body).toEqual({ seq: 1 });

    const c = await post("/v1/claims", claimBody);
    expect(c.status).toBe(200);
    expect(c.body).toEqual({
      lease_id: expect.stringMatching(LEASE),
      seq: 1,
      group_id: "orders",
      event: { hello: "world" },
      expires_at: expect.any(Number),
      attempts: 1,
    });
    const stats = await api("/v1/stats");
    expect(stats.body).toMatchObject({ ready: 0, in_flight: 1, parked: 0, groups: 1, dead_letters: 0 });
    expect(c.body.expires_at).toBeGreaterThan(stats.body.now + 25);

    const ack = await post(`/v1/leases/${c.body.lease_id}/ack`);
    expect(ack.status).toBe(204);
    expect(ack.text).toBe("");
    // Only the library's own retry slot of the publish remains (one row, reused by the next publish).
    expect(await rowCounts()).toEqual({ ...EMPTY, tq_publishers: 1 });
  });

  it("claims answer 204 with no body when nothing is deliverable", async () => {
    const a = await post("/v1/claims", claimBody);
    expect(a.status).toBe(204);
    expect(a.text).toBe("");
  });

  it("claims with max return up to max leases in distinct groups", async () => {
    const pub = await post("/v1/messages", {
      messages: [
        { group_id: "a", event: 1 },
        { group_id: "a", event: 2 },
        { group_id: "b", event: 3 },
        { group_id: "c", event: 4, priority: 4 },
      ],
    });
    expect(pub.body).toEqual({ seqs: [1, 2, 3, 4] });
    const c = await post("/v1/claims", { ...claimBody, max: 10 });
    expect(c.status).toBe(200);
    expect(c.body.leases.map((l) => l.seq).sort()).toEqual([1, 3, 4]);
    const empty = await post("/v1/claims", { ...claimBody, max: 10 });
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({ leases: [] });
  });

  it("min_priority skips lower-priority groups", async () => {
    await post("/v1/groups/low/messages", { event: "l" });
    await post("/v1/groups/high/messages", { event: "h", priority: 3 });
    const c = await post("/v1/claims", { ...claimBody, min_priority: 3 });
    expect(c.body.group_id).toBe("high");
    expect((await post("/v1/claims", { ...claimBody, min_priority: 3 })).status).toBe(204);
  });

  it("events round-trip as any JSON, unicode included", async () => {
    const event = { s: "héllo 🌍 \u2028", n: [1, -2.5, 1e300], b: false, z: null, deep: { a: { b: { c: [] } } } };
    await post("/v1/groups/%F0%9F%8C%8D/messages", { event });
    const c = await post("/v1/claims", claimBody);
    expect(c.body.group_id).toBe("🌍");
    expect(c.body.event).toEqual(event);
  });

  it("nack frees the message for a new delivery; nack with delay parks it", async () => {
    await post("/v1/groups/g/messages", { event: 1 });
    const first = await post("/v1/claims", claimBody);
    const n = await post(`/v1/leases/${first.body.lease_id}/nack`);
    expect(n.status).toBe(204);
    expect(n.headers.get("dead-lettered")).toBe("false");
    const second = await post("/v1/claims", claimBody);
    expect(second.body).toMatchObject({ seq: 1, attempts: 2 });
    expect((await post(`/v1/leases/${second.body.lease_id}/nack`, { delay: 3600 })).status).toBe(204);
    expect((await api("/v1/stats")).body).toMatchObject({ parked: 1, ready: 0, in_flight: 0 });
    expect((await post("/v1/claims", claimBody)).status).toBe(204);
  });

  it("extend moves the deadline; a stale lease id after a re-claim is fenced off (409)", async () => {
    await post("/v1/groups/g/messages", { event: 1 });
    const c = await post("/v1/claims", { worker_id: "w1", visibility: 1 });
    const ext = await post(`/v1/leases/${c.body.lease_id}/extend`, { visibility: 120 });
    expect(ext.status).toBe(200);
    expect(ext.body).toEqual({ lease_id: c.body.lease_id, expires_at: expect.any(Number) });
    expect(ext.body.expires_at).toBeGreaterThan(c.body.expires_at + 100);

    // A short lease that lapses is re-claimed by another worker: the first holder is fenced off.
    const short = await post(`/v1/leases/${c.body.lease_id}/extend`, { visibility: 0.05 });
    expect(short.status).toBe(200);
    let again = await post("/v1/claims", { worker_id: "w2", visibility: 60 });
    while (again.status === 204) again = await post("/v1/claims", { worker_id: "w2", visibility: 60 });
    expect(again.body).toMatchObject({ seq: 1, attempts: 2 });
    expectError(await post(`/v1/leases/${c.body.lease_id}/ack`), 409, "LEASE_LOST", "lease_id");
    expectError(await post(`/v1/leases/${c.body.lease_id}/nack`), 409, "LEASE_LOST");
    expectError(await post(`/v1/leases/${c.body.lease_id}/extend`, { visibility: 5 }), 409, "LEASE_LOST");
    expect((await post(`/v1/leases/${again.body.lease_id}/ack`)).status).toBe(204);
    // Acked: the id no longer names anything.
    expectError(await post(`/v1/leases/${again.body.lease_id}/ack`), 404, "LEASE_NOT_FOUND");
  });

  it("dead letters: listed, redriven (201, new seq), deleted (204)", async () => {
    await post("/v1/messages", {
      messages: [
        { group_id: "p", event: "poison" },
        { group_id: "q", event: "other" },
      ],
    });
    // The default maxAttempts is 5: nack until the message moves to the dead letters.
    let dead = false;
    for (let i = 0; i < 10 && !dead; i++) {
      const c = await post("/v1/claims", { ...claimBody, min_priority: 0 });
      if (c.body.group_id === "q") {
        await post(`/v1/leases/${c.body.lease_id}/nack`, { delay: 3600 });
        continue;
      }
      dead = (await post(`/v1/leases/${c.body.lease_id}/nack`)).headers.get("dead-lettered") === "true";
    }
    expect(dead).toBe(true);
    const list = await api("/v1/dead-letters");
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      dead_letters: [
        {
          seq: 1,
          group_id: "p",
          event: "poison",
          priority: 0,
          attempts: 5,
          reason: expect.any(String),
          dead_at: expect.any(Number),
        },
      ],
      next_after_seq: null,
    });
    expect((await api("/v1/dead-letters?group_id=q")).body.dead_letters).toEqual([]);
    expect((await api("/v1/dead-letters?after_seq=1&limit=5")).body.dead_letters).toEqual([]);
    // One dead letter: a page of one is the last page.
    expect((await api("/v1/dead-letters?limit=1")).body.next_after_seq).toBe(null);

    const re = await post("/v1/dead-letters/1/redrive");
    expect(re.status).toBe(201);
    expect(re.body).toEqual({ seq: 3 });
    expectError(await post("/v1/dead-letters/1/redrive"), 404, "DEAD_LETTER_NOT_FOUND", "seq");
    const c = await post("/v1/claims", claimBody);
    expect(c.body).toMatchObject({ seq: 3, group_id: "p", event: "poison", attempts: 1 });

    for (let i = 0; i < 5; i++) {
      const l = i === 0 ? c : await post("/v1/claims", claimBody);
      await post(`/v1/leases/${l.body.lease_id}/nack`);
    }
    const del = await api("/v1/dead-letters/3", { method: "DELETE" });
    expect(del.status).toBe(204);
    expectError(await api("/v1/dead-letters/3", { method: "DELETE" }), 404, "DEAD_LETTER_NOT_FOUND");
    expect((await api("/v1/stats")).body.dead_letters).toBe(0);
  });
});

describe("idempotent publish", () => {
  it("a retry with the same key returns the first seqs and stores once", async () => {
    const headers = { "idempotency-key": "order-42" };
    const body = {
      messages: [
        { group_id: "a", event: { n: 1 } },
        { group_id: "b", event: { n: 2 } },
      ],
    };
    const first = await post("/v1/messages", body, { headers });
    const retry = await post("/v1/messages", body, { headers });
    expect(first.status).toBe(201);
    expect(retry.status).toBe(201);
    expect(retry.body).toEqual(first.body);
    expect((await rowCounts()).messages).toBe(2);

    const single = { event: "x" };
    const s1 = await post("/v1/groups/g/messages", single, { headers: { "idempotency-key": "one" } });
    const s2 = await post("/v1/groups/g/messages", single, { headers: { "idempotency-key": "one" } });
    expect(s2.body).toEqual(s1.body);
    expect((await rowCounts()).messages).toBe(3);
  });

  it("concurrent retries with one key store once", async () => {
    const headers = { "idempotency-key": "burst" };
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => post("/v1/groups/g/messages", { event: "once" }, { headers })),
    );
    expect(new Set(answers.map((a) => `${a.status} ${a.text}`)).size).toBe(1);
    expect((await rowCounts()).messages).toBe(1);
  });

  it("the same key with a different body is 409 and stores nothing more", async () => {
    const headers = { "idempotency-key": "k1" };
    await post("/v1/groups/g/messages", { event: 1 }, { headers });
    expectError(
      await post("/v1/groups/g/messages", { event: 2 }, { headers }),
      409,
      "IDEMPOTENCY_CONFLICT",
      "Idempotency-Key",
    );
    expectError(await post("/v1/groups/other/messages", { event: 1 }, { headers }), 409, "IDEMPOTENCY_CONFLICT");
    expectError(
      await post(
        "/v1/messages",
        {
          messages: [
            { group_id: "g", event: 1 },
            { group_id: "g", event: 1 },
          ],
        },
        { headers },
      ),
      409,
      "IDEMPOTENCY_CONFLICT",
    );
    expect((await rowCounts()).messages).toBe(1);
  });

  it("without a key, a repeat is a new message", async () => {
    await post("/v1/groups/g/messages", { event: 1 });
    await post("/v1/groups/g/messages", { event: 1 });
    expect((await rowCounts()).messages).toBe(2);
  });

  it("an invalid key is 400 naming the header", async () => {
    expectError(
      await post("/v1/groups/g/messages", { event: 1 }, { headers: { "idempotency-key": "k".repeat(513) } }),
      400,
      "INVALID_ARGUMENT",
      "Idempotency-Key",
    );
    expect(await rowCounts()).toEqual(EMPTY);
  });
});

describe("batch publish is all or nothing", () => {
  it("one bad message is 400 naming it, and nothing is stored", async () => {
    const good = Array.from({ length: 50 }, (_, i) => ({ group_id: `g${i % 5}`, event: { i } }));
    const cases: Array<[unknown, string]> = [
      [{ group_id: "g", event: 1, priority: 9 }, "messages[50].priority"],
      [{ group_id: "", event: 1 }, "messages[50].group_id"],
      [{ event: 1 }, "messages[50].group_id"],
      [{ group_id: "g" }, "messages[50].event"],
      [{ group_id: "g", event: 1, extra: true }, 'messages[50]."extra"'],
      ["not an object", "messages[50]"],
      [{ group_id: "g", event: JSON.parse("[".repeat(70) + "]".repeat(70)) }, "messages[50].event"],
    ];
    for (const [bad, field] of cases) {
      const a = await post("/v1/messages", { messages: [...good, bad, ...good] });
      expectError(a, 400, "INVALID_ARGUMENT", field);
    }
    expect(await rowCounts()).toEqual(EMPTY);
  });

  it("the count is bounded: 0 and 1001 messages are 400; 1000 are accepted", async () => {
    expectError(await post("/v1/messages", { messages: [] }), 400, "INVALID_ARGUMENT", "messages");
    const many = (n: number) => Array.from({ length: n }, (_, i) => ({ group_id: `g${i % 10}`, event: i }));
    expectError(await post("/v1/messages", { messages: many(1001) }), 400, "INVALID_ARGUMENT", "messages");
    expect(await rowCounts()).toEqual(EMPTY);
    const ok = await post("/v1/messages", { messages: many(1000) });
    expect(ok.status).toBe(201);
    expect(ok.body.seqs).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
  });
});

describe("auth", () => {
  const routes: Array<[string, string]> = [
    ["POST", "/v1/groups/g/messages"],
    ["POST", "/v1/messages"],
    ["POST", "/v1/claims"],
    ["POST", "/v1/leases/1.0123456789abcdef0123456789abcdef/ack"],
    ["POST", "/v1/leases/1.0123456789abcdef0123456789abcdef/nack"],
    ["POST", "/v1/leases/1.0123456789abcdef0123456789abcdef/extend"],
    ["GET", "/v1/stats"],
    ["GET", "/v1/groups"],
    ["GET", "/v1/dead-letters"],
    ["POST", "/v1/dead-letters/1/redrive"],
    ["DELETE", "/v1/dead-letters/1"],
    ["GET", "/v1/nope"],
  ];

  it("every /v1 route refuses a missing, malformed or wrong token with 401", async () => {
    for (const [method, path] of routes) {
      const variants: Record<string, string>[] = [
        {},
        { authorization: TEST_TOKEN },
        { authorization: `Basic ${TEST_TOKEN}` },
        { authorization: `Bearer ${TEST_TOKEN}x` },
        { authorization: `Bearer ${TEST_TOKEN.slice(0, -1)}` },
        { authorization: "Bearer " },
      ];
      for (const headers of variants) {
        const a = await api(path, { method, token: null, headers, json: method === "POST" ? { event: 1 } : undefined });
        expectError(a, 401, "UNAUTHORIZED", "Authorization");
        expect(a.headers.get("www-authenticate")).toMatch(/^Bearer/);
      }
    }
    expect(await rowCounts()).toEqual(EMPTY);
  });

  it("the scheme is case-insensitive", async () => {
    expect((await api("/v1/stats", { token: null, headers: { authorization: `bearer ${TEST_TOKEN}` } })).status).toBe(
      200,
    );
  });

  it("without QUEUE_TOKEN configured the API refuses every /v1 request (503), even with no token", async () => {
    for (const QUEUE_TOKEN of [undefined, "", "   ", "short"]) {
      const bindings = { ...env, QUEUE_TOKEN };
      for (const auth of [undefined, "Bearer ", `Bearer ${TEST_TOKEN}`, "Bearer undefined"]) {
        const req = new Request("http://queue.test/v1/groups/g/messages", {
          method: "POST",
          headers: { "content-type": "application/json", ...(auth ? { authorization: auth } : {}) },
          body: JSON.stringify({ event: 1 }),
        });
        const res = await worker.fetch(req, bindings, undefined);
        expect(res.status).toBe(503);
        const body = (await res.json()) as ErrorAnswer;
        expect(body.error.code).toBe("NOT_CONFIGURED");
        expect(body.error.message).toContain("QUEUE_TOKEN");
      }
    }
    const res = await worker.fetch(
      new Request("http://queue.test/healthz"),
      { ...env, QUEUE_TOKEN: undefined },
      undefined,
    );
    expect(res.status).toBe(200);
    expect(await rowCounts()).toEqual(EMPTY);
  });

  it("a missing or unusable TURSO_DATABASE_URL is a clear 503", async () => {
    for (const [url, mention] of [
      [undefined, "TURSO_DATABASE_URL is not set"],
      ["file:/tmp/x.db", "must be a libsql:"],
      ["not a url", "not a valid URL"],
    ] as const) {
      const res = await worker.fetch(
        new Request("http://queue.test/v1/stats", { headers: { authorization: `Bearer ${TEST_TOKEN}` } }),
        { ...env, TURSO_DATABASE_URL: url },
        undefined,
      );
      expect(res.status).toBe(503);
      const body = (await res.json()) as ErrorAnswer;
      expect(body.error.code).toBe("NOT_CONFIGURED");
      expect(body.error.message).toContain(mention);
    }
  });
});

describe("error statuses", () => {
  it("400 names the field", async () => {
    const cases: Array<[string, unknown, string]> = [
      ["/v1/groups/g/messages", {}, "event"],
      ["/v1/groups/g/messages", { event: 1, priority: 5 }, "priority"],
      ["/v1/groups/g/messages", { event: 1, priority: -1 }, "priority"],
      ["/v1/groups/g/messages", { event: 1, priority: 1.5 }, "priority"],
      ["/v1/groups/g/messages", { event: 1, priority: "1" }, "priority"],
      ["/v1/groups/g/messages", { event: 1, priority: null }, "priority"],
      ["/v1/groups/g/messages", { event: 1, group_id: "x" }, '"group_id"'],
      [`/v1/groups/${"x".repeat(513)}/messages`, { event: 1 }, "group_id"],
      ["/v1/groups/a%00b/messages", { event: 1 }, "group_id"],
      ["/v1/groups/g/messages", [1, 2], "body"],
      ["/v1/groups/g/messages", "string", "body"],
      ["/v1/groups/g/messages", null, "body"],
      ["/v1/messages", {}, "messages"],
      ["/v1/messages", { messages: {} }, "messages"],
      ["/v1/claims", {}, "worker_id"],
      ["/v1/claims", { worker_id: "w" }, "visibility"],
      ["/v1/claims", { worker_id: "", visibility: 1 }, "worker_id"],
      ["/v1/claims", { worker_id: "__parked__", visibility: 1 }, "worker_id"],
      ["/v1/claims", { worker_id: 7, visibility: 1 }, "worker_id"],
      ["/v1/claims", { worker_id: "w", visibility: 0 }, "visibility"],
      ["/v1/claims", { worker_id: "w", visibility: -5 }, "visibility"],
      ["/v1/claims", { worker_id: "w", visibility: 1e300 }, "visibility"],
      ["/v1/claims", { worker_id: "w", visibility: "30" }, "visibility"],
      ["/v1/claims", { worker_id: "w", visibility: 1, min_priority: 7 }, "min_priority"],
      ["/v1/claims", { worker_id: "w", visibility: 1, max: 0 }, "max"],
      ["/v1/claims", { worker_id: "w", visibility: 1, max: MAX_CLAIM_BATCH + 1 }, "max"],
      ["/v1/claims", { worker_id: "w", visibility: 1, max: 2.5 }, "max"],
      ["/v1/leases/not-a-lease/ack", undefined, "lease_id"],
      ["/v1/leases/1'%20OR%201=1--/ack", undefined, "lease_id"],
      ["/v1/leases/1.0123456789abcdef0123456789abcdef/nack", { delay: -1 }, "delay"],
      ["/v1/leases/1.0123456789abcdef0123456789abcdef/nack", { delay: "soon" }, "delay"],
      ["/v1/leases/1.0123456789abcdef0123456789abcdef/nack", { dealy: 1 }, '"dealy"'],
      ["/v1/leases/1.0123456789abcdef0123456789abcdef/ack", { x: 1 }, '"x"'],
      ["/v1/leases/1.0123456789abcdef0123456789abcdef/extend", {}, "visibility"],
      ["/v1/dead-letters/0/redrive", undefined, "seq"],
      ["/v1/dead-letters/abc/redrive", undefined, "seq"],
      ["/v1/dead-letters/99999999999999999999/redrive", undefined, "seq"],
    ];
    for (const [path, json, field] of cases) {
      const a = await post(path, json);
      expectError(a, 400, "INVALID_ARGUMENT", field);
    }
    for (const q of ["limit=0", "limit=1001", "limit=x", "after_seq=-1", "group_id=", "foo=1", "limit=1&limit=2"]) {
      expectError(await api(`/v1/dead-letters?${q}`), 400, "INVALID_ARGUMENT");
    }
    expect(await rowCounts()).toEqual(EMPTY);
  });

  it("400 for invalid JSON and a missing body", async () => {
    for (const raw of [
      "{",
      '{"event": NaN}',
      '{"event": Infinity}',
      "{'event': 1}",
      '{"event": 1,}',
      "\u0000",
      '{"event": undefined}',
    ]) {
      expectError(
        await api("/v1/groups/g/messages", { method: "POST", raw, headers: { "content-type": "application/json" } }),
        400,
        "INVALID_ARGUMENT",
        "body",
      );
    }
    // 1e400 parses as Infinity, which JSON cannot store: refused, never turned into null.
    expectError(
      await api("/v1/groups/g/messages", {
        method: "POST",
        raw: '{"event": 1e400}',
        headers: { "content-type": "application/json" },
      }),
      400,
      "INVALID_ARGUMENT",
      "event",
    );
    expectError(
      await api("/v1/groups/g/messages", {
        method: "POST",
        raw: new Uint8Array([0x7b, 0xff, 0x7d]),
        headers: { "content-type": "application/json" },
      }),
      400,
      "INVALID_ARGUMENT",
      "UTF-8",
    );
    expectError(
      await api("/v1/claims", { method: "POST", headers: { "content-type": "application/json" } }),
      400,
      "INVALID_ARGUMENT",
      "body",
    );
    expect(await rowCounts()).toEqual(EMPTY);
  });

  it("404 for unknown routes and unknown leases, as JSON", async () => {
    expectError(await api("/nope", { token: null }), 404, "NOT_FOUND");
    expectError(await api("/v1/nope"), 404, "NOT_FOUND");
    expectError(await api("/v2/stats"), 404, "NOT_FOUND");
    expectError(await post("/v1/leases/7.0123456789abcdef0123456789abcdef/ack"), 404, "LEASE_NOT_FOUND");
    expectError(
      await post("/v1/leases/7.0123456789abcdef0123456789abcdef/extend", { visibility: 5 }),
      404,
      "LEASE_NOT_FOUND",
    );
  });

  it("405 for a known path with another method", async () => {
    const a = await api("/v1/claims", { method: "GET" });
    expectError(a, 405, "METHOD_NOT_ALLOWED");
    expect(a.headers.get("allow")).toBe("POST");
    expectError(await api("/v1/stats", { method: "DELETE" }), 405, "METHOD_NOT_ALLOWED");
  });

  it("413 above 1 MiB, by Content-Length or by the bytes actually sent", async () => {
    const big = JSON.stringify({ event: "x".repeat(1_048_576) });
    expectError(
      await api("/v1/groups/g/messages", { method: "POST", raw: big, headers: { "content-type": "application/json" } }),
      413,
      "PAYLOAD_TOO_LARGE",
    );
    // A chunked body (no Content-Length) is counted as it is read.
    const chunk = new TextEncoder().encode("x".repeat(65_536));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(ctl) {
        if (sent === 0) ctl.enqueue(new TextEncoder().encode('{"event":"'));
        if (sent++ < 20) ctl.enqueue(chunk);
        else ctl.close();
      },
    });
    expectError(
      await api("/v1/groups/g/messages", {
        method: "POST",
        raw: stream,
        headers: { "content-type": "application/json" },
      }),
      413,
      "PAYLOAD_TOO_LARGE",
    );
    // Just under the limit is fine.
    const fits = JSON.stringify({ event: "x".repeat(1_048_576 - 100) });
    expect(
      (
        await api("/v1/groups/g/messages", {
          method: "POST",
          raw: fits,
          headers: { "content-type": "application/json" },
        })
      ).status,
    ).toBe(201);
    expect((await rowCounts()).messages).toBe(1);
  });

  it("415 for a body that is not declared as JSON", async () => {
    for (const type of [
      "text/plain",
      "application/x-www-form-urlencoded",
      "application/json; charset=latin1",
      "multipart/form-data; boundary=x",
      "applicationjson",
    ]) {
      expectError(
        await api("/v1/groups/g/messages", { method: "POST", raw: '{"event":1}', headers: { "content-type": type } }),
        415,
        "UNSUPPORTED_MEDIA_TYPE",
      );
    }
    expectError(
      await api("/v1/groups/g/messages", { method: "POST", raw: new Blob(['{"event":1}']) }),
      415,
      "UNSUPPORTED_MEDIA_TYPE",
    );
    for (const type of ["application/json; charset=UTF-8", "application/vnd.api+json", "APPLICATION/JSON"]) {
      expect(
        (await api("/v1/groups/g/messages", { method: "POST", raw: '{"event":1}', headers: { "content-type": type } }))
          .status,
      ).toBe(201);
    }
    expect((await rowCounts()).messages).toBe(3);
  });
});
