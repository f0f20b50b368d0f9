/**
 * Named and sharded queues through the Worker and its QueueWriters inside workerd: each queue in a
 * database of its own (namespaces of a second sqld, named by the Worker's static map), isolated from
 * the others; a sharded queue over four, with FIFO and one lease per group under 64 concurrent
 * claimers, long polls and pushes woken by any shard; unknown and hostile queue names refused with
 * nothing made.
 */
import { env } from "cloudflare:workers";
import fc from "fast-check";
import { beforeAll, describe, expect, inject, it } from "vitest";
import type * as T from "../../src/contract/types.js";
import { MAX_SHARDS, shardOf } from "../../src/rules.js";
import { waitFor } from "../support/wait.js";
import { api, post, resetDatabase, withoutQueues } from "./support.js";

const queueNames = async () => (await api<T.QueueList>("/v1/queues")).body.queues.map((q) => q.name);

beforeAll(resetDatabase);
withoutQueues("emails", "billing");

describe("named queues", () => {
  it("are made once (201, then 200), listed with their counts, and refuse a new shard count", async () => {
    const made = await api<T.QueueAnswer>("/v1/queues/emails", { method: "PUT", json: {} });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ name: "emails", shards: 1, created: true });
    const again = await api<T.QueueAnswer>("/v1/queues/emails", { method: "PUT" });
    expect(again.status).toBe(200);
    expect(again.body.created).toBe(false);
    const list = await api<T.QueueList>("/v1/queues");
    expect(list.body.queues.map((q) => q.name)).toEqual(["default", "emails"]);
    expect(list.body.queues[1]?.stats).toMatchObject({ ready: 0, groups: 0 });
    const changed = await api("/v1/queues/emails", { method: "PUT", json: { shards: 4 } });
    expect(changed.status).toBe(400);
    expect(changed.body).toMatchObject({ error: { code: "INVALID_ARGUMENT" } });
    expect(changed.text).toContain("shards: cannot change from 1 to 4");
  });

  it("are isolated: what is published in one is claimed, counted and dead-lettered only there", async () => {
    await post("/v1/groups/g/messages", { event: "default-1" });
    await post("/v1/queues/emails/groups/g/messages", { event: "emails-1" });
    await post("/v1/queues/emails/groups/h/messages", { event: "emails-2" });
    expect((await api<T.Stats>("/v1/stats")).body.ready).toBe(1);
    expect((await api<T.Stats>("/v1/queues/emails/stats")).body.ready).toBe(2);
    const fromEmails = await post<T.LeaseList>("/v1/queues/emails/claims", { worker_id: "w", visibility: 30, max: 10 });
    expect(fromEmails.body.leases.map((l) => l.event).sort()).toEqual(["emails-1", "emails-2"]);
    const fromDefault = await post<T.Lease>("/v1/claims", { worker_id: "w", visibility: 30 });
    expect(fromDefault.body.event).toBe("default-1");
    // A lease of one queue means nothing in another.
    const lease = fromEmails.body.leases[0] as T.Lease;
    const wrong = await post(`/v1/leases/${lease.lease_id}/ack`);
    expect(wrong.status).toBeGreaterThanOrEqual(400);
    expect((await post(`/v1/queues/emails/leases/${lease.lease_id}/ack`)).status).toBe(204);
    expect((await post(`/v1/leases/${fromDefault.body.lease_id}/ack`)).status).toBe(204);
    const groups = await api<T.GroupList>("/v1/queues/emails/groups");
    expect(groups.body.groups.map((g) => g.group_id)).toEqual([(fromEmails.body.leases[1] as T.Lease).group_id]);
  });

  it("an unknown queue is 404 QUEUE_NOT_FOUND, and a publish to it makes nothing", async () => {
    const before = await queueNames();
    const res = await post("/v1/queues/emials/groups/g/messages", { event: 1 });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: { code: "QUEUE_NOT_FOUND" } });
    expect(res.text).toContain("queue: no queue emials");
    expect((await api("/v1/queues/emials")).status).toBe(404);
    expect(await queueNames()).toEqual(before);
  });

  it("hostile queue names are a 400 naming the queue, and make nothing (fuzzed)", async () => {
    const before = await queueNames();
    const bad = fc.oneof(
      fc
        .string({ minLength: 1, maxLength: 60 })
        .filter((s) => !/^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$/.test(s) || s.includes("--")),
      // ("..", "%2e%2e" are dot segments: the URL parser removes them before any server sees the path.)
      fc.constantFrom("Emails", "a--b", "-a", "a-", "x".repeat(41), "a%2Fb", "%ZZ", "ümlaut", "a b", "a.b"),
    );
    await fc.assert(
      fc.asyncProperty(bad, fc.constantFrom("PUT", "POST"), async (name, method) => {
        const segment = name.startsWith("%") || name.includes("%2") ? name : encodeURIComponent(name);
        const path = method === "PUT" ? `/v1/queues/${segment}` : `/v1/queues/${segment}/groups/g/messages`;
        const res = await api(path, { method, json: method === "PUT" ? {} : { event: 1 } });
        // A name with a "/" or "." may route elsewhere (404); never a 2xx, never a 5xx.
        expect(res.status, `${method} ${path}`).toBeGreaterThanOrEqual(400);
        expect(res.status, `${method} ${path}`).toBeLessThan(500);
        if (res.status === 400) expect(res.text, path).toContain('"message":"queue: ');
      }),
      { numRuns: 60 },
    );
    expect(await queueNames()).toEqual(before);
  });

  it("is deleted only when empty, unless forced; then it is gone", async () => {
    expect((await api<T.QueueAnswer>("/v1/queues/spare", { method: "PUT" })).status).toBe(201);
    await post("/v1/queues/spare/groups/g/messages", { event: 1 });
    const refused = await api("/v1/queues/spare", { method: "DELETE" });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ error: { code: "QUEUE_NOT_EMPTY" } });
    expect((await api("/v1/queues/spare?force=true", { method: "DELETE" })).status).toBe(204);
    expect((await api("/v1/queues/spare", { method: "DELETE" })).status).toBe(404);
    expect(await queueNames()).not.toContain("spare");
    expect((await api("/v1/queues/default", { method: "DELETE" })).status).toBe(400);
  });
});

describe("a queue sharded over four databases", () => {
  const SHARDS = 4;
  /** A group on each shard. */
  const groupOn = (shard: number, from = 0) =>
    Array.from({ length: 500 }, (_, i) => `g-${from + i}`).find((g) => shardOf(g, SHARDS) === shard) as string;

  beforeAll(async () => {
    const made = await api<T.QueueAnswer>("/v1/queues/billing", { method: "PUT", json: { shards: SHARDS } });
    expect(made.status).toBe(201);
    expect(made.body.shards).toBe(SHARDS);
  });

  it("keeps FIFO and one lease per group under 64 concurrent claimers", async () => {
    const GROUPS = 16;
    const PER = 6;
    const messages = Array.from({ length: GROUPS * PER }, (_, k) => ({
      group_id: `fifo-${k % GROUPS}`,
      event: { index: Math.floor(k / GROUPS) },
    }));
    const pub = await post<T.PublishBatchAnswer>("/v1/queues/billing/messages", { messages });
    expect(pub.status).toBe(201);
    expect(new Set(pub.body.seqs.map((s) => s % MAX_SHARDS)).size).toBe(SHARDS);
    const seen = new Map<string, number[]>();
    const held = new Map<string, string>();
    let overlaps = 0;
    let done = 0;
    const deadline = Date.now() + 60_000;
    await Promise.all(
      Array.from({ length: 64 }, async (_, c) => {
        while (done < messages.length && Date.now() < deadline) {
          const got = await post<T.Lease>("/v1/queues/billing/claims", { worker_id: `c${c}`, visibility: 60 });
          if (got.status === 204) {
            await new Promise((r) => setTimeout(r, 10));
            continue;
          }
          expect(got.status).toBe(200);
          const l = got.body;
          if (held.has(l.group_id)) overlaps++;
          held.set(l.group_id, l.lease_id);
          seen.set(l.group_id, [...(seen.get(l.group_id) ?? []), (l.event as { index: number }).index]);
          held.delete(l.group_id);
          expect((await post(`/v1/queues/billing/leases/${l.lease_id}/ack`)).status).toBe(204);
          done++;
        }
      }),
    );
    expect(done).toBe(messages.length);
    expect(overlaps).toBe(0);
    for (const [g, order] of seen) expect(order, g).toEqual(Array.from({ length: PER }, (_, i) => i));
    expect((await api<T.Stats>("/v1/queues/billing/stats")).body).toMatchObject({ ready: 0, waiting: 0, groups: 0 });
  });

  it("a long poll is answered by a message published on any shard", async () => {
    for (const shard of [3, 0]) {
      const waiting = post<T.Lease>("/v1/queues/billing/claims", { worker_id: "poller", visibility: 30, wait: 10 });
      await new Promise((r) => setTimeout(r, 300));
      const group = groupOn(shard);
      await post(`/v1/queues/billing/groups/${group}/messages`, { event: { shard } });
      const got = await waiting;
      expect(got.status).toBe(200);
      expect(got.body).toMatchObject({ group_id: group, event: { shard } });
      expect(got.body.seq % MAX_SHARDS).toBe(shard);
      expect((await post(`/v1/queues/billing/leases/${got.body.lease_id}/ack`)).status).toBe(204);
    }
  });

  it("pushes what is published on every shard to a subscription, signed with one secret", async () => {
    const path = `/billing-push/${Date.now()}`;
    const sub = await api<T.SubscriptionAnswer>("/v1/queues/billing/subscriptions/hooks", {
      method: "PUT",
      json: { url: `${inject("consumerUrl")}${path}` },
    });
    expect(sub.status).toBe(200);
    const groups = [0, 1, 2, 3].map((s) => groupOn(s, 1000));
    for (const g of groups) await post(`/v1/queues/billing/groups/${g}/messages`, { event: g });
    const received = await waitFor(
      async () => {
        const r = await fetch(`${inject("consumerLogUrl")}/?path=${encodeURIComponent(path)}`);
        const got = (await r.json()) as Array<{ raw: string }>;
        return got.length >= 4 ? got.map((x) => JSON.parse(x.raw) as T.PushDelivery) : undefined;
      },
      { what: "a delivery from every shard", timeoutMs: 30_000 },
    );
    expect(new Set(received.map((d) => d.seq % MAX_SHARDS))).toEqual(new Set([0, 1, 2, 3]));
    expect(received.map((d) => d.group_id).sort()).toEqual([...groups].sort());
    const list = await api<T.SubscriptionList>("/v1/queues/billing/subscriptions");
    expect(list.body.subscriptions.map((s) => s.name)).toEqual(["hooks"]);
    expect((await api("/v1/queues/billing/subscriptions/hooks", { method: "DELETE" })).status).toBe(204);
    await waitFor(async () => (await api<T.Stats>("/v1/queues/billing/stats")).body.groups === 0, {
      what: "the pushed messages acked",
    });
  });

  it("adds its shards up in stats and the queue list, and its dead letters page in seq order", async () => {
    const groups = [0, 1, 2, 3].map((s) => groupOn(s, 2000));
    await post("/v1/queues/billing/messages", { messages: groups.map((g) => ({ group_id: g, event: g })) });
    expect((await api<T.Stats>("/v1/queues/billing/stats")).body).toMatchObject({ ready: 4, groups: 4 });
    const listed = (await api<T.QueueList>("/v1/queues")).body.queues.find((q) => q.name === "billing");
    expect(listed).toMatchObject({ shards: 4, stats: { ready: 4, groups: 4 } });
    for (let round = 0; round < 5; round++) {
      const got = await post<T.LeaseList>("/v1/queues/billing/claims", { worker_id: "p", visibility: 30, max: 10 });
      for (const l of got.body.leases) await post(`/v1/queues/billing/leases/${l.lease_id}/nack`);
    }
    const dead = await api<T.DeadLetterPage>("/v1/queues/billing/dead-letters?limit=3");
    expect(dead.body.dead_letters).toHaveLength(3);
    const rest = await api<T.DeadLetterPage>(`/v1/queues/billing/dead-letters?after_seq=${dead.body.next_after_seq}`);
    const seqs = [...dead.body.dead_letters, ...rest.body.dead_letters].map((d) => d.seq);
    expect(seqs).toHaveLength(4);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    const redriven = await post<T.RedriveAnswer>(`/v1/queues/billing/dead-letters/${seqs[2]}/redrive`);
    expect(redriven.status).toBe(201);
    expect(redriven.body.seq % MAX_SHARDS).toBe((seqs[2] as number) % MAX_SHARDS);
  });
});

void env;
