/**
 * Publish→delivery latency through the Worker, by push and by long poll (the distance bench's
 * delivery cells, scripts/bench/distance.ts).
 */
import type { QueueClient } from "../../src/client/index.js";
import { startConsumer } from "../support/consumer.js";
import { depthOf, until } from "./distance-cells.js";
import { sleep } from "./lib.js";

/** Publish→delivery latency (ms) with one subscription to a consumer on 127.0.0.1. */
export async function pushLatency(q: QueueClient, messages: number, gapMs: number): Promise<number[]> {
  const sentAt = new Map<number, number>();
  const got = new Map<number, number>();
  const consumer = await startConsumer((r) => {
    const id = (r.delivery.event as { id: number }).id;
    const t = sentAt.get(id);
    if (t !== undefined && !got.has(id)) got.set(id, performance.now() - t);
    return { status: 200 };
  });
  try {
    await q.subscribe("latency", { url: `${consumer.url}/latency`, maxInFlight: 10 });
    for (let id = 0; id < messages; id++) {
      sentAt.set(id, performance.now());
      await q.publish(`g${id % 8}`, { id });
      await sleep(gapMs);
    }
    await until("the pushes", 15_000, () => got.size >= messages);
    await until("the push acks", 15_000, async () => depthOf(await q.stats()) === 0);
  } finally {
    await q.unsubscribe("latency").catch(() => false);
    await consumer.close();
  }
  return [...got.values()].sort((a, b) => a - b);
}

/** The long poll's wait (s): the writer is not told when a client over a real socket hangs up, so each case waits it out. */
const WAIT = 3;

/** Publish→delivery latency (ms) with 4 consumers long-polling (`wait`), each acking what it gets. */
export async function longPollLatency(q: QueueClient, messages: number, gapMs: number): Promise<number[]> {
  const sentAt = new Map<number, number>();
  const got = new Map<number, number>();
  const stop = new AbortController();
  let errors = 0;
  const consumers = Array.from({ length: 4 }, async (_, w) => {
    while (!stop.signal.aborted && errors < 20) {
      try {
        const lease = await q.claim<{ id: number }>(`lp${w}`, 30, undefined, { wait: WAIT, signal: stop.signal });
        if (lease === null) continue;
        const t = sentAt.get(lease.event.id);
        if (t !== undefined && !got.has(lease.event.id)) got.set(lease.event.id, performance.now() - t);
        await q.ack(lease);
        if (got.size >= messages) stop.abort();
      } catch {
        if (stop.signal.aborted) return;
        errors++;
        await sleep(50);
      }
    }
  });
  await sleep(300); // the consumers settle into their waits before the first publish
  for (let id = 0; id < messages && !stop.signal.aborted; id++) {
    sentAt.set(id, performance.now());
    await q.publish(`g${id % 8}`, { id });
    await sleep(gapMs);
  }
  const deadline = Date.now() + 15_000;
  while (got.size < messages && Date.now() < deadline && errors < 20) await sleep(20);
  stop.abort();
  await Promise.allSettled(consumers);
  await sleep(WAIT * 1000 + 500);
  return [...got.values()].sort((a, b) => a - b);
}
