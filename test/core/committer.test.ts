/**
 * The write path against a real sqld: writes submitted together ride one batch, and when the
 * database rejects one statement of a coalesced batch, only the write it belongs to fails; the
 * others go again together, in one more request.
 */
import { createClient, type ResultSet } from "@libsql/client";
import { afterEach, describe, expect, inject, it } from "vitest";
import { Committer } from "../../src/core/committer.js";
import { QueueError } from "../../src/core/errors.js";
import { httpWriter } from "../../src/core/hrana.js";

const opts = { maxInFlight: 1, maxBatchStatements: 800, requestTimeoutMs: 10_000, timeoutMs: 30_000 };

let close = () => {};
afterEach(() => close());

/** A client, and the committer's way to send a batch: the client's own, or hrana.ts (as over HTTP). */
function counting(via: "client" | "httpWriter") {
  let requests = 0;
  const countingFetch = ((input: RequestInfo | URL, init?: RequestInit) => {
    requests++;
    return fetch(input, init);
  }) as typeof fetch;
  const client = createClient({ url: inject("sqldUrl"), fetch: countingFetch });
  close = () => client.close();
  const send = via === "httpWriter" ? httpWriter({ url: inject("sqldUrl"), fetch: countingFetch }) : undefined;
  return { client, send, requests: () => requests };
}

const write = (sql: string, read = (rs: ResultSet[]) => rs[0]?.rows[0]?.v) => ({
  stmts: [{ sql, args: [] }],
  read,
  idempotent: true,
});

describe.each(["client", "httpWriter"] as const)("sending through %s", (via) => {
  it("writes submitted in one tick travel in one request, each getting its own answer", async () => {
    const { client, send, requests } = counting(via);
    const c = new Committer(client, opts, send);
    const answers = await Promise.all([1, 2, 3].map((n) => c.submit(write(`SELECT ${n} AS v`))));
    expect(answers).toEqual([1, 2, 3]);
    expect(requests()).toBe(1);
    expect(c.stats).toMatchObject({ batches: 1, writes: 3 });
  });

  it("a statement the database rejects fails only its own write; the rest are applied in one more request", async () => {
    const { client, send, requests } = counting(via);
    await client.execute("CREATE TABLE IF NOT EXISTS committer_t (k INTEGER PRIMARY KEY)");
    await client.execute("DELETE FROM committer_t");
    const before = requests();
    const c = new Committer(client, opts, send);
    const results = await Promise.allSettled([
      c.submit(write("INSERT INTO committer_t (k) VALUES (1) RETURNING k AS v")),
      c.submit(write("INSERT INTO no_such_table (k) VALUES (2)")),
      c.submit(write("INSERT INTO committer_t (k) VALUES (3) RETURNING k AS v")),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(QueueError);
    expect(((results[1] as PromiseRejectedResult).reason as QueueError).code).toBe("DATABASE");
    // The first batch rolled back as a whole; the two good writes went again, together.
    expect(requests() - before).toBe(2);
    const rows = (await client.execute("SELECT k FROM committer_t ORDER BY k")).rows.map((r) => Number(r.k));
    expect(rows).toEqual([1, 3]);
  });
});

/** A `send` the test answers by hand: each batch it was given, with its number of writes. */
function handSend() {
  const batches: Array<{ writes: number; answer: () => void }> = [];
  const send = (stmts: unknown[]) =>
    new Promise<ResultSet[]>((resolve) => {
      batches.push({ writes: stmts.length, answer: () => resolve(stmts.map(() => ({}) as ResultSet)) });
    });
  return { batches, send };
}

const until = async (cond: () => boolean) => {
  for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setTimeout(r, 2));
  expect(cond()).toBe(true);
};

/**
 * The hold, with a `send` the test answers by hand (what is under test is when batches leave, not
 * the database): callers that answer over a network come back a moment after their answer.
 */
describe("holding the next batch for the callers of the last one (holdMs)", () => {
  /** Four callers' writes in a first batch, answered after `tookMs`. */
  async function fourAnswered(holdMs: number | undefined, tookMs: number, comesBack = true) {
    const { batches, send } = handSend();
    const c = new Committer(client, { ...opts, holdMs }, send);
    /** Answers batch `i` after `ms`, so that it "took" that long (a hold is capped by it). */
    const answer = async (i: number, ms: number) => {
      await until(() => batches.length > i);
      await new Promise((r) => setTimeout(r, ms));
      batches[i]?.answer();
    };
    const first = [1, 2, 3, 4].map(() => c.submit(one(comesBack)));
    await answer(0, tookMs);
    await Promise.all(first);
    return { c, batches, answer };
  }
  /** A write whose caller comes back with its next one (a consumer's claim that got a lease, an ack). */
  const one = (comesBack = true) => ({
    stmts: [{ sql: "SELECT 1", args: [] }],
    read: () => 1,
    idempotent: true,
    comesBack: () => comesBack,
  });
  const client = {} as never;
  /** Lets every pending microtask and due timer run. */
  const settle = () => new Promise((r) => setImmediate(r));

  it("callers that come back one by one ride one batch: nothing leaves until all of them are back", async () => {
    // The first batch "took" 300 ms: the hold may last that long, room enough for a slow machine.
    const { c, batches, answer } = await fourAnswered(1000, 300);
    const second = [c.submit(one()), c.submit(one()), c.submit(one())];
    await settle();
    await settle();
    expect(batches.length, "the batch left before its fourth caller came back").toBe(1);
    second.push(c.submit(one()));
    await until(() => batches.length === 2);
    expect(batches[1]?.writes).toBe(4);
    expect(c.stats).toMatchObject({ holds: 1, holdsTimedOut: 0 });
    await answer(1, 0);
    expect(await Promise.all(second)).toEqual([1, 1, 1, 1]);
    c.close();
  });

  it("without a hold, the first caller back leaves alone and the callers split into turns", async () => {
    const { c, batches } = await fourAnswered(undefined, 50);
    void c.submit(one());
    await until(() => batches.length === 2);
    expect(batches[1]?.writes).toBe(1);
    expect(c.stats.holds).toBe(0);
    c.close();
  });

  it("does not wait for callers not expected back (a poll that found nothing)", async () => {
    const { c, batches } = await fourAnswered(1000, 50, false);
    void c.submit(one(false));
    await until(() => batches.length === 2);
    expect(batches[1]?.writes).toBe(1);
    expect(c.stats.holds).toBe(0);
    c.close();
  });

  it("waits no longer than the last batch took, sends who came back, then pauses holding", async () => {
    const { c, batches, answer } = await fourAnswered(1000, 30);
    const t0 = Date.now();
    const lone = c.submit(one()); // the other three never come back
    await until(() => batches.length === 2);
    // Capped by the batch's own duration (30 ms), far below holdMs (1000 ms).
    expect(Date.now() - t0).toBeLessThan(900);
    expect(batches[1]?.writes).toBe(1);
    expect(c.stats).toMatchObject({ holds: 1, holdsTimedOut: 1 });
    await answer(1, 30);
    await lone;
    // The hold was in vain: the next batch after this one leaves at once.
    void c.submit(one());
    void c.submit(one());
    await until(() => batches.length === 3);
    expect(c.stats.holds).toBe(1);
    c.close();
  });

  it("callers in the same process are back before the slot frees: no batch waits", async () => {
    const { batches, send } = handSend();
    const c = new Committer(client, { ...opts, holdMs: 1000 }, send);
    const loops = [1, 2, 3, 4].map(async () => {
      for (let i = 0; i < 3; i++) await c.submit(one());
    });
    for (let b = 0; b < 3; b++) {
      await until(() => batches.length === b + 1);
      expect(batches[b]?.writes).toBe(4);
      // Before the last answer (after which nobody comes back), no hold ever timed out.
      expect(c.stats.holdsTimedOut).toBe(0);
      await new Promise((r) => setTimeout(r, 5));
      batches[b]?.answer();
    }
    await Promise.all(loops);
    c.close();
  });
});

/**
 * Writes nothing waits on (acks, nacks, releases: `mayWait`) and `rideMs`, with a `send` the test
 * answers by hand: over a long round trip, a lone ack's batch would hold up the publish after it.
 */
describe("writes that may wait for another to ride with (rideMs)", () => {
  const client = {} as never;
  const write = (mayWait: boolean) => ({
    stmts: [{ sql: "SELECT 1", args: [] }],
    read: () => 1,
    idempotent: true,
    mayWait,
  });
  const ticks = async (n: number) => {
    for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
  };
  /** A committer whose first batch (a publish) took `tookMs`: a wait for a ride is capped by it. */
  async function afterABatchOf(tookMs: number, rideMs = 1000) {
    const { batches, send } = handSend();
    const c = new Committer(client, { ...opts, rideMs }, send);
    const first = c.submit(write(false));
    await until(() => batches.length === 1);
    await new Promise((r) => setTimeout(r, tookMs));
    batches[0]?.answer();
    await first;
    return { c, batches };
  }

  it("an ack waits for the next write and rides its batch", async () => {
    // The first batch took 300 ms: the wait may last that long, room enough for a slow machine.
    const { c, batches } = await afterABatchOf(300);
    const ack = c.submit(write(true));
    const ack2 = c.submit(write(true));
    await ticks(5);
    expect(batches.length, "the acks left alone").toBe(1);
    const publish = c.submit(write(false));
    await until(() => batches.length === 2);
    expect(batches[1]?.writes).toBe(3);
    batches[1]?.answer();
    expect(await Promise.all([ack, ack2, publish])).toEqual([1, 1, 1]);
    expect(c.stats).toMatchObject({ rides: 1, ridesInVain: 0, batches: 2 });
    c.close();
  });

  it("waits no longer than the last batch took, then goes alone and lets the next chance go", async () => {
    const { c, batches } = await afterABatchOf(30);
    const t0 = Date.now();
    const ack = c.submit(write(true));
    await until(() => batches.length === 2);
    expect(Date.now() - t0).toBeLessThan(900);
    expect(c.stats).toMatchObject({ rides: 1, ridesInVain: 1 });
    batches[1]?.answer();
    await ack;
    // In vain once: the next lone ack leaves at once.
    const next = c.submit(write(true));
    await until(() => batches.length === 3);
    expect(c.stats.rides).toBe(1);
    batches[2]?.answer();
    await next;
    c.close();
  });

  it("never waits without rideMs, nor while a write that may not wait is queued", async () => {
    const off = await afterABatchOf(30, 0);
    void off.c.submit(write(true));
    await until(() => off.batches.length === 2);
    expect(off.c.stats.rides).toBe(0);
    off.c.close();
    const on = await afterABatchOf(300);
    void on.c.submit(write(false));
    void on.c.submit(write(true));
    await until(() => on.batches.length === 2);
    expect(on.batches[1]?.writes).toBe(2);
    expect(on.c.stats.rides).toBe(0);
    on.c.close();
  });

  it("close() ends a wait: the waiting ack fails as closed, nothing is sent", async () => {
    const { c, batches } = await afterABatchOf(300);
    const ack = c.submit(write(true));
    await ticks(5);
    c.close();
    await expect(ack).rejects.toMatchObject({ code: "CLOSED" });
    await new Promise((r) => setTimeout(r, 20));
    expect(batches.length).toBe(1);
  });
});
