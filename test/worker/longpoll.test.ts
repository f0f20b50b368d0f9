/**
 * Long-poll claims and acks riding with claims, through the Worker and its QueueWriter, against the
 * real sqld behind a counting proxy (test/worker/global-setup.ts).
 */
import { beforeEach, describe, expect, it } from "vitest";
import { dispatchers } from "../../src/app/writer/dispatcher.js";
import type * as T from "../../src/contract/types.js";
import { waitFor } from "../support/wait.js";
import { api, CLAIM, post, resetDatabase, rowCounts, sqldRequests } from "./support.js";

beforeEach(resetDatabase);

const ACK = "DELETE FROM messages WHERE seq = ? AND tq_lease";

const waiting = () => dispatchers().reduce((n, d) => n + d.waiting, 0);

describe("long poll (wait)", () => {
  it("16 waiters get the 16 messages published after they started waiting, one each", async () => {
    const answers = Array.from({ length: 16 }, (_, i) =>
      post<T.Lease>("/v1/claims", { worker_id: `w${i}`, visibility: 30, wait: 10 }),
    );
    await waitFor(async () => waiting() === 16, { what: "16 waiters held by the writer" });
    const messages = Array.from({ length: 16 }, (_, i) => ({ group_id: `g${i}`, event: i }));
    expect((await post("/v1/messages", { messages })).status).toBe(201);
    const got = await Promise.all(answers);
    expect(got.map((a) => a.status)).toEqual(Array(16).fill(200));
    expect(got.map((a) => a.body.event).sort((a, b) => Number(a) - Number(b))).toEqual(
      Array.from({ length: 16 }, (_, i) => i),
    );
    expect(waiting()).toBe(0);
  });

  it("while nothing changes, the writer sends no claim beyond its safety re-check, whatever the waiters", async () => {
    const answers = Array.from({ length: 16 }, (_, i) =>
      post("/v1/claims", { worker_id: `idle${i}`, visibility: 30, wait: 5 }),
    );
    await waitFor(async () => waiting() === 16, { what: "16 waiters held by the writer" });
    await sqldRequests(CLAIM);
    const before = await sqldRequests(CLAIM);
    const got = await Promise.all(answers);
    expect(got.map((a) => a.status)).toEqual(Array(16).fill(204));
    // 16 waiters polling every second would send 80 claims in 5 s; the writer re-checks every 2 s,
    // for all of them in one batch: 2 batches (3 if the clocks fall that way).
    expect((await sqldRequests(CLAIM)) - before).toBeLessThanOrEqual(3);
  });

  it("a waiter with max answers with what one claim got; wait over: an empty list", async () => {
    const empty = await post("/v1/claims", { worker_id: "w", visibility: 30, max: 4, wait: 0.3 });
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({ leases: [] });
    const pending = post<T.LeaseList>("/v1/claims", { worker_id: "w", visibility: 30, max: 4, wait: 10 });
    await waitFor(async () => waiting() === 1, { what: "one waiter" });
    await post("/v1/messages", { messages: [1, 2, 3].map((i) => ({ group_id: `g${i}`, event: i })) });
    const a = await pending;
    expect(a.status).toBe(200);
    expect(a.body.leases.map((l) => l.event)).toEqual([1, 2, 3]);
  });

  it("wakes when a park ends, with no write to tell it", async () => {
    await post("/v1/groups/g/messages", { event: "parked" });
    const first = await post<T.Lease>("/v1/claims", { worker_id: "w", visibility: 30 });
    expect((await post(`/v1/leases/${first.body.lease_id}/nack`, { delay: 0.5 })).status).toBe(204);
    const again = await post<T.Lease>("/v1/claims", { worker_id: "w", visibility: 30, wait: 10 });
    expect(again.status).toBe(200);
    expect([again.body.event, again.body.attempts]).toEqual(["parked", 2]);
  });

  it("a delayed message is delivered to a waiter once due, after the one published before it", async () => {
    await post("/v1/groups/g/messages", { event: "later", delay: 0.6 });
    await post("/v1/groups/g/messages", { event: "after" });
    await post("/v1/groups/h/messages", { event: "other" });
    const a = await post<T.Lease>("/v1/claims", { worker_id: "w", visibility: 30 });
    expect(a.body.event).toBe("other");
    const b = await post<T.Lease>("/v1/claims", { worker_id: "w", visibility: 30, wait: 10 });
    expect(b.body.event).toBe("later");
    expect(b.body.expires_at - 30).toBeGreaterThanOrEqual(a.body.expires_at - 30 + 0.5);
  });

  it("a waiter whose client goes away strands no lease: the next claimer gets the message at once", async () => {
    const gone = new AbortController();
    const answer = post("/v1/claims", { worker_id: "gone", visibility: 300, wait: 10 }, { signal: gone.signal });
    await waitFor(async () => waiting() === 1, { what: "one waiter" });
    gone.abort();
    await expect(answer).rejects.toThrow();
    await waitFor(async () => waiting() === 0, { what: "the writer to drop the waiter" });
    await post("/v1/groups/g/messages", { event: "kept" });
    const next = await post<T.Lease>("/v1/claims", { worker_id: "next", visibility: 30 });
    expect([next.status, next.body.event, next.body.attempts]).toEqual([200, "kept", 1]);
  });

  it("wait 0 is today's claim: 204 at once", async () => {
    const a = await post("/v1/claims", { worker_id: "w", visibility: 30, wait: 0 });
    expect(a.status).toBe(204);
  });
});

describe("acks riding with a claim", () => {
  it("acks first, in the claim's own database request, each outcome in the answer", async () => {
    await post("/v1/messages", {
      messages: [
        { group_id: "g", event: 1 },
        { group_id: "g", event: 2 },
      ],
    });
    const first = await post<T.LeaseList>("/v1/claims", { worker_id: "w", visibility: 30, max: 1 });
    const lease = first.body.leases[0] as T.Lease;
    await sqldRequests(CLAIM, ACK);
    const together = await sqldRequests(CLAIM, ACK);
    // The ack frees group g: the same request's claim takes its next message.
    const next = await post<T.LeaseList>("/v1/claims", {
      worker_id: "w",
      visibility: 30,
      max: 1,
      ack: [lease.lease_id],
    });
    expect(next.status).toBe(200);
    expect(next.body.acks).toEqual([{ lease_id: lease.lease_id }]);
    expect(next.body.leases.map((l) => l.event)).toEqual([2]);
    expect((await sqldRequests(CLAIM, ACK)) - together).toBe(1);

    // An ack that fails says why, and the claim still answers.
    const stale = await post<T.LeaseList>("/v1/claims", {
      worker_id: "w",
      visibility: 30,
      max: 1,
      ack: [lease.lease_id, (next.body.leases[0] as T.Lease).lease_id],
    });
    expect(stale.status).toBe(200);
    expect(stale.body.acks).toEqual([
      { lease_id: lease.lease_id, error: { code: "LEASE_NOT_FOUND", message: expect.any(String) } },
      { lease_id: (next.body.leases[0] as T.Lease).lease_id },
    ]);
    expect(stale.body.leases).toEqual([]);
    expect((await rowCounts()).messages).toBe(0);
  });

  it("refuses acks without max, naming the field, and applies nothing", async () => {
    await post("/v1/groups/g/messages", { event: 1 });
    const l = await post<T.Lease>("/v1/claims", { worker_id: "w", visibility: 30 });
    const a = await post("/v1/claims", { worker_id: "w", visibility: 30, ack: [l.body.lease_id] });
    expect(a.status).toBe(400);
    expect(a.body).toEqual({
      error: { code: "INVALID_ARGUMENT", message: expect.stringMatching(/^ack: needs "max"/) },
    });
    expect((await rowCounts()).messages).toBe(1);
    expect((await api(`/v1/leases/${l.body.lease_id}/ack`, { method: "POST" })).status).toBe(204);
  });
});
