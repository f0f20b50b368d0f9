/**
 * Delivery through the Worker (its bundle under Miniflare, QueueWriter bound, against a fresh sqld
 * behind a counting proxy): publish→delivery latency with push, long polls and polling every second,
 * a backlog drained by push and by pull consumers, and what idle consumers cost in database
 * requests per minute.
 */

import { serveWorker } from "../support/miniflare.js";
import { startProxy } from "../support/proxy.js";
import { startSqld } from "../support/sqld.js";
import { type Api, apiOf } from "./api.js";
import { TOKEN } from "./config.js";
import { fmt, percentile, progress, sleep, table } from "./lib.js";
import { idleSubscription, pullDrain, pushDrain, pushLatency } from "./push.js";

/** Text only a claim statement carries (src/core/sql/claim.ts). */
const CLAIM = "tq_claimed_at AS stamp";
/** The latency case's long poll, in seconds. */
const WAIT = 5;

interface Lease {
  lease_id: string;
  event: { id: number };
}

/** Consumers claim (long poll, or polling every second), ack, and record each message's latency. */
export async function latency(api: Api, mode: "long-poll" | "poll-1s", messages: number): Promise<number[]> {
  const sentAt = new Map<number, number>();
  const lat: number[] = [];
  const stop = new AbortController();
  const consumer = async (w: number) => {
    while (!stop.signal.aborted) {
      const body = { worker_id: `c${w}`, visibility: 30, ...(mode === "long-poll" ? { wait: WAIT } : {}) };
      let got: { status: number; body: unknown };
      try {
        got = await api("/v1/claims", body, stop.signal);
      } catch {
        return; // aborted
      }
      if (got.status === 204) {
        if (mode === "poll-1s") await sleep(1000);
        continue;
      }
      const lease = got.body as Lease;
      const t = sentAt.get(lease.event.id);
      if (t !== undefined) lat.push(performance.now() - t);
      await api(`/v1/leases/${lease.lease_id}/ack`, undefined);
      if (lat.length >= messages) stop.abort();
    }
  };
  const consumers = Array.from({ length: 4 }, (_, w) => consumer(w));
  await sleep(300); // let the consumers settle into their wait (or poll) before the first publish
  for (let id = 0; id < messages; id++) {
    sentAt.set(id, performance.now());
    await api(`/v1/groups/g${id % 8}/messages`, { event: { id } });
    await sleep(40);
  }
  const deadline = Date.now() + 10_000;
  while (lat.length < messages && Date.now() < deadline) await sleep(20);
  stop.abort();
  await Promise.allSettled(consumers);
  // The writer is not told of a client that hangs up over a real socket (Miniflare here): its waits
  // run on until they end, and would take the next case's messages.
  if (mode === "long-poll") await sleep(WAIT * 1000 + 500);
  return lat.sort((a, b) => a - b);
}

/** sqld's rows-read counter (what Turso bills), as it stands (no settling: a window spans seconds). */
async function rowsRead(adminUrl: string): Promise<number> {
  const res = await fetch(`${adminUrl}/v1/namespaces/default/stats`);
  return ((await res.json()) as { rows_read_count: number }).rows_read_count;
}

/** Claim batches (and all requests) reaching the database per minute from `n` idle consumers. */
export async function idle(
  api: Api,
  counts: { claims: number; requests: number },
  mode: "long-poll" | "poll-1s",
  n: number,
  seconds: number,
  adminUrl: string,
): Promise<{ claims: number; requests: number; rowsRead: number }> {
  const stop = new AbortController();
  const loops = Array.from({ length: n }, async (_, w) => {
    while (!stop.signal.aborted) {
      try {
        const body = { worker_id: `idle${w}`, visibility: 30, ...(mode === "long-poll" ? { wait: 20 } : {}) };
        const got = await api("/v1/claims", body, stop.signal);
        if (got.status === 204 && mode === "poll-1s") await sleep(1000);
      } catch {
        return;
      }
    }
  });
  await sleep(1000); // arrivals settle
  const c0 = { ...counts };
  const r0 = await rowsRead(adminUrl);
  await sleep(seconds * 1000);
  const per = (k: keyof typeof counts) => ((counts[k] - c0[k]) / seconds) * 60;
  const out = {
    claims: per("claims"),
    requests: per("requests"),
    rowsRead: (((await rowsRead(adminUrl)) - r0) / seconds) * 60,
  };
  stop.abort();
  await Promise.allSettled(loops);
  return out;
}

export async function longPollBench(opts: {
  quick: boolean;
}): Promise<{ text: string; figures: Record<string, number> }> {
  const sqld = await startSqld({ admin: true });
  const proxy = await startProxy(sqld.port);
  const counts = { claims: 0, requests: 0 };
  proxy.observe = (r) => {
    counts.requests++;
    if (r.includes(CLAIM)) counts.claims++;
  };
  const worker = await serveWorker({ databaseUrl: proxy.url, queueToken: TOKEN });
  const api = apiOf(worker.url);
  const messages = opts.quick ? 40 : 150;
  const idleSeconds = opts.quick ? 6 : 20;
  const figures: Record<string, number> = {};
  try {
    const rows: string[][] = [];
    for (const mode of ["long-poll", "poll-1s"] as const) {
      progress(`delivery: publish→delivery latency, ${mode}, ${messages} messages`);
      const lat = await latency(api, mode, messages);
      figures[`latency.${mode}.p50`] = percentile(lat, 50);
      figures[`latency.${mode}.p99`] = percentile(lat, 99);
      rows.push([mode, String(lat.length), fmt(percentile(lat, 50), 1), fmt(percentile(lat, 99), 1)]);
    }
    progress(`delivery: publish→delivery latency, push, ${messages} messages`);
    const pushed = await pushLatency(worker.url, api, messages);
    figures["latency.push.p50"] = percentile(pushed, 50);
    figures["latency.push.p99"] = percentile(pushed, 99);
    rows.unshift([
      "push (1 subscription)",
      String(pushed.length),
      fmt(percentile(pushed, 50), 1),
      fmt(percentile(pushed, 99), 1),
    ]);

    const backlog = opts.quick ? 500 : 2000;
    progress(`delivery: a backlog of ${backlog} drained by push, then by 8 pull consumers`);
    const push = await pushDrain(worker.url, api, backlog);
    const pull = await pullDrain(api, backlog, 8);
    // The same, on a Worker allowed 16 deliveries in flight (QUEUE_PUSH_CONNECTIONS).
    const wide = await serveWorker({
      databaseUrl: proxy.url,
      queueToken: TOKEN,
      vars: { QUEUE_PUSH_CONNECTIONS: "16" },
    });
    let push16: number;
    try {
      push16 = await pushDrain(wide.url, apiOf(wide.url), backlog);
    } finally {
      await wide.stop();
    }
    figures["drain.push.perSecond"] = push;
    figures["drain.push16.perSecond"] = push16;
    figures["drain.pull8.perSecond"] = pull;
    const drainRows = [
      ["pull, 8 consumers (acks ride claims)", fmt(pull), "1.00x"],
      ["push, 1 subscription, 4 deliveries in flight (default)", fmt(push), `${fmt(push / pull, 2)}x`],
      ["push, 1 subscription, QUEUE_PUSH_CONNECTIONS=16", fmt(push16), `${fmt(push16 / pull, 2)}x`],
    ];

    const idleRows: string[][] = [];
    progress(`delivery: 1 idle subscription, ${idleSeconds} s`);
    const stopIdle = await idleSubscription(worker.url);
    const sub = await idle(api, counts, "long-poll", 0, idleSeconds, sqld.adminUrl as string);
    await stopIdle();
    figures["idle.subscription.claimBatchesPerMin"] = sub.claims;
    figures["idle.subscription.requestsPerMin"] = sub.requests;
    figures["idle.subscription.rowsReadPerMin"] = sub.rowsRead;
    idleRows.push(["1 subscription (push)", fmt(sub.claims), fmt(sub.requests), fmt(sub.rowsRead)]);
    // Polling first: the long polls' waits outlive their aborted clients (see above).
    for (const mode of ["poll-1s", "long-poll"] as const) {
      progress(`delivery: 64 idle consumers, ${mode}, ${idleSeconds} s`);
      const r = await idle(api, counts, mode, 64, idleSeconds, sqld.adminUrl as string);
      figures[`idle64.${mode}.claimBatchesPerMin`] = r.claims;
      figures[`idle64.${mode}.requestsPerMin`] = r.requests;
      figures[`idle64.${mode}.rowsReadPerMin`] = r.rowsRead;
      idleRows.push([`64 consumers, ${mode}`, fmt(r.claims), fmt(r.requests), fmt(r.rowsRead)]);
    }
    const text = [
      "### Delivery through the Worker (bundle under Miniflare, QueueWriter, sqld on loopback)",
      "",
      "Publish→delivery latency (ms), one publish every 40 ms over 8 groups; 4 pull consumers, or one subscription:",
      "",
      table(["consumers", "messages", "p50", "p99"], rows),
      "",
      `A backlog of ${backlog} messages over 64 groups, drained (messages/s, consumer on loopback answering at once):`,
      "",
      table(["consumer", "messages/s", "vs pull"], drainRows),
      "",
      `Database requests per minute with nothing to deliver (${idleSeconds} s measured, after arrivals):`,
      "",
      table(["idle fleet", "claim batches/min", "database requests/min", "rows read/min (billed)"], idleRows),
      "",
      "Polling claims ride the writer's group commit (several claims per batch), but each claim still reads its rows.",
      "Long polls: each arrival makes one claim; then, with nothing written through the writer, one probing claim",
      "every QUEUE_RECHECK_SECONDS (2) for the least picky waiter, plus one read asking when something next comes due;",
      "a waiter whose 20 s wait ends comes back as a new arrival. A subscription: one probing claim per re-check",
      "(the writer's alarm), one read of the subscriptions and one asking when something next comes due.",
      "",
    ].join("\n");
    return { text, figures };
  } finally {
    await worker.stop();
    await proxy.close();
    await sqld.stop();
  }
}

if (process.argv[1]?.endsWith("delivery.ts")) {
  const r = await longPollBench({ quick: process.argv.includes("--quick") });
  process.stdout.write(`${r.text}\n`);
  process.exit(0);
}
