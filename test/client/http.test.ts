/**
 * The HTTP client (`turso-queue/client`) against the Worker as `wrangler dev` serves it
 * (scripts/support/worker.ts: workerd, the QueueWriter Durable Object) and the real sqld, over real HTTP on
 * 127.0.0.1: every method's round trip, the API's errors as the client reports them, retries after
 * lost answers (a fault proxy in front of the Worker), Retry-After, timeouts, and consume() over HTTP.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { startConsumer } from "../../scripts/support/consumer.js";
import { type Proxy as FaultProxy, startProxy } from "../../scripts/support/proxy.js";
import { type RunningWorker, startWorker } from "../../scripts/support/worker.js";
import {
  type ClientOptions,
  consume,
  createClient,
  type FetchLike,
  type Lease,
  leaseOfDelivery,
  type QueueClient,
  QueueError,
  QueueHttpError,
} from "../../src/client/index.js";
import { verifySignature } from "../../src/contract/signature.js";
import { clientOf } from "../../src/core/internals.js";
import { nodeFetchStats } from "../../src/core/node-fetch.js";
import { LibsqlTransport, MAX_CLAIM_BATCH } from "../../src/index.js";
import { checkInvariants, resetDatabase } from "../support/db.js";
import { waitFor } from "../support/wait.js";

const TOKEN = "http-client-test-token-0123456789";

let worker: RunningWorker;
let proxy: FaultProxy;
let admin: LibsqlTransport;

beforeAll(async () => {
  admin = await LibsqlTransport.create(inject("sqldUrl"));
  await resetDatabase(clientOf(admin));
  worker = await startWorker({ databaseUrl: inject("sqldUrl"), queueToken: TOKEN });
  proxy = await startProxy(Number(new URL(worker.url).port));
}, 120_000);

afterAll(async () => {
  await proxy?.close();
  await worker?.stop();
  admin?.close();
});

beforeEach(async () => {
  proxy.clear();
  await resetDatabase(clientOf(admin));
});

/** A client of the Worker (through the proxy with `via: "proxy"`), its requests logged. */
function client(options: Partial<ClientOptions> & { via?: "proxy" } = {}) {
  // Logged when sent (a long poll shows before it answers); the status once it answers.
  const log: { method: string; path: string; status: number | "failed" | "sent"; body?: string }[] = [];
  const inner: FetchLike = options.fetch ?? ((url, init) => fetch(url, init));
  const logging: FetchLike = async (url, init) => {
    const entry: (typeof log)[number] = {
      method: init.method,
      path: new URL(url).pathname,
      body: init.body,
      status: "sent",
    };
    log.push(entry);
    try {
      const res = await inner(url, init);
      entry.status = res.status;
      return res;
    } catch (e) {
      entry.status = "failed";
      throw e;
    }
  };
  const { via, ...rest } = options;
  const c = createClient({ url: via === "proxy" ? proxy.url : worker.url, token: TOKEN, ...rest, fetch: logging });
  return { c, log };
}

/** The rejection of `p`, which must be a QueueHttpError. */
async function failure(p: Promise<unknown>): Promise<QueueHttpError> {
  const e = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(e, "the call should have failed").toBeInstanceOf(QueueHttpError);
  return e as QueueHttpError;
}

const errorOf = (e: QueueHttpError) => ({ code: e.code, status: e.status, field: e.field });

/** Claims with min_priority 4 and nacks until the message is a dead letter (5 attempts). */
async function deadLetter(c: QueueClient, group: string): Promise<number> {
  const seq = await c.publish(group, { poison: group }, 4);
  for (;;) {
    const lease = await c.claim("poison", 30, 4);
    expect(lease?.seq).toBe(seq);
    if ((await c.nack(lease as Lease)).deadLettered) return seq;
  }
}

describe("round trips", () => {
  it("publish, publishMany, claim, claimMany, extend, nack, ack, stats, groups", async () => {
    const { c } = client();
    const first = await c.publish("orders", { order: 1 }, 2);
    const seqs = await c.publishMany([
      { groupId: "orders", event: { order: 2 } },
      { groupId: "emails", event: { to: "ada" }, priority: 1 },
      { groupId: "sms", event: "text" },
    ]);
    expect(seqs).toEqual([first + 1, first + 2, first + 3]);
    expect(await c.stats()).toMatchObject({ ready: 3, waiting: 1, inFlight: 0, groups: 3, deadLetters: 0 });

    const lease = await c.claim<{ order: number }>("w1", 30, 2);
    expect(lease).toMatchObject({ seq: first, groupId: "orders", event: { order: 1 }, workerId: "w1", attempts: 1 });
    expect(lease?.id).toMatch(/^\d+\.[0-9a-f]{32}$/);
    const now = (await c.stats()).now;
    expect(lease?.expiresAt).toBeGreaterThan(now + 25);

    const longer = await c.extend(lease as Lease<{ order: number }>, 120);
    expect(longer).toEqual({ ...lease, expiresAt: longer.expiresAt });
    expect(longer.expiresAt).toBeGreaterThan(now + 100);
    const byId = await c.extend(longer.id, 60);
    expect(byId).toEqual({ id: longer.id, expiresAt: byId.expiresAt });

    const many = await c.claimMany("w2", 30, 10);
    expect(many.map((l) => [l.groupId, l.seq])).toEqual([
      ["emails", first + 2],
      ["sms", first + 3],
    ]);
    expect(await c.claim("w3", 30)).toBeNull();
    expect(await c.claimMany("w3", 30, 5)).toEqual([]);

    expect(await c.nack(many[0] as Lease, 0)).toEqual({ deadLettered: false });
    const again = await c.claim("w4", 30, 1);
    expect(again).toMatchObject({ seq: first + 2, attempts: 2 });
    const groups = await c.groups({ limit: 10 });
    expect(groups.map((g) => g.groupId).sort()).toEqual(["emails", "orders", "sms"]);
    expect(groups.find((g) => g.groupId === "orders")).toMatchObject({ messages: 2, priority: 2, inFlight: true });

    for (const l of [lease as Lease, again as Lease, many[1] as Lease]) await c.ack(l);
    await c.ack((await c.claim("w5", 30))?.id as string);
    expect(await c.stats()).toMatchObject({ ready: 0, waiting: 0, inFlight: 0, groups: 0 });
    await checkInvariants(clientOf(admin));
  });

  it("dead letters: list (paged, by group), redrive, delete", async () => {
    const { c } = client();
    const a = await deadLetter(c, "poison-a");
    const b = await deadLetter(c, "poison-b");
    expect((await c.stats()).deadLetters).toBe(2);
    const all = await c.deadLetters();
    expect(all.map((d) => [d.seq, d.groupId, d.attempts])).toEqual([
      [a, "poison-a", 5],
      [b, "poison-b", 5],
    ]);
    expect(all[0]).toMatchObject({ event: { poison: "poison-a" }, priority: 4, reason: expect.any(String) });
    expect((await c.deadLetters({ limit: 1 })).map((d) => d.seq)).toEqual([a]);
    expect((await c.deadLetters({ afterSeq: a })).map((d) => d.seq)).toEqual([b]);
    expect((await c.deadLetters({ groupId: "poison-b" })).map((d) => d.seq)).toEqual([b]);

    const redriven = await c.redrive(a);
    expect(redriven).toBeGreaterThan(b);
    expect(await c.claim("w", 30, 4)).toMatchObject({ seq: redriven, groupId: "poison-a", attempts: 1 });
    expect(await c.deleteDeadLetter(b)).toBe(true);
    expect(await c.deleteDeadLetter(b)).toBe(false);
    expect(await c.deadLetters()).toEqual([]);
  });

  it("peek, purge and history", async () => {
    const { c, log } = client();
    await c.publishMany([
      { groupId: "a/b c", event: 1 },
      { groupId: "a/b c", event: 2 },
      { groupId: "other", event: 3 },
    ]);
    const lease = await c.claim("w", 30);
    expect(lease?.groupId).toBe("a/b c");
    expect((await c.peek("a/b c")).map((m) => [m.event, m.state, m.attempts])).toEqual([
      [1, "in_flight", 1],
      [2, "queued", 0],
    ]);
    expect(await c.peek("a/b c", { limit: 1 })).toHaveLength(1);
    expect(log.at(-1)?.path).toBe("/v1/groups/a%2Fb%20c/messages");
    const bad = await failure(c.peek("a/b c", { limit: 101 }));
    expect(errorOf(bad)).toEqual({ code: "INVALID_ARGUMENT", status: 400, field: "limit" });
    expect(await c.purge("a/b c")).toBe(2);
    expect(await c.peek("a/b c")).toEqual([]);
    expect((await c.stats()).groups).toBe(1);
    // The writer samples the queue when it is written (at most once a minute): at least one sample,
    // its running totals never going back.
    const h = await c.history();
    expect(h.sampleSeconds).toBe(60);
    expect(h.samples.length).toBeGreaterThan(0);
    expect(
      h.samples.every(
        (x, i) => i === 0 || (x.published >= (h.samples[i - 1]?.published ?? 0) && x.at > (h.samples[i - 1]?.at ?? 0)),
      ),
    ).toBe(true);
  });

  it("keeps a path prefix and encodes group ids; an Idempotency-Key makes a publish idempotent", async () => {
    const { c, log } = client({ url: `${worker.url}/` });
    const group = "a/b c?d#é";
    const seq = await c.publish(group, 1, 0, { idempotencyKey: "order:1" });
    expect(await c.publish(group, 1, 0, { idempotencyKey: "order:1" })).toBe(seq);
    expect(await c.publishMany([{ groupId: group, event: 1 }], { idempotencyKey: "batch:1" })).toEqual([seq + 1]);
    expect(await c.publishMany([{ groupId: group, event: 1 }], { idempotencyKey: "batch:1" })).toEqual([seq + 1]);
    expect(log[0]?.path).toBe(`/v1/groups/${encodeURIComponent(group)}/messages`);
    expect(await c.claim("w", 30)).toMatchObject({ seq, groupId: group });
    expect((await c.stats()).ready + (await c.stats()).waiting + (await c.stats()).inFlight).toBe(2);
  });
  it("uses the keep-alive fetch in Node by default", async () => {
    const c = createClient({ url: worker.url, token: TOKEN });
    const before = nodeFetchStats.requests;
    const seq = await c.publish("g", 1);
    expect(await c.claim("w", 30)).toMatchObject({ seq });
    expect(nodeFetchStats.requests - before).toBe(2);
  });
});

describe("release", () => {
  it("gives a lease back at once without spending its attempt; a lease claimed again since is LEASE_LOST", async () => {
    const { c, log } = client();
    const seq = await c.publish("g", { n: 1 });
    // One attempt spent by a nack: the next delivery is the second.
    await c.nack((await c.claim("w1", 30)) as Lease, 0);
    const second = (await c.claim("w2", 30)) as Lease;
    expect(second).toMatchObject({ seq, attempts: 2 });
    await c.release(second);
    expect(log.at(-1)).toMatchObject({ method: "POST", path: `/v1/leases/${second.id}/release`, status: 204 });
    // Claimable again at once, and still on its second attempt: the release spent none.
    const third = (await c.claim("w3", 30)) as Lease;
    expect(third).toMatchObject({ seq, attempts: 2 });
    expect(third.id).not.toBe(second.id);
    // The released lease no longer holds the message: w3's does.
    expect(errorOf(await failure(c.release(second)))).toEqual({ code: "LEASE_LOST", status: 409, field: "lease_id" });
    // By id too.
    await c.release(third.id);
    expect(await c.claim("w4", 30)).toMatchObject({ seq, attempts: 2 });
  });

  it("a lapsed lease claimed again is LEASE_LOST; a gone message LEASE_NOT_FOUND; nothing changes", async () => {
    const { c } = client();
    await c.publish("g", 1);
    const stale = (await c.claim("slow", 0.05)) as Lease;
    const fresh = await waitFor(() => c.claim("fast", 30), { what: "the lapsed lease claimed again" });
    expect(errorOf(await failure(c.release(stale)))).toEqual({ code: "LEASE_LOST", status: 409, field: "lease_id" });
    expect((await c.stats()).inFlight).toBe(1);
    await c.ack(fresh);
    expect(errorOf(await failure(c.release(fresh)))).toEqual({
      code: "LEASE_NOT_FOUND",
      status: 404,
      field: "lease_id",
    });
    expect(errorOf(await failure(c.release("not-a-lease")))).toEqual({
      code: "INVALID_ARGUMENT",
      status: 400,
      field: "lease_id",
    });
  });

  it("a release whose answer is lost is sent again and reports the release (our lease had not lapsed)", async () => {
    const { c, log } = client({ via: "proxy" });
    const seq = await c.publish("g", 1);
    const lease = (await c.claim("w", 30)) as Lease;
    const drops = proxy.stats.drop;
    proxy.inject({ kind: "drop" }, { match: `/v1/leases/${lease.id}/release` });
    await c.release(lease);
    expect(proxy.stats.drop - drops).toBe(1);
    expect(log.filter((r) => r.path.endsWith("/release")).map((r) => r.status)).toEqual(["failed", 409]);
    expect(await admin.claim("check", 30)).toMatchObject({ seq, attempts: 1 });
  });
});

describe("errors: the API's code, status and field", () => {
  it("bad input refused by the API names the field as the API does, and stores nothing", async () => {
    const { c } = client();
    expect(errorOf(await failure(c.publish("g", 1, 9)))).toEqual({
      code: "INVALID_ARGUMENT",
      status: 400,
      field: "priority",
    });
    const batch = await failure(
      c.publishMany([
        { groupId: "g", event: 1 },
        { groupId: "g", event: 2, priority: -1 },
      ]),
    );
    expect(errorOf(batch)).toEqual({ code: "INVALID_ARGUMENT", status: 400, field: "messages[1].priority" });
    expect(batch.message).toMatch(/^messages\[1\]\.priority: must be an integer from 0 to 4, got -1$/);
    expect(errorOf(await failure(c.claim("w", 0)))).toEqual({
      code: "INVALID_ARGUMENT",
      status: 400,
      field: "visibility",
    });
    expect(errorOf(await failure(c.claimMany("w", 30, MAX_CLAIM_BATCH + 1)))).toEqual({
      code: "INVALID_ARGUMENT",
      status: 400,
      field: "max",
    });
    expect(errorOf(await failure(c.deadLetters({ limit: 0 })))).toEqual({
      code: "INVALID_ARGUMENT",
      status: 400,
      field: "limit",
    });
    expect(errorOf(await failure(c.ack("not-a-lease")))).toEqual({
      code: "INVALID_ARGUMENT",
      status: 400,
      field: "lease_id",
    });
    expect((await c.stats()).groups).toBe(0);
  });

  it("what cannot travel is refused before sending, with the same field names and no status", async () => {
    const { c, log } = client();
    const cases: [() => Promise<unknown>, string][] = [
      [() => c.publish("g", Number.NaN), "event"],
      [() => c.publish("g", { when: new Date(0) }), "event.when"],
      [
        () =>
          c.publishMany([
            { groupId: "g", event: 1 },
            { groupId: "g", event: 1n },
          ]),
        "messages[1].event",
      ],
      [() => c.publish(42 as unknown as string, 1), "group_id"],
      [() => c.publish("\ud800", 1), "group_id"],
      [() => c.publish("g", 1, 0, { idempotencyKey: "clé" }), "Idempotency-Key"],
      [() => c.ack({} as Lease), "lease_id"],
      [() => c.redrive(1.5), "seq"],
      [() => c.deadLetters({ groupId: "\udc00" }), "group_id"],
    ];
    for (const [call, field] of cases) {
      const e = await failure(call());
      expect(errorOf(e), field).toEqual({ code: "INVALID_ARGUMENT", status: undefined, field });
      expect(e.message.startsWith(`${field}: `), e.message).toBe(true);
    }
    expect(log).toEqual([]);
    expect(() => createClient({ url: "ftp://x", token: TOKEN })).toThrow(/options\.url: must be an http\(s\) URL/);
    expect(() => createClient({ url: worker.url, token: "" })).toThrow(/options\.token/);
    expect(() => createClient({ url: worker.url, token: TOKEN, retries: -1 })).toThrow(/options\.retries/);
  });

  it("a wrong token is UNAUTHORIZED (401), never retried", async () => {
    const { c, log } = client({ token: "wrong-token-0123456789" });
    const e = await failure(c.publish("g", 1));
    expect(errorOf(e)).toEqual({ code: "UNAUTHORIZED", status: 401, field: "Authorization" });
    expect(e).toBeInstanceOf(QueueError);
    expect(e.outcomeUnknown).toBe(false);
    expect(log).toHaveLength(1);
  });

  it("a lapsed lease claimed again is LEASE_LOST (409); a gone message LEASE_NOT_FOUND (404); a missing dead letter DEAD_LETTER_NOT_FOUND", async () => {
    const { c } = client();
    await c.publish("g", 1);
    const stale = (await c.claim("slow", 0.05)) as Lease;
    const fresh = await waitFor(() => c.claim("fast", 30), { what: "the lapsed lease claimed again" });
    for (const call of [() => c.ack(stale), () => c.nack(stale), () => c.extend(stale, 30)]) {
      expect(errorOf(await failure(call()))).toEqual({ code: "LEASE_LOST", status: 409, field: "lease_id" });
    }
    await c.ack(fresh);
    for (const call of [() => c.ack(fresh), () => c.nack(fresh), () => c.extend(fresh, 30)]) {
      expect(errorOf(await failure(call()))).toEqual({ code: "LEASE_NOT_FOUND", status: 404, field: "lease_id" });
    }
    expect(errorOf(await failure(c.redrive(999_999)))).toEqual({
      code: "DEAD_LETTER_NOT_FOUND",
      status: 404,
      field: "seq",
    });
    expect(await c.deleteDeadLetter(999_999)).toBe(false);
  });

  it("an Idempotency-Key reused for another request is IDEMPOTENCY_CONFLICT (409), and nothing more is stored", async () => {
    const { c } = client();
    await c.publish("g", { n: 1 }, 0, { idempotencyKey: "k1" });
    const e = await failure(c.publish("g", { n: 2 }, 0, { idempotencyKey: "k1" }));
    expect(errorOf(e)).toEqual({ code: "IDEMPOTENCY_CONFLICT", status: 409, field: "Idempotency-Key" });
    expect((await c.stats()).ready).toBe(1);
  });
});

describe("lost answers, Retry-After, timeouts", () => {
  it("a publish whose answer is lost is sent again with the same key and stored once", async () => {
    const { c, log } = client({ via: "proxy" });
    const drops = proxy.stats.drop;
    proxy.inject({ kind: "drop" }, { match: "POST /v1/groups/g/messages" });
    const seq = await c.publish("g", { n: 1 });
    expect(proxy.stats.drop - drops).toBe(1);
    expect(log.map((r) => r.status)).toEqual(["failed", 201]);
    proxy.inject({ kind: "drop" }, { match: "POST /v1/messages" });
    const seqs = await c.publishMany([
      { groupId: "g", event: { n: 2 } },
      { groupId: "h", event: { n: 3 } },
    ]);
    expect(seqs).toEqual([seq + 1, seq + 2]);
    // A request cut halfway never reaches the API: sent again, stored once too.
    proxy.inject({ kind: "cut" }, { match: "POST /v1/groups/g/messages" });
    expect(await c.publish("g", { n: 4 })).toBe(seq + 3);
    expect(log.map((r) => r.status)).toEqual(["failed", 201, "failed", 201, "failed", 201]);
    const rows = await clientOf(admin).execute("SELECT seq, group_id, event FROM messages ORDER BY seq");
    expect(rows.rows.map((r) => [r.seq, r.group_id, JSON.parse(String(r.event)).n])).toEqual([
      [seq, "g", 1],
      [seq + 1, "g", 2],
      [seq + 2, "h", 3],
      [seq + 3, "g", 4],
    ]);
  });

  it("ack, nack and extend whose answers are lost are sent again and report what the first attempt did", async () => {
    const { c } = client({ via: "proxy" });
    await c.publishMany([
      { groupId: "a", event: 1 },
      { groupId: "b", event: 2 },
      { groupId: "c", event: 3 },
    ]);
    const [a, b, cc] = (await c.claimMany("w", 30, 3)) as [Lease, Lease, Lease];
    const drops = proxy.stats.drop;
    // The ack applied, its answer was lost; sent again it finds the message gone: done.
    proxy.inject({ kind: "drop" }, { match: `/v1/leases/${a.id}/ack` });
    await c.ack(a, {});
    // The nack released it; sent again it finds the message not ours, but our lease had not lapsed: released.
    proxy.inject({ kind: "drop" }, { match: `/v1/leases/${b.id}/nack` });
    expect(await c.nack(b, 0)).toEqual({ deadLettered: false });
    proxy.inject({ kind: "drop" }, { match: `/v1/leases/${cc.id}/extend` });
    expect((await c.extend(cc, 90)).expiresAt).toBeGreaterThan(cc.expiresAt);
    expect(proxy.stats.drop - drops).toBe(3);
    expect(await admin.claimMany("check", 30, 5)).toMatchObject([{ groupId: "b", attempts: 2 }]);
    expect((await c.stats()).inFlight).toBe(2);
  });

  it("a nack whose answer is lost after its lease lapsed: LEASE_LOST, outcomeUnknown (the API cannot tell)", async () => {
    const { c } = client({ via: "proxy" });
    await c.publish("g", 1);
    const lease = (await c.claim("w", 0.05)) as Lease;
    await waitFor(async () => (await c.stats()).now > lease.expiresAt, { what: "the lease lapsed" });
    proxy.inject({ kind: "drop" }, { match: "/nack" });
    const e = await failure(c.nack(lease));
    expect({ ...errorOf(e), outcomeUnknown: e.outcomeUnknown }).toEqual({
      code: "LEASE_LOST",
      status: 409,
      field: "lease_id",
      outcomeUnknown: true,
    });
    expect(e.message).toMatch(/an earlier attempt's answer was lost: it may have released the message/);
    // It had: the message is free again.
    expect(await admin.claim("check", 30)).toMatchObject({ groupId: "g", attempts: 2 });
  });

  it("a nack whose answer is lost after it dead-lettered the message reports the dead letter", async () => {
    const { c } = client({ via: "proxy" });
    const seq = await c.publish("poison", 1);
    for (let i = 1; i < 5; i++) await c.nack((await c.claim("w", 30)) as Lease);
    const last = (await c.claim("w", 30)) as Lease;
    expect(last.attempts).toBe(5);
    proxy.inject({ kind: "drop" }, { match: "/nack" });
    expect(await c.nack(last)).toEqual({ deadLettered: true });
    expect((await c.deadLetters()).map((d) => d.seq)).toEqual([seq]);
  });

  it("a redrive whose answer is lost is not sent again: outcomeUnknown, and applied once", async () => {
    const { c, log } = client({ via: "proxy" });
    const seq = await deadLetter(c, "poison");
    log.length = 0;
    proxy.inject({ kind: "drop" }, { match: "/redrive" });
    const e = await failure(c.redrive(seq));
    expect({ code: e.code, outcomeUnknown: e.outcomeUnknown }).toEqual({ code: "UNAVAILABLE", outcomeUnknown: true });
    expect(log).toHaveLength(1);
    expect(await c.deadLetters()).toEqual([]);
    expect((await c.stats()).ready).toBe(1);
  });

  it("honours Retry-After from a gateway in front of the API, within the call's deadline", async () => {
    // A gateway (load balancer, CDN) answering 503 with Retry-After for the next `busy` requests.
    let busy = 0;
    const sent: number[] = [];
    const gateway: FetchLike = async (url, init) => {
      sent.push(Date.now());
      if (busy > 0) {
        busy--;
        return new Response("overloaded", { status: 503, headers: { "retry-after": "1" } });
      }
      return fetch(url, init);
    };
    const { c } = client({ fetch: gateway });
    busy = 1;
    const seq = await c.publish("g", 1);
    expect(sent).toHaveLength(2);
    expect((sent[1] as number) - (sent[0] as number)).toBeGreaterThanOrEqual(1000);
    // A pause past the call's deadline is not taken: the call fails at once with the gateway's answer.
    busy = 1;
    sent.length = 0;
    const e = await failure(c.stats({ timeoutMs: 500 }));
    expect({ code: e.code, status: e.status }).toEqual({ code: "UNAVAILABLE", status: 503 });
    expect(sent).toHaveLength(1);
    // Never past `retries`.
    const { c: once } = client({ fetch: gateway, retries: 1 });
    busy = 5;
    sent.length = 0;
    await failure(once.claim("w", 30));
    expect(sent).toHaveLength(2);
    expect(await admin.claim("check", 30)).toMatchObject({ seq });
  });

  it("a call whose answer never comes ends at its timeout with TIMEOUT; a signal aborts a call", async () => {
    const { c } = client({ via: "proxy", timeoutMs: 5_000 });
    proxy.inject({ kind: "hang" }, { match: "GET /v1/stats" });
    const read = await failure(c.stats({ timeoutMs: 300 }));
    expect({ code: read.code, status: read.status, outcomeUnknown: read.outcomeUnknown }).toEqual({
      code: "TIMEOUT",
      status: undefined,
      outcomeUnknown: false,
    });
    expect(read.message).toBe("GET /v1/stats: no answer within 300 ms");

    proxy.inject({ kind: "hang" }, { match: "POST /v1/groups/g/messages" });
    const write = await failure(c.publish("g", 1, 0, { idempotencyKey: "hung-1", timeoutMs: 300 }));
    expect({ code: write.code, outcomeUnknown: write.outcomeUnknown }).toEqual({
      code: "TIMEOUT",
      outcomeUnknown: true,
    });
    // It may have been applied: the same key sent again is stored once.
    const seq = await c.publish("g", 1, 0, { idempotencyKey: "hung-1" });
    expect(await c.publish("g", 1, 0, { idempotencyKey: "hung-1" })).toBe(seq);
    expect((await c.stats()).ready).toBe(1);

    proxy.inject({ kind: "hang" }, { match: "GET /v1/groups" });
    const ctl = new AbortController();
    const hangs = proxy.stats.hang;
    const call = c.groups({ signal: ctl.signal });
    await waitFor(async () => proxy.stats.hang === hangs + 1, { what: "the request held" });
    ctl.abort(new Error("changed my mind"));
    await expect(call).rejects.toThrow("changed my mind");
  });
});

describe("long poll, acks with claims, delays", () => {
  it("claim with wait answers when a message comes; acks ride in the claim; a delayed publish waits its turn", async () => {
    const { c, log } = client();
    const waiting = c.claim("w", 30, undefined, { wait: 10 });
    await waitFor(async () => log.some((r) => r.path === "/v1/claims" && /"wait":10/.test(r.body ?? "")), {
      what: "the waiting claim sent",
    });
    await c.publish("g", "soon");
    const lease = (await waiting) as Lease;
    expect(lease.event).toBe("soon");
    await c.publish("g", "delayed", 0, { delay: 0.5 });
    await c.publish("h", "now");
    // The ack is issued in the same tick as the claim: it travels in the claim's request.
    const [, next] = await Promise.all([c.ack(lease), c.claim("w", 30)]);
    expect((next as Lease).event).toBe("now");
    const claimBody = JSON.parse(log.filter((r) => r.path === "/v1/claims").at(-1)?.body ?? "{}");
    expect(claimBody.ack).toEqual([lease.id]);
    expect(log.some((r) => r.path.endsWith("/ack"))).toBe(false);
    const delayed = (await c.claim("w", 30, undefined, { wait: 10 })) as Lease;
    expect(delayed.event).toBe("delayed");
  });
});

// Before the consume() tests: a long poll they abort lives on in the writer until its wait ends
// (docs/guarantees.md, "Open"), and would take the messages published here.
describe("push over HTTP", () => {
  it("a delivery answered 202 is the consumer's: leaseOfDelivery makes it a Lease to settle through the client", async () => {
    const c = client().c;
    const consumer = await startConsumer(() => ({ status: 202 }));
    try {
      await c.subscribe("later", { url: `${consumer.url}/later` });
      const seq = await c.publish("g", { n: 1 });
      await waitFor(async () => consumer.received.length === 1, { what: "the delivery" });
      const delivery = (consumer.received[0] as { delivery: Parameters<typeof leaseOfDelivery>[0] }).delivery;
      const lease = leaseOfDelivery<{ n: number }>(delivery);
      expect(lease).toEqual({
        id: delivery.lease_id,
        seq,
        groupId: "g",
        event: { n: 1 },
        workerId: "push:later",
        expiresAt: delivery.expires_at,
        attempts: 1,
      });
      expect((await c.stats()).inFlight).toBe(1);
      expect((await c.extend(lease, 60)).expiresAt).toBeGreaterThan(lease.expiresAt);
      await c.ack(lease);
      expect((await c.stats()).groups).toBe(0);
      expect(consumer.received).toHaveLength(1);
    } finally {
      await c.unsubscribe("later").catch(() => false);
      await consumer.close();
    }
  });

  it("subscribe: signed deliveries reach the consumer and are acked; unsubscribe stops them", async () => {
    const c = client().c;
    const consumer = await startConsumer(() => ({ status: 200 }));
    try {
      const sub = await c.subscribe("local", { url: `${consumer.url}/hook`, maxInFlight: 2 });
      expect(sub).toMatchObject({ name: "local", url: `${consumer.url}/hook`, maxInFlight: 2, minPriority: 0 });
      expect(sub.signingSecret).toMatch(/^[0-9a-f]{64}$/);
      expect(await c.subscriptions()).toEqual([
        { name: "local", url: `${consumer.url}/hook`, minPriority: 0, maxInFlight: 2, visibility: 30 },
      ]);
      for (let i = 0; i < 6; i++) await c.publish(`g${i % 2}`, { i });
      await waitFor(async () => consumer.received.length === 6 && (await c.stats()).groups === 0, {
        what: "six deliveries acked",
      });
      for (const r of consumer.received) {
        expect(await verifySignature(sub.signingSecret, r.signature, r.raw)).toBe(true);
      }
      expect(consumer.overlaps).toBe(0);
      expect(consumer.received.filter((r) => r.delivery.group_id === "g0").map((r) => r.delivery.event)).toEqual([
        { i: 0 },
        { i: 2 },
        { i: 4 },
      ]);
      expect(await c.unsubscribe("local")).toBe(true);
      await c.publish("g0", "after");
      expect((await c.stats()).ready).toBe(1);
      expect(consumer.received).toHaveLength(6);
    } finally {
      await c.unsubscribe("local").catch(() => false);
      await consumer.close();
    }
  });
});

describe("consume() over HTTP", () => {
  it("handles 1,000 messages with concurrency 16 exactly once, FIFO per group, each ack once", async () => {
    const { c, log } = client();
    const published = new Map<number, string>();
    for (let chunk = 0; chunk < 2; chunk++) {
      const batch = Array.from({ length: 500 }, (_, i) => ({ groupId: `g${i % 40}`, event: { n: chunk * 500 + i } }));
      const seqs = await c.publishMany(batch);
      for (const [i, s] of seqs.entries()) published.set(s, batch[i]?.groupId as string);
    }
    const ctl = new AbortController();
    const handled: { seq: number; groupId: string }[] = [];
    const busy = new Set<string>();
    const overlaps: string[] = [];
    const errors: unknown[] = [];
    const summary = await consume(
      c,
      async (_event, lease) => {
        if (busy.has(lease.groupId)) overlaps.push(`${lease.groupId} #${lease.seq}`);
        busy.add(lease.groupId);
        await new Promise((r) => setTimeout(r, lease.seq % 3));
        busy.delete(lease.groupId);
        handled.push({ seq: lease.seq, groupId: lease.groupId });
        if (handled.length === 1000) ctl.abort();
      },
      { workerId: "http", concurrency: 16, visibility: 60, signal: ctl.signal, onError: (e) => errors.push(e) },
    );
    expect(errors).toEqual([]);
    expect(summary).toMatchObject({ acked: 1000, nacked: 0, lost: 0, abandoned: 0 });
    expect(overlaps).toEqual([]);
    expect(new Set(handled.map((h) => h.seq)).size).toBe(1000);
    expect([...new Set(handled.map((h) => h.seq))].sort((x, y) => x - y)).toEqual(
      [...published.keys()].sort((x, y) => x - y),
    );
    const last = new Map<string, number>();
    for (const h of handled) {
      expect(h.groupId).toBe(published.get(h.seq));
      expect(h.seq, `FIFO in ${h.groupId}`).toBeGreaterThan(last.get(h.groupId) ?? 0);
      last.set(h.groupId, h.seq);
    }
    // Every lease acked exactly once: alone, in a settle, or riding in a claim the API accepted.
    const alone =
      log.filter((r) => r.path.endsWith("/ack") && r.status === 204).length +
      log
        .filter((r) => r.path === "/v1/settlements" && r.status === 200)
        .reduce((n, r) => n + (JSON.parse(r.body ?? "{}") as { leases: unknown[] }).leases.length, 0);
    const ridden = log
      .filter((r) => r.path === "/v1/claims" && r.status === 200)
      .reduce((n, r) => n + ((JSON.parse(r.body ?? "{}") as { ack?: string[] }).ack?.length ?? 0), 0);
    expect(alone + ridden).toBe(1000);
    // Most acks travel with the next claim: one round trip per message for a steady consumer.
    expect(ridden).toBeGreaterThan(alone);
    const refused = log.filter((r) => r.status !== 200 && r.status !== 201 && r.status !== 204);
    expect(refused).toEqual([]);
    expect(await c.stats()).toMatchObject({ ready: 0, waiting: 0, inFlight: 0, groups: 0 });
    await checkInvariants(clientOf(admin));
  });

  it("long-polls when idle (or polls for a server without `wait`), and stops at once on abort", async () => {
    const { c, log } = client();
    expect(c.maxClaimWait).toBe(20);
    const ctl = new AbortController();
    const seen: unknown[] = [];
    const errors: unknown[] = [];
    const done = consume(c, (e) => void seen.push(e), {
      workerId: "idle",
      concurrency: 4,
      signal: ctl.signal,
      onError: (e) => errors.push(e),
    });
    await waitFor(async () => log.some((r) => r.path === "/v1/claims" && /"wait":20/.test(r.body ?? "")), {
      what: "a claim asking to wait",
    });
    await c.publish("late", { late: true });
    await waitFor(async () => seen.length === 1, { what: "the late message handled" });
    ctl.abort();
    expect(await done).toMatchObject({ acked: 1 });
    expect(errors).toEqual([]);
    expect((await c.stats()).groups).toBe(0);
  });
});
