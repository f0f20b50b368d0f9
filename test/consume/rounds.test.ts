/**
 * consume() at a distance, against real sqld behind the latency proxy: a round claims every free
 * slot (the fewest claims of at most MAX_CLAIM_BATCH, sent in one tick, so one write batch carries them all, with the acks
 * of the slots they refill), rows per message stay those of a claim and an ack, a ShardedQueue's
 * shards do not wait for each other (a shard behind a slow proxy holds back none of the others),
 * and over HTTP a round is as few claim requests as carry it, at once, each with the acks of its slots.
 */
import { describe, expect, inject, it } from "vitest";
import { type Proxy as LatencyProxy, startProxy } from "../../scripts/support/proxy.js";
import { billed } from "../../scripts/support/sqld.js";
import { createApp } from "../../src/app/app.js";
import { sharedTransports } from "../../src/app/transports.js";
import { createClient, type FetchLike } from "../../src/client/index.js";
import { clientOf } from "../../src/core/internals.js";
import { consume, type Lease, LibsqlTransport, MAX_CLAIM_BATCH, ShardedQueue } from "../../src/index.js";
import { MAX_SHARDS, shardOf } from "../../src/rules.js";
import { checkInvariants, resetDatabase } from "../support/db.js";
import { freshNamespaces } from "../support/namespaces.js";

/** Text only a claim statement carries, once per claim (src/core/sql/claim.ts). */
const CLAIM = "tq_claimed_at AS stamp, tq_trace AS trace";
/** What a write batch's request carries (a Hrana 3 pipeline). */
const BATCH = '"type":"batch"';

const nsPort = () => Number(new URL(inject("nsSqldUrl")).port);
const { namespace, cleanups } = freshNamespaces("rounds");

async function proxied(latencyMs: number): Promise<LatencyProxy> {
  const proxy = await startProxy(nsPort());
  proxy.latencyMs = latencyMs;
  cleanups.push(() => proxy.close());
  return proxy;
}

/** Requests through `proxy`, and the claim statements each carried. */
function countRequests(proxy: LatencyProxy) {
  const requests: { claims: number }[] = [];
  // Write batches only (not the request that closes a stream left idle: src/core/hrana.ts).
  proxy.observe = (text) => {
    if (text.includes(BATCH)) requests.push({ claims: text.split(CLAIM).length - 1 });
  };
  return requests;
}

interface Handled {
  seq: number;
  groupId: string;
  n: number;
}

/** Checks a drain: every message once, each group's in publish order, never two of a group at once. */
function checkDrain(handled: Handled[], overlaps: string[], published: Map<number, string>): void {
  expect(overlaps, "two handlers of one group at once").toEqual([]);
  expect(handled.map((h) => h.seq).sort((a, b) => a - b)).toEqual([...published.keys()].sort((a, b) => a - b));
  const last = new Map<string, number>();
  for (const h of handled) {
    expect(h.groupId).toBe(published.get(h.seq));
    expect(h.n, `FIFO in ${h.groupId}`).toBeGreaterThan(last.get(h.groupId) ?? -1);
    last.set(h.groupId, h.n);
  }
}

/** A handler that records what it handled (and overlaps within a group), aborting `stop` after `total`. */
function recorder(total: number, stop: AbortController) {
  const handled: Handled[] = [];
  const busy = new Set<string>();
  const overlaps: string[] = [];
  const handler = async (event: { n: number }, lease: Lease<{ n: number }>) => {
    if (busy.has(lease.groupId)) overlaps.push(`${lease.groupId} #${lease.seq}`);
    busy.add(lease.groupId);
    await Promise.resolve();
    busy.delete(lease.groupId);
    handled.push({ seq: lease.seq, groupId: lease.groupId, n: event.n });
    if (handled.length === total) stop.abort();
  };
  return { handled, overlaps, handler };
}

describe("consume() claims every free slot per round trip", () => {
  it("at concurrency 256, 25 ms from sqld: ~256 messages ride each write batch, the acks with the claims, at the rows of a claim and an ack", async () => {
    const ns = await namespace("one");
    const proxy = await proxied(25);
    const t = await LibsqlTransport.create(proxy.url, { namespace: ns });
    cleanups.push(() => t.close());
    // 2 messages in each of 1,280 groups: 2,560 messages, 10 rounds of 256.
    const groups = 1280;
    const published = new Map<number, string>();
    for (let n = 0; n < 2; n++) {
      const batch = Array.from({ length: groups }, (_, g) => ({ groupId: `g${g}`, event: { n } }));
      for (let i = 0; i < batch.length; i += 500) {
        const part = batch.slice(i, i + 500);
        const seqs = await t.publishMany(part);
        for (const [k, s] of seqs.entries()) published.set(s, (part[k] as { groupId: string }).groupId);
      }
    }
    const rows0 = await billed(inject("nsAdminUrl"), ns);
    const requests = countRequests(proxy);
    const stop = new AbortController();
    const r = recorder(published.size, stop);
    const errors: unknown[] = [];
    const summary = await consume(t, r.handler, {
      workerId: "wide",
      concurrency: 256,
      signal: stop.signal,
      onError: (e) => errors.push(e),
    });
    const rows1 = await billed(inject("nsAdminUrl"), ns);

    expect(errors).toEqual([]);
    expect(summary).toMatchObject({ acked: published.size, nacked: 0, released: 0, lost: 0, abandoned: 0 });
    checkDrain(r.handled, r.overlaps, published);
    const claimBatches = requests.filter((q) => q.claims > 0);
    const perBatch = published.size / claimBatches.length;
    // A round of 256 is the fewest claims that carry it, in one batch, with the acks of the round before.
    const perRound = Math.ceil(256 / MAX_CLAIM_BATCH);
    expect(perBatch, `${claimBatches.length} batches carried claims`).toBeGreaterThan(200);
    expect(claimBatches.every((q) => q.claims <= perRound)).toBe(true);
    expect(claimBatches.filter((q) => q.claims === perRound).length).toBeGreaterThanOrEqual(8);
    // Every ack rode with a claim, but those of the last round (nothing left to claim for them).
    expect(requests.length - claimBatches.length).toBeLessThanOrEqual(1);
    // The rows of a claim and an ack (docs/architecture.md, "What it costs": 6 written, 22 read;
    // one group in two empties here, which writes a row less).
    const n = published.size;
    expect((rows1.written - rows0.written) / n).toBeLessThanOrEqual(6);
    expect((rows1.read - rows0.read) / n).toBeLessThanOrEqual(22);
    expect((await t.stats()).groups).toBe(0);
    await checkInvariants(clientOf(t));
  });
});

describe("consume() on a ShardedQueue: a round in flight per shard", () => {
  it("drains the fast shards while a shard 1.5 s away answers its first claim, then that shard too", async () => {
    const SHARDS = 4;
    const SLOW = 0;
    const spaces = await Promise.all(Array.from({ length: SHARDS }, (_, i) => namespace(`shard${i}`)));
    const proxy = await proxied(0);
    // Shard 0 through the proxy, the others straight to sqld.
    const shards = await Promise.all(
      spaces.map((ns, i) => LibsqlTransport.create(i === SLOW ? proxy.url : inject("nsSqldUrl"), { namespace: ns })),
    );
    const queue = new ShardedQueue(shards);
    cleanups.push(() => queue.close());
    for (const s of shards) await resetDatabase(clientOf(s));
    // 3 messages in each of 20 groups on every fast shard, 1 in each of 6 groups on the slow one.
    const groupsOf = (shard: number, count: number) =>
      Array.from({ length: 400 }, (_, i) => `s${shard}-${i}`)
        .filter((g) => shardOf(g, SHARDS) === shard)
        .slice(0, count);
    const messages = [
      ...[1, 2, 3].flatMap((s) =>
        [0, 1, 2].flatMap((n) => groupsOf(s, 20).map((groupId) => ({ groupId, event: { n } }))),
      ),
      ...groupsOf(SLOW, 6).map((groupId) => ({ groupId, event: { n: 0 } })),
    ];
    const seqs = await queue.publishMany(messages);
    const published = new Map(seqs.map((s, i) => [s, (messages[i] as { groupId: string }).groupId]));
    const fast = messages.length - 6;

    proxy.latencyMs = 1500;
    const slowRequests = countRequests(proxy);
    const stop = new AbortController();
    const r = recorder(published.size, stop);
    let slowAtFastDrained = -1;
    const errors: unknown[] = [];
    const summary = await consume(
      queue,
      async (event: { n: number }, lease: Lease<{ n: number }>) => {
        await r.handler(event, lease);
        if (r.handled.filter((h) => h.seq % MAX_SHARDS !== SLOW).length === fast && slowAtFastDrained < 0) {
          slowAtFastDrained = slowRequests.length;
        }
      },
      { workerId: "lanes", concurrency: 64, signal: stop.signal, onError: (e) => errors.push(e) },
    );

    proxy.latencyMs = 0;
    expect(errors).toEqual([]);
    expect(summary).toMatchObject({ acked: published.size, nacked: 0, released: 0, lost: 0, abandoned: 0 });
    checkDrain(r.handled, r.overlaps, published);
    // Every message of the fast shards was handled before the first of the slow shard: a claim
    // over all shards at once (answered when the slowest answers) would have brought them together.
    const firstSlow = r.handled.findIndex((h) => h.seq % MAX_SHARDS === SLOW);
    expect(firstSlow).toBe(fast);
    // By then the slow shard had been sent one request: its first round, still out.
    expect(slowAtFastDrained).toBe(1);
    expect(slowRequests[0]?.claims).toBe(1);
    expect((await queue.stats()).groups).toBe(0);
    for (const s of shards) await checkInvariants(clientOf(s));
  });
});

describe("consume() over HTTP: a round is as many claim requests as it needs, at once", () => {
  it("at concurrency 256 sends a round as the fewest claim requests that carry it, together, each carrying the acks of the slots it refills", async () => {
    const TOKEN = "consume-rounds-test-token-0123456789";
    const admin = await LibsqlTransport.create(inject("sqldUrl"));
    cleanups.push(() => admin.close());
    await resetDatabase(clientOf(admin));
    const proxy = await startProxy(Number(new URL(inject("sqldUrl")).port));
    cleanups.push(() => proxy.close());
    proxy.latencyMs = 25;
    // The API in this process, over one shared transport (a long-lived server), 25 ms from sqld.
    const app = createApp(sharedTransports(), { dbConcurrency: Number.POSITIVE_INFINITY });
    const env = { TURSO_DATABASE_URL: proxy.url, QUEUE_TOKEN: TOKEN };
    const claims: { max: number; acks: number; together: number }[] = [];
    let out = 0;
    let alone = 0;
    const settles: number[] = [];
    const fetch: FetchLike = async (url, init) => {
      const path = new URL(url).pathname;
      const claim = path === "/v1/claims";
      if (claim) {
        out++;
        const body = JSON.parse(init.body ?? "{}") as { max: number; ack?: string[] };
        claims.push({ max: body.max, acks: body.ack?.length ?? 0, together: out });
      }
      if (path.endsWith("/ack")) alone++;
      if (path === "/v1/settlements")
        settles.push((JSON.parse(init.body ?? "{}") as { leases: unknown[] }).leases.length);
      try {
        return await app.fetch(new Request(url, init), env);
      } finally {
        if (claim) out--;
      }
    };
    const c = createClient({ url: "http://queue.test", token: TOKEN, fetch });
    const published = new Map<number, string>();
    for (let n = 0; n < 2; n++) {
      const batch = Array.from({ length: 640 }, (_, g) => ({ groupId: `g${g}`, event: { n } }));
      const seqs = await admin.publishMany(batch);
      for (const [k, s] of seqs.entries()) published.set(s, (batch[k] as { groupId: string }).groupId);
    }
    const requests = countRequests(proxy);
    const stop = new AbortController();
    const r = recorder(published.size, stop);
    const errors: unknown[] = [];
    const summary = await consume(c, r.handler, {
      workerId: "http-wide",
      concurrency: 256,
      signal: stop.signal,
      onError: (e) => errors.push(e),
    });

    expect(errors).toEqual([]);
    expect(summary).toMatchObject({ acked: published.size, nacked: 0, released: 0, lost: 0, abandoned: 0 });
    checkDrain(r.handled, r.overlaps, published);
    // Each request asks at most MAX_CLAIM_BATCH; a round's requests are out at once.
    const perRound = Math.ceil(256 / MAX_CLAIM_BATCH);
    expect(claims.every((q) => q.max <= MAX_CLAIM_BATCH)).toBe(true);
    expect(Math.max(...claims.map((q) => q.together))).toBe(perRound);
    expect(claims.filter((q) => q.max === Math.ceil(256 / perRound)).length).toBeGreaterThanOrEqual(4);
    // Every ack rode in a claim, but those of the last round (nothing left to claim), which go
    // together in one settle: exactly once each.
    const ridden = claims.reduce((n, q) => n + q.acks, 0);
    const settled = settles.reduce((n, k) => n + k, 0);
    expect(ridden + alone + settled).toBe(published.size);
    expect(alone + settled).toBeLessThanOrEqual(256);
    expect(alone + settles.length).toBeLessThanOrEqual(2);
    // The API's group commit carries a round's claims (and their acks) in one write batch.
    const claimBatches = requests.filter((q) => q.claims > 0);
    expect(published.size / claimBatches.length).toBeGreaterThan(100);
    await checkInvariants(clientOf(admin));
  });
});
