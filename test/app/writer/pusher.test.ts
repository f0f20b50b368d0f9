/**
 * Push delivery (src/app/writer/pusher.ts) on its own, in Node, over a real sqld and a real HTTP
 * consumer on 127.0.0.1: exactly once, FIFO and one in flight per group, max_in_flight, signatures,
 * retries with backoff and Retry-After, dead letters, 202, a hanging consumer, delete, idle cost.
 */
import { afterEach, beforeEach, describe, expect, inject, it } from "vitest";
import { type Answer, type Consumer, startConsumer } from "../../../scripts/support/consumer.js";
import { Pusher, retryDelay } from "../../../src/app/writer/pusher.js";
import { verifySignature } from "../../../src/contract/signature.js";
import { clientOf } from "../../../src/core/internals.js";
import { deleteSubscription, putSubscription } from "../../../src/core/subscriptions.js";
import { type Lease, LibsqlTransport } from "../../../src/index.js";
import { resetDatabase } from "../../support/db.js";
import { waitFor } from "../../support/wait.js";
import { countListeners } from "./listeners.js";

let t: LibsqlTransport;
let pusher: Pusher | undefined;
let consumer: Consumer | undefined;
const others: LibsqlTransport[] = [];

beforeEach(async () => {
  t = await LibsqlTransport.create(inject("sqldUrl"), { maxAttempts: 3 });
  await resetDatabase(clientOf(t));
});
afterEach(async () => {
  pusher?.stop();
  await consumer?.close();
  await pusher?.settled();
  pusher = consumer = undefined;
  t.close();
  for (const o of others.splice(0)) o.close();
});

const ok = (): Answer => ({ status: 200 });

async function depth(): Promise<number> {
  const s = await t.stats();
  return s.ready + s.waiting + s.inFlight + s.parked + s.delayed;
}

describe("retryDelay", () => {
  it("doubles from 1 s to 10 min, or takes the consumer's Retry-After (seconds or a date, up to a day)", () => {
    expect([1, 2, 3, 10, 11, 40].map((a) => retryDelay(a, null))).toEqual([1, 2, 4, 512, 600, 600]);
    expect(retryDelay(1, "0")).toBe(0);
    expect(retryDelay(1, "120")).toBe(120);
    expect(retryDelay(1, "9999999")).toBe(86_400);
    expect(retryDelay(1, new Date(10_000 + 30_000).toUTCString(), 10_000)).toBe(30);
    expect(retryDelay(3, "soon")).toBe(4);
  });
});

it("pushes every message exactly once: FIFO and one in flight per group, max_in_flight per subscription, signed", async () => {
  consumer = await startConsumer(async () => {
    await new Promise((r) => setTimeout(r, Math.random() * 4));
    return ok();
  });
  const a = await putSubscription(t, "a", { url: `${consumer.url}/a`, maxInFlight: 3 });
  const b = await putSubscription(t, "b", { url: `${consumer.url}/b`, maxInFlight: 2 });
  pusher = new Pusher(t, { recheckMs: 60_000, maxConnections: 16 });
  await pusher.wake();
  const groups = ["g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8"];
  const published: number[] = [];
  for (let round = 0; round < 3; round++) {
    published.push(
      ...(await t.publishMany(
        Array.from({ length: 40 }, (_, i) => ({ groupId: groups[i % 8] as string, event: { round, i } })),
      )),
    );
  }
  await waitFor(async () => pusher?.stats.acked === 120 && (await depth()) === 0, { what: "120 acks" });

  const got = consumer.received;
  expect(got.map((r) => r.delivery.seq).sort((x, y) => x - y)).toEqual([...published].sort((x, y) => x - y));
  for (const g of groups) {
    const seqs = got.filter((r) => r.delivery.group_id === g).map((r) => r.delivery.seq);
    expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
  }
  expect(consumer.overlaps).toBe(0);
  expect(consumer.maxInFlight.get("/a")).toBeLessThanOrEqual(3);
  expect(consumer.maxInFlight.get("/b")).toBeLessThanOrEqual(2);
  // Competing consumers: both took a share.
  expect(got.filter((r) => r.path === "/a").length).toBeGreaterThan(0);
  expect(got.filter((r) => r.path === "/b").length).toBeGreaterThan(0);
  for (const r of got) {
    const secret = r.path === "/a" ? a.signingSecret : b.signingSecret;
    const wrong = r.path === "/a" ? b.signingSecret : a.signingSecret;
    expect(await verifySignature(secret, r.signature, r.raw)).toBe(true);
    expect(await verifySignature(wrong, r.signature, r.raw)).toBe(false);
    expect(r.delivery).toMatchObject({ subscription: r.path.slice(1), attempts: 1 });
  }
  expect(pusher.stats).toMatchObject({ posted: 120, acked: 120, retried: 0, accepted: 0 });
});

it("a 500 comes back after its backoff with attempts + 1; Retry-After sets the pause; past the attempts, a dead letter", async () => {
  consumer = await startConsumer((r) => {
    if (r.delivery.event === "flaky") return r.delivery.attempts === 1 ? { status: 500 } : ok();
    if (r.delivery.event === "doomed") return { status: 503, headers: { "retry-after": "0" } };
    return ok();
  });
  await putSubscription(t, "s", { url: `${consumer.url}/s` });
  pusher = new Pusher(t, { recheckMs: 60_000 });
  await pusher.wake();
  await t.publish("f", "flaky");
  await t.publish("d", "doomed");
  await waitFor(async () => (await t.deadLetters()).length === 1 && (await depth()) === 0, {
    what: "flaky acked, doomed dead",
  });
  const flaky = consumer.received.filter((r) => r.delivery.event === "flaky");
  expect(flaky.map((r) => r.delivery.attempts)).toEqual([1, 2]);
  // The backoff is a park in the database (its clock): 1 s after the first attempt.
  expect((flaky[1] as { startedAt: number }).startedAt - (flaky[0] as { endedAt: number }).endedAt).toBeGreaterThan(
    900,
  );
  const doomed = consumer.received.filter((r) => r.delivery.event === "doomed");
  expect(doomed.map((r) => r.delivery.attempts)).toEqual([1, 2, 3]);
  const [dead] = await t.deadLetters();
  expect(dead?.event).toBe("doomed");
});

it("a 202 leaves the lease to the consumer, which acks it through the queue", async () => {
  consumer = await startConsumer(() => ({ status: 202 }));
  await putSubscription(t, "s", { url: `${consumer.url}/s` });
  pusher = new Pusher(t, { recheckMs: 60_000 });
  await pusher.wake();
  await t.publish("g", "mine now");
  await t.publish("g", "next");
  await waitFor(async () => pusher?.stats.accepted === 1, { what: "the 202" });
  await pusher.settled();
  const [first] = consumer.received;
  expect(first?.delivery.event).toBe("mine now");
  // The lease is the consumer's: its group stays held until the consumer acks.
  expect(consumer.received).toHaveLength(1);
  expect((await t.stats()).inFlight).toBe(1);
  await t.ack(first?.delivery.lease_id as string);
  await waitFor(async () => consumer?.received.length === 2, { what: "the next in the group" });
  expect(consumer.received[1]?.delivery.event).toBe("next");
});

it("leases taken with a 202 hold max_in_flight slots until settled through the writer, or until their deadline", async () => {
  consumer = await startConsumer(() => ({ status: 202 }));
  await putSubscription(t, "s", { url: `${consumer.url}/s`, maxInFlight: 2, visibility: 2 });
  for (const g of ["a", "b", "c", "d"]) await t.publish(g, g);
  pusher = new Pusher(t, { recheckMs: 60_000 });
  await pusher.wake();
  await waitFor(async () => pusher?.stats.accepted === 2, { what: "two 202s" });
  await pusher.settled();
  // A wake claims nothing more: both slots are held by the consumer.
  await pusher.wake();
  expect(consumer.received).toHaveLength(2);
  // An ack through the writer frees its slot at once: the next message goes.
  const [first] = consumer.received;
  await t.ack(first?.delivery.lease_id as string);
  await waitFor(async () => consumer?.received.length === 3, { what: "a third delivery after the ack" });
  // The second lease is never settled: its slot frees at its deadline, and the message comes back.
  await waitFor(
    async () =>
      consumer?.received.some(
        (r) => r.delivery.attempts === 2 && r.delivery.event === consumer?.received[1]?.delivery.event,
      ) === true,
    { what: "the unsettled message again, after its 2 s visibility", timeoutMs: 15_000 },
  );
});

it("a lease taken with a 202 and extended through the writer keeps its slot past its first deadline", async () => {
  consumer = await startConsumer(() => ({ status: 202 }));
  await putSubscription(t, "s", { url: `${consumer.url}/s`, maxInFlight: 1, visibility: 1 });
  for (const g of ["a", "b"]) await t.publish(g, g);
  pusher = new Pusher(t, { recheckMs: 60_000 });
  await pusher.wake();
  await waitFor(async () => pusher?.stats.accepted === 1, { what: "the 202" });
  await pusher.settled();
  const first = consumer.received[0]?.delivery;
  const lease = { id: first?.lease_id as string, seq: first?.seq as number } as Lease;
  await t.extend(lease, 10);
  // Past the deadline the lease was delivered with, the consumer still holds it: "b" must wait.
  await new Promise((r) => setTimeout(r, 1500));
  await pusher.wake();
  await pusher.settled();
  expect(consumer.received.map((r) => r.delivery.event)).toEqual(["a"]);
  await t.ack(lease);
  await waitFor(async () => consumer?.received.length === 2, { what: "b, once the slot is free" });
  expect(consumer.received[1]?.delivery.event).toBe("b");
});

it("a lease settled before its 202 arrives holds no slot", async () => {
  consumer = await startConsumer(async (r) => {
    // The consumer finishes at once and acks through the queue, then answers 202.
    await t.ack(r.delivery.lease_id);
    return { status: 202 };
  });
  await putSubscription(t, "s", { url: `${consumer.url}/s`, maxInFlight: 1, visibility: 60 });
  for (const g of ["a", "b", "c"]) await t.publish(g, g);
  pusher = new Pusher(t, { recheckMs: 60_000 });
  await pusher.wake();
  await waitFor(async () => consumer?.received.length === 3, { what: "all three, one after the other" });
  // The third's ack may still be on its way when its request is seen.
  await waitFor(async () => (await depth()) === 0, { what: "the three acked" });
});

it("a consumer that hangs holds only its own slot: others flow, and its message comes back once the wait is over", async () => {
  let hung = false;
  consumer = await startConsumer((r) => {
    if (r.path === "/slow" && !hung) {
      hung = true;
      return { status: 200, hang: true };
    }
    return ok();
  });
  await putSubscription(t, "slow", { url: `${consumer.url}/slow`, maxInFlight: 1, visibility: 2 });
  pusher = new Pusher(t, { recheckMs: 60_000 });
  await pusher.wake();
  await t.publish("stuck", "stuck");
  await waitFor(async () => consumer?.received.length === 1, { what: "the delivery that hangs" });
  await putSubscription(t, "fast", { url: `${consumer.url}/fast` });
  await t.publishMany(Array.from({ length: 20 }, (_, i) => ({ groupId: `g${i % 4}`, event: i })));
  await waitFor(async () => pusher?.stats.acked === 20, { what: "the other traffic" });
  const stuck = consumer.received[0];
  // All twenty went through while the first delivery was still waiting for its answer.
  expect(stuck?.endedAt).toBeUndefined();
  await waitFor(async () => (await depth()) === 0, { what: "the stuck message, retried" });
  const again = consumer.received.filter((r) => r.delivery.event === "stuck");
  expect(again.map((r) => r.delivery.attempts)).toEqual([1, 2]);
  // Given up at 90% of the 2 s visibility, then parked 1 s.
  expect((again[1]?.startedAt ?? 0) - (again[0]?.startedAt ?? 0)).toBeGreaterThan(2_700);
  expect(consumer.overlaps).toBe(0);
});

it("after a delete no delivery starts, even for a lease claimed before it", async () => {
  consumer = await startConsumer(ok);
  await putSubscription(t, "s", { url: `${consumer.url}/s` });
  pusher = new Pusher(t, { recheckMs: 60_000 });
  await pusher.wake();
  await t.publish("g", 1);
  await waitFor(async () => pusher?.stats.acked === 1, { what: "the first delivery" });
  expect(await deleteSubscription(t, "s")).toBe(true);
  await t.publishMany([
    { groupId: "g", event: 2 },
    { groupId: "h", event: 3 },
  ]);
  await pusher.wake();
  expect(consumer.received).toHaveLength(1);
  expect((await t.stats()).ready).toBe(2);
});

it("sees writes that bypass it at its next wake, and idles at one claim per wake whatever the subscriptions", async () => {
  consumer = await startConsumer(ok);
  for (const name of ["s1", "s2", "s3"]) await putSubscription(t, name, { url: `${consumer.url}/${name}` });
  pusher = new Pusher(t, { recheckMs: 250 });
  await pusher.wake();
  const elsewhere = await LibsqlTransport.create(inject("sqldUrl"));
  others.push(elsewhere);
  await elsewhere.publish("g", "from elsewhere");
  await waitFor(async () => pusher?.stats.acked === 1 && (await depth()) === 0, {
    what: "the delivery after a re-check",
  });
  // The ack's own round (a write: one claim per subscription) is over before the idle window starts.
  await pusher.settled();
  const before = { ...pusher.stats };
  await new Promise((r) => setTimeout(r, 1_500));
  const rounds = pusher.stats.rounds - before.rounds;
  expect(rounds).toBeGreaterThan(0);
  expect(rounds).toBeLessThanOrEqual(8);
  // One probing claim per wake, not one per subscription.
  expect(pusher.stats.claims - before.claims).toBe(rounds);
});

it("stop() takes every listener it hung on the transport: a write after it makes no round", async () => {
  const listeners = countListeners(t);
  consumer = await startConsumer(ok);
  await putSubscription(t, "s", { url: `${consumer.url}/s` });
  pusher = new Pusher(t, { recheckMs: 60_000 });
  expect(listeners()).toBe(3);
  await pusher.wake();
  await t.publish("g", 1);
  await waitFor(async () => pusher?.stats.acked === 1, { what: "the delivery" });
  await pusher.settled();
  pusher.stop();
  expect(listeners()).toBe(0);
  const { rounds } = pusher.stats;
  await t.publish("g", 2);
  await pusher.wake();
  await pusher.settled();
  expect(pusher.stats.rounds).toBe(rounds);
  expect(consumer.received).toHaveLength(1);
});

it("asks wakeAt for its wakes instead of keeping a timer, and is woken by wake()", async () => {
  const asked: number[] = [];
  await putSubscription(t, "s", { url: "http://127.0.0.1:9/never" });
  pusher = new Pusher(t, { recheckMs: 5_000, wakeAt: (at) => asked.push(at) });
  const before = Date.now();
  await pusher.wake();
  // Nothing due: the safety re-check, asked for once (an alarm set is a storage write).
  expect(asked).toHaveLength(1);
  expect(asked[0]).toBeGreaterThanOrEqual(before + 5_000);
  await pusher.wake();
  expect(asked).toHaveLength(2);
  expect(pusher.stats).toMatchObject({ rounds: 2, claims: 2 });
});
