/**
 * A group's messages (peek, purge) and the queue's history through the Worker and its QueueWriters
 * inside workerd: on the default queue and on a sharded one (the group's shard answers; the
 * history adds up the shards' writers' samples). Bad input is refused naming the field, with
 * nothing changed.
 */
import { beforeEach, expect, it } from "vitest";
import type * as T from "../../src/contract/types.js";
import { api, post, resetDatabase, withoutQueues } from "./support.js";

beforeEach(resetDatabase);
withoutQueues("billing");

it("peeks at a group's next messages without claiming them, and purges them", async () => {
  const pub = await post<T.PublishBatchAnswer>("/v1/messages", {
    messages: [
      { group_id: "orders", event: { n: 1 } },
      { group_id: "orders", event: { n: 2 } },
      { group_id: "orders", event: { n: 3 }, delay: 600 },
      { group_id: "emails", event: { n: 4 } },
    ],
  });
  const lease = await post<T.Lease>("/v1/claims", { worker_id: "w", visibility: 30 });
  const peek = await api<T.PeekAnswer>("/v1/groups/orders/messages?limit=5");
  expect(peek.status).toBe(200);
  expect(peek.body.messages.map((m) => [m.seq, m.state, m.attempts])).toEqual([
    [pub.body.seqs[0], "in_flight", 1],
    [pub.body.seqs[1], "queued", 0],
    [pub.body.seqs[2], "delayed", 0],
  ]);
  expect(peek.body.messages[0]?.until).toBe(lease.body.expires_at);
  expect((await api<T.Stats>("/v1/stats")).body).toMatchObject({ in_flight: 1, waiting: 1, delayed: 1, ready: 1 });

  for (const [path, field] of [
    ["/v1/groups/orders/messages?limit=0", "limit"],
    ["/v1/groups/orders/messages?limit=101", "limit"],
    ["/v1/groups/orders/messages?limt=1", '"limt"'],
  ] as const) {
    const bad = await api<T.ErrorAnswer>(path);
    expect(bad.status).toBe(400);
    expect(bad.body.error.message.startsWith(`${field}:`), bad.body.error.message).toBe(true);
  }

  const purged = await api<T.PurgeAnswer>("/v1/groups/orders/messages", { method: "DELETE" });
  expect(purged.status).toBe(200);
  expect(purged.body).toEqual({ purged: 3 });
  expect((await api<T.PeekAnswer>("/v1/groups/orders/messages")).body.messages).toEqual([]);
  expect((await api<T.Stats>("/v1/stats")).body).toMatchObject({ in_flight: 0, groups: 1, ready: 1 });
  // The purged lease is gone.
  const ack = await post<T.ErrorAnswer>(`/v1/leases/${lease.body.lease_id}/ack`);
  expect(ack.status).toBe(404);
  expect(ack.body.error.code).toBe("LEASE_NOT_FOUND");
  expect((await api<T.PurgeAnswer>("/v1/groups/nobody/messages", { method: "DELETE" })).body).toEqual({ purged: 0 });
});

it("on a sharded queue: the group's shard answers, seqs as the queue names them; the history adds up the shards", async () => {
  expect((await api("/v1/queues/billing", { method: "PUT", json: { shards: 4 } })).status).toBe(201);
  const messages = Array.from({ length: 24 }, (_, i) => ({ group_id: `g${i % 8}`, event: i }));
  const pub = await post<T.PublishBatchAnswer>("/v1/queues/billing/messages", { messages });
  expect(pub.status).toBe(201);
  const mine = pub.body.seqs.filter((_, i) => i % 8 === 3);
  const peek = await api<T.PeekAnswer>("/v1/queues/billing/groups/g3/messages");
  expect(peek.body.messages.map((m) => [m.seq, m.group_id, m.state])).toEqual(mine.map((s) => [s, "g3", "queued"]));
  const purged = await api<T.PurgeAnswer>("/v1/queues/billing/groups/g3/messages", { method: "DELETE" });
  expect(purged.body).toEqual({ purged: 3 });
  expect((await api<T.Stats>("/v1/queues/billing/stats")).body).toMatchObject({ ready: 7, waiting: 14, groups: 7 });

  const h = await api<T.History>("/v1/queues/billing/history");
  expect(h.status).toBe(200);
  expect(h.body.sample_seconds).toBe(60);
  // Each shard's writer sampled at its publish: together, every message published.
  expect(h.body.samples.at(-1)).toMatchObject({ published: 24, acked: 0 });
  const last = h.body.samples.at(-1) as T.Sample;
  expect(last.ready + last.waiting).toBeGreaterThanOrEqual(21);
});
