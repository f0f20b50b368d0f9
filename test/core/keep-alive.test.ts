/**
 * In Node a transport talks HTTP through its own keep-alive `fetch` (src/core/node-fetch.ts) unless
 * the caller passes one: every request goes through it, over one reused connection.
 */
import { afterEach, describe, expect, inject, it } from "vitest";
import { startProxy } from "../../scripts/support/proxy.js";
import { clientOf } from "../../src/core/internals.js";
import { nodeFetchStats } from "../../src/core/node-fetch.js";
import { LibsqlTransport } from "../../src/index.js";
import { resetDatabase } from "../support/db.js";

let proxy: Awaited<ReturnType<typeof startProxy>> | undefined;
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});

describe("the default fetch in Node", () => {
  it("carries every request of a transport, over one kept-alive connection", async () => {
    proxy = await startProxy(Number(new URL(inject("sqldUrl")).port));
    const before = { ...nodeFetchStats };
    const t = await LibsqlTransport.create(proxy.url);
    try {
      await resetDatabase(clientOf(t));
      for (let i = 0; i < 20; i++) await t.publish(`g${i}`, { i });
      const leases = await t.claimMany("w", 30, 20);
      for (const l of leases) await t.ack(l);
      expect(leases).toHaveLength(20);
      const sent = nodeFetchStats.requests - before.requests;
      // Create (endpoint probe, schema), the reset, 20 publishes, one claim, 20 acks: all through ours.
      expect(sent).toBe(proxy.stats.requests);
      expect(sent).toBeGreaterThanOrEqual(42);
      expect(proxy.stats.connections).toBe(1);
      expect(nodeFetchStats.connections - before.connections).toBe(1);
    } finally {
      t.close();
    }
  });

  it("concurrent requests open a connection each at most, and later ones reuse them", async () => {
    proxy = await startProxy(Number(new URL(inject("sqldUrl")).port));
    const t = await LibsqlTransport.create(proxy.url);
    try {
      const before = proxy.stats.requests;
      // Reads are not coalesced: 8 requests in flight at once, five times over.
      for (let round = 0; round < 5; round++) {
        const rows = await Promise.all(Array.from({ length: 8 }, (_, i) => clientOf(t).execute(`SELECT ${i} AS i`)));
        expect(rows.map((r) => Number(r.rows[0]?.i))).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      }
      expect(proxy.stats.requests - before).toBe(40);
      expect(proxy.stats.connections).toBeLessThanOrEqual(8);
    } finally {
      t.close();
    }
  });

  it("a fetch passed in the options wins", async () => {
    let calls = 0;
    const mine: typeof fetch = (input, init) => {
      calls++;
      return fetch(input, init);
    };
    const before = nodeFetchStats.requests;
    const t = await LibsqlTransport.create(inject("sqldUrl"), { fetch: mine });
    try {
      await t.publish("mine", {});
      expect(calls).toBeGreaterThanOrEqual(2);
      expect(nodeFetchStats.requests).toBe(before);
    } finally {
      t.close();
    }
  });
});
