/**
 * Long polls on a queue sharded over four databases, through the Worker and its QueueWriters inside
 * workerd: every lease a shard takes for a waiter reaches a caller or goes back at once, unspent;
 * waiters are served in arrival order, as one database serves them.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { dispatchers } from "../../src/app/writer/dispatcher.js";
import type * as T from "../../src/contract/types.js";
import { waitFor } from "../support/wait.js";
import { api, post, resetDatabase, withoutQueues } from "./support.js";

const SHARDS = 4;
const Q = "/v1/queues/billing";

/** Waits held by the writers (a sharded long poll holds one on each shard). */
const waiting = () => dispatchers().reduce((n, d) => n + d.waiting, 0);

beforeAll(resetDatabase);
withoutQueues("billing");

beforeAll(async () => {
  const made = await api<T.QueueAnswer>(`${Q}`, { method: "PUT", json: { shards: SHARDS } });
  expect(made.status).toBe(201);
});

describe("sharded long polls", () => {
  it("8 waiters, then one batch into 8 groups: every waiter gets a lease, none orphaned (20 trials)", async () => {
    for (let trial = 0; trial < 20; trial++) {
      const answers = Array.from({ length: 8 }, (_, i) =>
        post<T.Lease>(`${Q}/claims`, { worker_id: `w${i}`, visibility: 60, wait: 5 }),
      );
      await waitFor(async () => waiting() === 8 * SHARDS, { what: "8 waiters on every shard" });
      const messages = Array.from({ length: 8 }, (_, i) => ({ group_id: `t${trial}-g${i}`, event: i }));
      expect((await post(`${Q}/messages`, { messages })).status).toBe(201);
      const got = await Promise.all(answers);
      const leases = got.filter((a) => a.status === 200).map((a) => a.body);
      const stats = (await api<T.Stats>(`${Q}/stats`)).body;
      expect(
        { trial, statuses: got.map((a) => a.status), inFlight: stats.in_flight, ready: stats.ready },
        "every waiter answered with a lease, and no other lease out",
      ).toEqual({ trial, statuses: Array(8).fill(200), inFlight: 8, ready: 0 });
      expect(leases.map((l) => l.attempts)).toEqual(Array(8).fill(1));
      for (const l of leases) expect((await post(`${Q}/leases/${l.lease_id}/ack`)).status).toBe(204);
      await waitFor(async () => waiting() === 0, { what: "no wait left on any shard" });
    }
  });
});
