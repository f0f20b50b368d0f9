/**
 * A sharded queue through the Worker keeps one queue's promises (issue 30 items 2, 3, 9; issue 26
 * item 3), inside workerd, each shard behind its own QueueWriter:
 * - an Idempotency-Key is exact across the queue: the same key into groups on different shards is
 *   one key (409, nothing stored); a keyed batch sent again changed, or cut down, is refused with
 *   nothing stored, and sent again as it was, answers its first seqs;
 * - a queue whose database is another queue's shard (the static map pointing two queues at one
 *   database) is not made (SHARD_MISMATCH, nothing stored), and the queue it belongs to goes on;
 * - errors name the queue's seqs and `lease_id`;
 * - a shard whose primary goes down (a proxy refusing every connection to shaky--2) holds back no
 *   other: claims, long polls and publishes to the others' groups are served, publishes to its
 *   groups answer a retryable 503, stats and the queue list say which shard is unreachable, and
 *   everything resumes when it is back.
 */
import { beforeAll, describe, expect, inject, it } from "vitest";
import type * as T from "../../src/contract/types.js";
import { MAX_SHARDS, shardOf } from "../../src/rules.js";
import { waitFor } from "../support/wait.js";
import { api, post, resetDatabase, withoutQueues } from "./support.js";

const SHARDS = 4;
/** A group on shard `shard` (the `k`-th found). */
const groupOn = (shard: number, k = 0) =>
  Array.from({ length: 400 }, (_, i) => `grp-${i}`).filter((g) => shardOf(g, SHARDS) === shard)[k] as string;

const stats = async (queue: string) => (await api<T.Stats>(`/v1/queues/${queue}/stats`)).body;
const total = (s: T.Stats) => s.ready + s.waiting + s.in_flight + s.parked + s.delayed;

beforeAll(resetDatabase);
withoutQueues("billing", "mixed", "shaky");

describe("idempotency keys on a sharded queue", () => {
  beforeAll(async () => {
    expect((await api("/v1/queues/billing", { method: "PUT", json: { shards: SHARDS } })).status).toBe(201);
  });

  it("the same key into groups on different shards is one key: 409, nothing stored", async () => {
    const headers = { "idempotency-key": "checkout-1" };
    const first = await post<T.PublishAnswer>(
      `/v1/queues/billing/groups/${groupOn(0)}/messages`,
      { event: 1 },
      { headers },
    );
    expect(first.status).toBe(201);
    const again = await post<T.PublishAnswer>(
      `/v1/queues/billing/groups/${groupOn(0)}/messages`,
      { event: 1 },
      { headers },
    );
    expect(again.body.seq).toBe(first.body.seq);
    for (const shard of [1, 2, 3]) {
      const other = await post(`/v1/queues/billing/groups/${groupOn(shard)}/messages`, { event: 1 }, { headers });
      expect(other.status).toBe(409);
      expect(other.body).toMatchObject({ error: { code: "IDEMPOTENCY_CONFLICT" } });
      expect(other.body.error.message).toMatch(/^Idempotency-Key: /);
    }
    expect(total(await stats("billing"))).toBe(1);
  });

  it("a keyed batch over every shard: again, its first seqs; changed or cut, 409 with nothing stored", async () => {
    const headers = { "idempotency-key": "batch-7" };
    const messages = Array.from({ length: 8 }, (_, k) => ({ group_id: groupOn(k % SHARDS, 5 + k), event: { k } }));
    const before = total(await stats("billing"));
    const first = await post<T.PublishBatchAnswer>("/v1/queues/billing/messages", { messages }, { headers });
    expect(first.status).toBe(201);
    expect(new Set(first.body.seqs.map((s) => s % MAX_SHARDS)).size).toBe(SHARDS);
    const again = await post<T.PublishBatchAnswer>("/v1/queues/billing/messages", { messages }, { headers });
    expect(again.body.seqs).toEqual(first.body.seqs);
    for (const other of [messages.map((m, k) => (k === 3 ? { ...m, event: "changed" } : m)), messages.slice(0, 2)]) {
      const refused = await post("/v1/queues/billing/messages", { messages: other }, { headers });
      expect(refused.status).toBe(409);
    }
    expect(total(await stats("billing"))).toBe(before + 8);
  });

  it("errors name the queue's seq and lease_id, as one database's do", async () => {
    await post(`/v1/queues/billing/groups/${groupOn(3, 30)}/messages`, { event: "x" });
    let lease: T.Lease | undefined;
    await waitFor(async () => {
      const got = await post<T.Lease>("/v1/queues/billing/claims", { worker_id: "w", visibility: 30 });
      if (got.status === 200 && got.body.group_id === groupOn(3, 30)) lease = got.body;
      else if (got.status === 200) await post(`/v1/queues/billing/leases/${got.body.lease_id}/ack`);
      return lease;
    });
    const l = lease as T.Lease;
    expect(l.seq % MAX_SHARDS).toBe(3);
    expect((await post(`/v1/queues/billing/leases/${l.lease_id}/ack`)).status).toBe(204);
    const gone = await post(`/v1/queues/billing/leases/${l.lease_id}/ack`);
    expect(gone.status).toBe(404);
    expect(gone.body.error.message).toBe(`lease_id: message ${l.seq} no longer exists (acked or dead-lettered)`);
    const extended = await post(`/v1/queues/billing/leases/${l.lease_id}/extend`, { visibility: 10 });
    expect(extended.body.error.message).toBe(`lease_id: message ${l.seq} no longer exists (acked or dead-lettered)`);
    const seq = 9 * MAX_SHARDS + 3;
    const redrive = await post(`/v1/queues/billing/dead-letters/${seq}/redrive`);
    expect(redrive.status).toBe(404);
    expect(redrive.body.error.message).toBe(`seq: no dead letter ${seq}`);
  });
});

describe("each shard knows its place", () => {
  it("a queue whose database is another queue's shard is not made; that queue goes on", async () => {
    // billing's shards have been used (their places stored); mixed--1 is mapped onto billing--1's database.
    await post(`/v1/queues/billing/groups/${groupOn(1, 40)}/messages`, { event: "billing" });
    const refused = await api("/v1/queues/mixed", { method: "PUT", json: { shards: 2 } });
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ error: { code: "SHARD_MISMATCH" } });
    expect(refused.body.error.message).toMatch(/shard 1 of 4 of queue "billing", not shard 1 of 2 of queue "mixed"/);
    // Nothing stored: no such queue, and billing's messages where they were.
    expect((await api("/v1/queues/mixed")).status).toBe(404);
    expect((await api<T.QueueList>("/v1/queues")).body.queues.map((q) => q.name)).not.toContain("mixed");
    const peek = await api<T.PeekAnswer>(`/v1/queues/billing/groups/${groupOn(1, 40)}/messages`);
    expect(peek.body.messages.map((m) => m.event)).toEqual(["billing"]);
  });
});

describe("a shard down holds back no other shard", () => {
  const control = inject("shardControlUrl");
  const set = (refuse: boolean) =>
    fetch(`${control}/set`, { method: "POST", body: JSON.stringify({ refuse }) }).then((r) => r.text());
  const cutAll = () => fetch(`${control}/cut-all`, { method: "POST", body: "{}" }).then((r) => r.text());
  const DOWN = 2;

  it("claims, long polls and the others' publishes are served; its own fail retryably; stats say which; all resumes", async () => {
    expect((await api("/v1/queues/shaky", { method: "PUT", json: { shards: SHARDS } })).status).toBe(201);
    const messages = [0, 1, 2, 3].flatMap((s) => [0, 1].map((k) => ({ group_id: groupOn(s, k), event: { s, k } })));
    expect((await post("/v1/queues/shaky/messages", { messages })).status).toBe(201);
    await set(true);
    await cutAll();
    try {
      // Its groups: a retryable 503 or 504 (once its writer gave up: the transport's deadline).
      const down = await post(`/v1/queues/shaky/groups/${groupOn(DOWN, 5)}/messages`, { event: { s: DOWN } });
      expect([503, 504]).toContain(down.status);
      expect(down.body.error.code).toMatch(/^(UNAVAILABLE|TIMEOUT)$/);
      expect(down.headers.get("retry-after")).not.toBeNull();
      // The others' groups: stored.
      expect((await post(`/v1/queues/shaky/groups/${groupOn(0, 5)}/messages`, { event: { s: 0, k: 5 } })).status).toBe(
        201,
      );
      // Stats: the other shards' counts, and which shard did not answer; the queue list too.
      const s = await stats("shaky");
      expect(s.unreachable_shards).toEqual([{ shard: DOWN, code: expect.stringMatching(/UNAVAILABLE|TIMEOUT/) }]);
      expect(s.ready).toBe(7);
      const listed = (await api<T.QueueList>("/v1/queues")).body.queues.find((q) => q.name === "shaky");
      expect(listed?.stats?.unreachable_shards?.map((u) => u.shard)).toEqual([DOWN]);
      // Claims: every message of the other shards, none held back.
      const got: Array<{ s: number; k: number }> = [];
      for (let round = 0; round < 10 && got.length < 7; round++) {
        const claimed = await post<T.LeaseList>("/v1/queues/shaky/claims", { worker_id: "w", visibility: 30, max: 10 });
        for (const l of claimed.body?.leases ?? []) {
          got.push(l.event as { s: number; k: number });
          expect((await post(`/v1/queues/shaky/leases/${l.lease_id}/ack`)).status).toBe(204);
        }
      }
      expect(got).toHaveLength(7);
      expect(got.every((e) => e.s !== DOWN)).toBe(true);
      // A long poll is answered by a publish on another shard.
      const waiting = post<T.Lease>("/v1/queues/shaky/claims", { worker_id: "poller", visibility: 30, wait: 10 });
      await new Promise((r) => setTimeout(r, 300));
      await post(`/v1/queues/shaky/groups/${groupOn(3, 6)}/messages`, { event: { s: 3, k: 6 } });
      const polled = await waiting;
      expect(polled.status).toBe(200);
      expect(polled.body.event).toEqual({ s: 3, k: 6 });
      expect((await post(`/v1/queues/shaky/leases/${polled.body.lease_id}/ack`)).status).toBe(204);
    } finally {
      await set(false);
    }
    // Back: its messages are delivered, and stats count it again.
    const back: Array<{ s: number; k: number }> = [];
    await waitFor(
      async () => {
        const claimed = await post<T.LeaseList>("/v1/queues/shaky/claims", { worker_id: "w", visibility: 30, max: 10 });
        for (const l of claimed.body?.leases ?? []) {
          back.push(l.event as { s: number; k: number });
          await post(`/v1/queues/shaky/leases/${l.lease_id}/ack`);
        }
        return back.length >= 2;
      },
      { timeoutMs: 60_000, intervalMs: 200, what: "the shard back" },
    );
    expect(back.every((e) => e.s === DOWN)).toBe(true);
    await waitFor(async () => (await stats("shaky")).unreachable_shards === undefined, {
      timeoutMs: 60_000,
      intervalMs: 200,
      what: "stats of every shard",
    });
    expect(await stats("shaky")).toMatchObject({ ready: 0, waiting: 0, in_flight: 0 });
  });
});
