/**
 * `POST /v1/settlements` through the Worker inside workerd: on the default queue (its writer), and
 * on a queue sharded over four databases (the edge splits it by shard); each lease with its outcome,
 * fenced, in order.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type * as T from "../../src/contract/types.js";
import { MAX_SHARDS } from "../../src/rules.js";
import { api, post, resetDatabase, withoutQueues } from "./support.js";

beforeAll(resetDatabase);
withoutQueues("billing");

/** Publishes one message in each of `n` groups of `queue` (a path prefix), claims them all. */
async function held(prefix: string, n: number): Promise<T.Lease[]> {
  const messages = Array.from({ length: n }, (_, i) => ({ group_id: `g${i}`, event: { i } }));
  expect((await post(`${prefix}/messages`, { messages })).status).toBe(201);
  const got = await post<T.LeaseList>(`${prefix}/claims`, { worker_id: "w", visibility: 60, max: n });
  expect(got.body.leases).toHaveLength(n);
  return got.body.leases;
}

describe("POST /v1/settlements in the Worker", () => {
  for (const [name, prefix, setup] of [
    ["the default queue", "/v1", async () => {}],
    [
      "a queue over four shards",
      "/v1/queues/billing",
      async () => {
        expect((await api("/v1/queues/billing", { method: "PUT", json: { shards: 4 } })).status).toBe(201);
      },
    ],
  ] as const) {
    it(`${name}: acks, nacks and releases at once, each with its outcome; a fenced lease fails alone`, async () => {
      await setup();
      const leases = await held(prefix, 12);
      if (prefix !== "/v1") expect(new Set(leases.map((l) => l.seq % MAX_SHARDS)).size).toBe(4);
      // The last one is released by someone else first: fenced off.
      const stale = leases[11] as T.Lease;
      expect((await post(`${prefix}/leases/${stale.lease_id}/release`)).status).toBe(204);
      const list = leases.map((l, i) => ({
        lease_id: l.lease_id,
        action: i % 3 === 0 ? "ack" : i % 3 === 1 ? "nack" : "release",
        ...(i % 3 === 1 ? { delay: 60 } : {}),
      }));
      const res = await post<T.SettleAnswer>(`${prefix}/settlements`, { leases: list });
      expect(res.status).toBe(200);
      expect(res.body.outcomes.map((o) => [o.lease_id, o.action, o.error?.code])).toEqual(
        list.map((s, i) => [s.lease_id, s.action, i === 11 ? "LEASE_LOST" : undefined]),
      );
      const stats = await api<T.Stats>(`${prefix}/stats`);
      expect(stats.body).toMatchObject({ in_flight: 0, parked: 4, ready: 4 });
    });
  }
});
