/**
 * Claims ride the write that frees their message: a publish, or an ack that frees a group, carries
 * the claims for the consumers waiting in the writer (long polls, push subscriptions with free
 * slots) in its own write batch, after it, so that the message reaches them in that one round trip.
 * Counted in write batches and in the requests sqld received, over a real sqld.
 */
import { afterEach, beforeEach, expect, inject, it } from "vitest";
import { type Consumer, startConsumer } from "../../../scripts/support/consumer.js";
import { Dispatcher } from "../../../src/app/writer/dispatcher.js";
import { Pusher } from "../../../src/app/writer/pusher.js";
import { clientOf, writeStatsOf } from "../../../src/core/internals.js";
import { putSubscription } from "../../../src/core/subscriptions.js";
import { type Lease, LibsqlTransport } from "../../../src/index.js";
import { resetDatabase } from "../../support/db.js";
import { waitFor } from "../../support/wait.js";

let t: LibsqlTransport;
let pusher: Pusher | undefined;
let consumer: Consumer | undefined;
/** The bodies of the requests sqld received from `t`, in order. */
let sent: string[] = [];

beforeEach(async () => {
  sent = [];
  const recording = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    sent.push(await request.clone().text());
    return fetch(request);
  }) as typeof fetch;
  t = await LibsqlTransport.create(inject("sqldUrl"), { fetch: recording });
  await resetDatabase(clientOf(t));
});
afterEach(async () => {
  pusher?.stop();
  await consumer?.close();
  await pusher?.settled();
  pusher = consumer = undefined;
  t.close();
});

const PUBLISH = "INSERT INTO messages";
const CLAIM = "tq_claimed_at AS stamp";
const ACK = "DELETE FROM messages WHERE seq = ";
/** Write requests sent from `from` on that carry every one of `texts`. */
const carrying = (from: number, ...texts: string[]) =>
  sent.slice(from).filter((body) => texts.every((text) => body.includes(text))).length;

const wait = (d: Dispatcher, workerId: string, extra: Partial<Parameters<Dispatcher["wait"]>[0]> = {}) =>
  d.wait({ workerId, visibility: 30, n: 1, minPriority: 0, waitMs: 10_000, ...extra });

it("a long poll's lease comes in the publish's own batch: one write batch, one request", async () => {
  const d = new Dispatcher(t, 60_000);
  const waiter = wait(d, "waiter");
  await waitFor(async () => d.stats.rounds === 1 && !d.busy, { what: "the arrival's own (empty) claim" });
  const batches = writeStatsOf(t).batches;
  const requests = sent.length;
  const seq = await t.publish("g", "fresh");
  expect((await waiter).map((l) => l.seq)).toEqual([seq]);
  expect(writeStatsOf(t).batches - batches).toBe(1);
  expect(carrying(requests, PUBLISH, CLAIM)).toBe(1);
  expect(d.stats.rounds).toBe(2);
});

it("an ack that frees a group carries the claim that hands its next message to a waiter", async () => {
  await t.publish("g", "first");
  await t.publish("g", "second");
  const held = (await t.claim("worker", 30)) as Lease;
  const d = new Dispatcher(t, 60_000);
  const waiter = wait(d, "waiter");
  // The group is held by the lease: the waiter's own claim finds nothing.
  await waitFor(async () => d.stats.rounds === 1 && !d.busy, { what: "the arrival's own (empty) claim" });
  const batches = writeStatsOf(t).batches;
  const requests = sent.length;
  await t.ack(held);
  expect((await waiter).map((l) => l.event)).toEqual(["second"]);
  expect(writeStatsOf(t).batches - batches).toBe(1);
  expect(carrying(requests, ACK, CLAIM)).toBe(1);
});

it("a waiter's claim queued in the same batch as a publish goes after it, and sees its message", async () => {
  const d = new Dispatcher(t, 60_000);
  const batches = writeStatsOf(t).batches;
  // The arrival's claim is submitted first, the publish right after, in the same tick.
  const waiter = wait(d, "waiter");
  const seq = await t.publish("g", "same tick");
  expect((await waiter).map((l) => l.seq)).toEqual([seq]);
  expect(writeStatsOf(t).batches - batches).toBe(1);
  expect(d.stats).toMatchObject({ rounds: 1, claims: 1 });
});

it("every waiter that can take a message gets it in the publish's batch, in arrival order, each with its floor", async () => {
  const d = new Dispatcher(t, 60_000);
  const picky = wait(d, "picky", { minPriority: 4, waitMs: 1_000 });
  const first = wait(d, "first");
  const second = wait(d, "second", { n: 2 });
  await waitFor(async () => d.stats.claims === 3 && !d.busy, { what: "the arrivals' own claims" });
  const batches = writeStatsOf(t).batches;
  await t.publishMany(["a", "b", "c", "d"].map((g) => ({ groupId: g, event: g })));
  const [f, s] = await Promise.all([first, second]);
  expect([f?.map((l) => l.event), s?.map((l) => l.event)]).toEqual([["a"], ["b", "c"]]);
  expect(writeStatsOf(t).batches - batches).toBe(1);
  // Nothing at priority 4: the picky waiter waits on.
  expect(await picky).toEqual([]);
  expect((await t.stats()).ready).toBe(1);
});

it("a push delivery leaves with the publish's batch: the POST arrives after one write batch", async () => {
  const batchesAtPost: number[] = [];
  consumer = await startConsumer(() => {
    batchesAtPost.push(writeStatsOf(t).batches);
    return { status: 200 };
  });
  await putSubscription(t, "s", { url: `${consumer.url}/s` });
  pusher = new Pusher(t, { recheckMs: 60_000 });
  await pusher.wake();
  await pusher.settled();
  const batches = writeStatsOf(t).batches;
  const requests = sent.length;
  await t.publish("g", "pushed");
  await waitFor(async () => pusher?.stats.acked === 1, { what: "the delivery's ack" });
  expect(batchesAtPost.map((b) => b - batches)).toEqual([1]);
  expect(carrying(requests, PUBLISH, CLAIM)).toBe(1);
  // The ack then rides with the claim that refills its slot: one more batch.
  await pusher.settled();
  expect(writeStatsOf(t).batches - batches).toBe(2);
  expect(carrying(requests, ACK, CLAIM)).toBe(1);
});

it("a newcomer whose floor the queue was just found empty for makes no claim of its own: it waits for the next write with the others", async () => {
  const d = new Dispatcher(t, 60_000);
  const first = wait(d, "first", { minPriority: 1 });
  await waitFor(async () => d.stats.claims === 1 && !d.busy, { what: "the first arrival's (empty) claim" });
  const batches = writeStatsOf(t).batches;
  // Pickier than the claim that found nothing: it would find nothing either.
  const picky = wait(d, "picky", { minPriority: 3 });
  // Less picky: it may find what the first could not, so it claims.
  await t.claim("nobody", 1); // a write that frees nothing: no round, no change
  const lax = wait(d, "lax", { minPriority: 0 });
  await waitFor(async () => d.stats.claims === 2 && !d.busy, { what: "the lax arrival's own claim" });
  expect(d.waiting).toBe(3);
  expect(d.stats.claims).toBe(2);
  expect(writeStatsOf(t).batches - batches).toBe(2);
  // The next write serves all three in its own batch.
  await t.publishMany([
    { groupId: "a", event: "a", priority: 4 },
    { groupId: "b", event: "b", priority: 4 },
    { groupId: "c", event: "c", priority: 4 },
  ]);
  const got = await Promise.all([first, picky, lax]);
  expect(got.map((l) => l.map((x) => x.event))).toEqual([["a"], ["b"], ["c"]]);
  expect(writeStatsOf(t).batches - batches).toBe(3);
});
