/**
 * Push delivery through the Worker (the QueueWriter's pusher) against pull consumers, on the same
 * Worker and sqld as the delivery bench (scripts/bench/delivery.ts): publish→delivery latency, a
 * backlog drained by push vs by pull consumers, and what an idle subscription costs.
 */
import { type Consumer, startConsumer } from "../support/consumer.js";
import type { Api } from "./api.js";
import { TOKEN } from "./config.js";
import { sleep } from "./lib.js";

async function call(url: string, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

const subscribe = (url: string, name: string, target: string, maxInFlight = 10) =>
  call(url, "PUT", `/v1/subscriptions/${name}`, { url: target, max_in_flight: maxInFlight });
const unsubscribe = (url: string, name: string) => call(url, "DELETE", `/v1/subscriptions/${name}`);

async function depth(url: string): Promise<number> {
  const s = (await call(url, "GET", "/v1/stats")) as Record<string, number>;
  return (s.ready ?? 0) + (s.waiting ?? 0) + (s.in_flight ?? 0) + (s.parked ?? 0) + (s.delayed ?? 0);
}

async function until(what: string, ms: number, probe: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`push bench: timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** Publish→delivery latency (ms) with one subscription, publishing as the long-poll case does. */
export async function pushLatency(url: string, api: Api, messages: number): Promise<number[]> {
  const sentAt = new Map<number, number>();
  const lat: number[] = [];
  const consumer = await startConsumer((r) => {
    const t = sentAt.get((r.delivery.event as { id: number }).id);
    if (t !== undefined) lat.push(performance.now() - t);
    return { status: 200 };
  });
  try {
    await subscribe(url, "latency", `${consumer.url}/latency`);
    for (let id = 0; id < messages; id++) {
      sentAt.set(id, performance.now());
      await api(`/v1/groups/g${id % 8}/messages`, { event: { id } });
      await sleep(40);
    }
    await until("the pushes", 10_000, () => lat.length >= messages);
    await until("the acks", 10_000, async () => (await depth(url)) === 0);
  } finally {
    await unsubscribe(url, "latency");
    await consumer.close();
  }
  return lat.sort((a, b) => a - b);
}

async function backlog(api: Api, n: number): Promise<void> {
  for (let i = 0; i < n; i += 100) {
    const messages = Array.from({ length: Math.min(100, n - i) }, (_, k) => ({
      group_id: `b${(i + k) % 64}`,
      event: { i: i + k },
    }));
    await api("/v1/messages", { messages });
  }
}

/** Messages per second: a backlog of `n` over 64 groups drained by one subscription. */
export async function pushDrain(url: string, api: Api, n: number): Promise<number> {
  await backlog(api, n);
  let consumer: Consumer | undefined;
  const t0 = performance.now();
  try {
    consumer = await startConsumer(() => ({ status: 200 }));
    await subscribe(url, "drain", `${consumer.url}/drain`, 100);
    await until("the backlog pushed", 120_000, () => (consumer?.received.length ?? 0) >= n);
    await until("the acks", 20_000, async () => (await depth(url)) === 0);
    return n / ((performance.now() - t0) / 1000);
  } finally {
    await unsubscribe(url, "drain");
    await consumer?.close();
  }
}

/** Messages per second: the same backlog drained by `c` pull consumers, each ack riding its next claim. */
export async function pullDrain(api: Api, n: number, c: number): Promise<number> {
  await backlog(api, n);
  let done = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: c }, async (_, w) => {
      let ack: string[] = [];
      for (;;) {
        const body = { worker_id: `pull${w}`, visibility: 30, max: 1, ...(ack.length > 0 ? { ack } : {}) };
        const got = await api("/v1/claims", body);
        if (got.status !== 200) throw new Error(`pull: ${got.status} ${JSON.stringify(got.body)}`);
        const leases = (got.body as { leases: Array<{ lease_id: string }> }).leases;
        done += ack.length;
        if (leases.length === 0) {
          if (done >= n) return;
          ack = [];
          await sleep(5);
          continue;
        }
        ack = leases.map((l) => l.lease_id);
      }
    }),
  );
  return n / ((performance.now() - t0) / 1000);
}

/** Starts (and later stops) one subscription with nothing to deliver, for the idle-cost window. */
export async function idleSubscription(url: string): Promise<() => Promise<void>> {
  const consumer = await startConsumer(() => ({ status: 200 }));
  await subscribe(url, "idle", `${consumer.url}/idle`);
  return async () => {
    await unsubscribe(url, "idle");
    await consumer.close();
  };
}
