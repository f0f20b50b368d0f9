/**
 * The QueueWriter's long-poll dispatcher (src/app/writer/dispatcher.ts) on its own, in Node, over a
 * real sqld: arrival order, each waiter's own floor, departures, and writes that bypass it.
 */
import { afterEach, beforeEach, expect, inject, it } from "vitest";
import { startProxy, type Proxy as TcpProxy } from "../../../scripts/support/proxy.js";
import { Dispatcher, dispatcherFor, dispatchers } from "../../../src/app/writer/dispatcher.js";
import { clientOf } from "../../../src/core/internals.js";
import { type Lease, LibsqlTransport } from "../../../src/index.js";
import { resetDatabase } from "../../support/db.js";
import { waitFor } from "../../support/wait.js";
import { countListeners } from "./listeners.js";

let t: LibsqlTransport;
let other: LibsqlTransport | undefined;
let proxy: TcpProxy | undefined;

beforeEach(async () => {
  t = await LibsqlTransport.create(inject("sqldUrl"));
  await resetDatabase(clientOf(t));
});
afterEach(async () => {
  t.close();
  other?.close();
  other = undefined;
  await proxy?.close();
  proxy = undefined;
});

const wait = (d: Dispatcher, workerId: string, extra: Partial<Parameters<Dispatcher["wait"]>[0]> = {}) =>
  d.wait({ workerId, visibility: 30, n: 1, minPriority: 0, waitMs: 10_000, ...extra });

it("serves waiters in arrival order, each with its own floor; the rest wait on, then time out empty", async () => {
  const d = new Dispatcher(t, 60_000);
  const picky = wait(d, "picky", { minPriority: 3, waitMs: 500 });
  const first = wait(d, "first");
  const second = wait(d, "second");
  const third = wait(d, "third", { waitMs: 500 });
  await waitFor(async () => d.waiting === 4 && d.stats.rounds > 0, { what: "four waiters" });
  await t.publishMany([
    { groupId: "a", event: "a" },
    { groupId: "b", event: "b" },
  ]);
  const [f, s] = (await Promise.all([first, second])).map((l) => (l[0] as Lease).event);
  expect([f, s]).toEqual(["a", "b"]);
  // Nothing at priority 3, and nothing left for the third.
  expect(await picky).toEqual([]);
  expect(await third).toEqual([]);
  expect(d.waiting).toBe(0);
});

it("a waiter whose request came first is served first, even when its wait reaches the writer later", async () => {
  const d = new Dispatcher(t, 60_000);
  const now = Date.now();
  const later = wait(d, "later", { since: now, waitMs: 1_000 });
  await waitFor(async () => d.waiting === 1 && !d.busy, { what: "the first wait to arrive" });
  // A sharded long poll's wait can reach a shard's writer after a later request's.
  const earlier = wait(d, "earlier", { since: now - 1 });
  await waitFor(async () => d.waiting === 2 && !d.busy, { what: "both waiting" });
  await t.publish("a", "a");
  expect((await earlier).map((l) => l.event)).toEqual(["a"]);
  expect(await later).toEqual([]);
});

it("claims only when a write through the transport may have freed something", async () => {
  const d = new Dispatcher(t, 60_000);
  const w = wait(d, "w", { waitMs: 5_000 });
  await waitFor(async () => d.stats.rounds === 1, { what: "the arrival's claim" });
  // A claim through the same transport frees nothing: no round. A publish does.
  await t.claim("someone", 30);
  expect(d.stats.rounds).toBe(1);
  await t.publish("g", "now");
  expect(((await w)[0] as Lease).event).toBe("now");
  expect(d.stats.rounds).toBe(2);
});

it("a write that bypasses it is found at the safety re-check", async () => {
  const d = new Dispatcher(t, 200);
  const w = wait(d, "w");
  await waitFor(async () => d.stats.rounds === 1, { what: "the arrival's claim" });
  other = await LibsqlTransport.create(inject("sqldUrl"));
  await other.publish("g", "from elsewhere");
  expect(((await w)[0] as Lease).event).toBe("from elsewhere");
});

// The claim's answer is held (as a failing database would hold it) until after the waiter's end:
// it is answered with nothing before the claim comes back, and the leases taken for it are released.
it.each([
  { how: "leaves (its request aborted): at once", option: "signal", holdMs: 400 },
  { how: "is called off (another shard answered first): within CALLED_OFF_MS", option: "end", holdMs: 3_000 },
] as const)(
  "a waiter that $how, while its claim is held up, gets nothing; what the claim took is released",
  async ({ option, holdMs }) => {
    proxy = await startProxy(Number(new URL(inject("sqldUrl")).port));
    const slow = await LibsqlTransport.create(proxy.url);
    try {
      await slow.publish("g", "kept");
      const d = new Dispatcher(slow, 60_000);
      const ended = new AbortController();
      proxy.inject({ kind: "delay", ms: holdMs }, { match: "tq_claimed_at AS stamp" });
      const w = wait(d, "ended", { [option]: ended.signal, visibility: 300 });
      await waitFor(async () => proxy?.stats.delay === 1, { what: "the claim to be held" });
      ended.abort();
      expect(await w).toEqual([]);
      // Answered before the claim came back: its caller waited for no database.
      expect(d.stats.released).toBe(0);
      await waitFor(async () => d.stats.released === 1, { what: "the release" });
      await waitFor(async () => (await t.stats()).ready === 1, { what: "the message to be free again" });
      const next = (await t.claim("next", 30)) as Lease;
      expect([next.event, next.attempts]).toEqual(["kept", 1]);
    } finally {
      slow.close();
    }
  },
);

it("a waiter that arrives while a round's claims are out is served by the next round", async () => {
  proxy = await startProxy(Number(new URL(inject("sqldUrl")).port));
  const slow = await LibsqlTransport.create(proxy.url);
  try {
    const d = new Dispatcher(slow, 60_000);
    const early = wait(d, "early", { waitMs: 5_000 });
    await waitFor(async () => d.stats.rounds === 1, { what: "the arrival's claim" });
    // The publish's round: its claim held while the second waiter arrives.
    proxy.inject({ kind: "delay", ms: 300 }, { match: "tq_claimed_at AS stamp" });
    await slow.publishMany([
      { groupId: "a", event: "a" },
      { groupId: "b", event: "b" },
    ]);
    await waitFor(async () => proxy?.stats.delay === 1, { what: "the round's claim to be held" });
    const late = wait(d, "late", { waitMs: 5_000 });
    const got = (await Promise.all([early, late])).map((l) => (l[0] as Lease | undefined)?.event);
    expect(got).toEqual(["a", "b"]);
  } finally {
    slow.close();
  }
});

it("a re-check costs one probing claim, whatever the number of waiters; a probe that finds something serves them all", async () => {
  const d = new Dispatcher(t, 100);
  const waiters = Array.from({ length: 5 }, (_, i) => wait(d, `w${i}`, { minPriority: i === 3 ? 0 : 1 }));
  await waitFor(async () => d.stats.claims === 5 && d.waiting === 5, { what: "the arrivals' own claims" });
  const { rounds, claims } = d.stats;
  await waitFor(async () => d.stats.rounds >= rounds + 3, { what: "three re-checks" });
  expect(d.stats.claims - claims).toBe(d.stats.rounds - rounds);
  // Written by another process: the dispatcher cannot know until its re-check.
  other = await LibsqlTransport.create(inject("sqldUrl"));
  await other.publishMany(Array.from({ length: 5 }, (_, i) => ({ groupId: `g${i}`, event: i, priority: 1 })));
  const got = await Promise.all(waiters);
  expect(got.map((l) => l.length)).toEqual([1, 1, 1, 1, 1]);
  // The probe went to the least picky waiter (w3, floor 0); the others in arrival order after it.
  expect(got.map((l) => (l[0] as Lease).event)).toEqual([1, 2, 3, 0, 4]);
});

it("listens to its transport only while it holds waiters: an idle one claims nothing and keeps no timer", async () => {
  const listeners = countListeners(t);
  const d = new Dispatcher(t, 100);
  expect(listeners()).toBe(0);
  expect(await wait(d, "early", { waitMs: 300 })).toEqual([]);
  expect([listeners(), d.waiting, dispatchers().includes(d)]).toEqual([0, 0, false]);
  const { rounds } = d.stats;
  await t.publish("g", "while idle");
  // Neither the write nor a re-check (every 100 ms while it held a waiter) makes a round.
  await new Promise((r) => setTimeout(r, 300));
  expect(d.stats.rounds).toBe(rounds);
  const next = wait(d, "next");
  expect([listeners(), dispatchers().includes(d)]).toEqual([1, true]);
  expect(((await next)[0] as Lease).event).toBe("while idle");
  expect(listeners()).toBe(0);
});

it("stop() answers its waiters with nothing and stops listening: a write through the transport makes no round", async () => {
  const listeners = countListeners(t);
  const d = dispatcherFor(t, 60_000);
  const w = wait(d, "w");
  await waitFor(async () => d.stats.rounds === 1, { what: "the arrival's claim" });
  expect(listeners()).toBe(1);
  d.stop();
  expect(await w).toEqual([]);
  expect(listeners()).toBe(0);
  await t.publish("g", "after stop");
  expect(d.stats.rounds).toBe(1);
  // Stopped for good: a late waiter is answered at once, with no claim.
  expect(await wait(d, "late")).toEqual([]);
  expect(d.stats).toMatchObject({ rounds: 1, claims: 1 });
  expect(listeners()).toBe(0);
  // The transport's next long poll gets a dispatcher of its own.
  expect(dispatcherFor(t, 60_000)).not.toBe(d);
  expect((await t.stats()).ready).toBe(1);
});
