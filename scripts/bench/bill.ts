/**
 * The whole bill per million messages, from what each way of using the queue costs per message,
 * measured through the Worker (its production bundle under Miniflare, the QueueWriter bound) with
 * the database a round trip away (a proxy holds every answer `distanceMs`):
 *
 * - **single**: publishers calling `publish` one message at a time (32 at once), then `consume(256)`;
 * - **batch**: `publishMany` of 100, then `consume(256)`;
 * - **push**: single publishes to a queue with one subscription (a consumer on 127.0.0.1 answering 200).
 *
 * Per message: the HTTP requests the Worker received (each one, for a queue of one database, is one
 * call of its QueueWriter: a Durable Object request), the rows sqld billed (its admin counters), the
 * writer's wall time (the phase's duration: it has a batch in flight throughout) and workerd's CPU.
 * Prices are the providers' list prices (`PRICES`, with the day they were read); `npm run bench:bill`.
 */
import { createClient, type QueueClient } from "../../src/client/index.js";
import { consume } from "../../src/index.js";
import { startConsumer } from "../support/consumer.js";
import { serveWorker } from "../support/miniflare.js";
import { startProxy } from "../support/proxy.js";
import { billed, startSqld } from "../support/sqld.js";
import { TOKEN } from "./config.js";
import { fmt, progress, sleep, table } from "./lib.js";
import { cpuMsOf, descendantsNamed } from "./procs.js";

/** List prices in USD, as read on `READ_ON` (past each plan's allowance). */
export const PRICES = {
  READ_ON: "2026-12-05",
  /** Workers Paid: requests, CPU time. */
  workerRequestPerM: 0.3,
  workerCpuMsPerM: 0.02,
  /** Durable Objects: requests (HTTP, each RPC call, alarms), duration at 128 MB. */
  doRequestPerM: 0.15,
  doGbSecondPerM: 12.5,
  doGb: 0.128,
  /** Turso: rows written per million, rows read per billion. */
  tursoWrittenPerM: 1,
  tursoReadPerB: 1,
  /** SQS FIFO: per million requests (send, receive and delete: three per message of up to 64 KB). */
  sqsFifoPerM: 0.5,
  /** Cloudflare Queues: per million operations (write, read, delete: three per 64 KB message). */
  cfQueuesPerM: 0.4,
};

export interface Measured {
  mode: "single" | "batch" | "push";
  messages: number;
  /** Per message. */
  workerRequests: number;
  written: number;
  read: number;
  writerMs: number;
  workerdCpuMs: number;
}

export interface Bill {
  workerRequests: number;
  workerCpu: number;
  doRequests: number;
  doDuration: number;
  tursoWritten: number;
  tursoRead: number;
  total: number;
}

/** Dollars per million messages. */
export function billOf(m: Measured): Bill {
  const M = 1e6;
  const b = {
    workerRequests: (m.workerRequests * M * PRICES.workerRequestPerM) / M,
    workerCpu: (m.workerdCpuMs * M * PRICES.workerCpuMsPerM) / M,
    doRequests: (m.workerRequests * M * PRICES.doRequestPerM) / M,
    doDuration: ((m.writerMs / 1000) * PRICES.doGb * M * PRICES.doGbSecondPerM) / M,
    tursoWritten: m.written * PRICES.tursoWrittenPerM,
    tursoRead: (m.read * M * PRICES.tursoReadPerB) / 1e9,
  };
  return { ...b, total: Object.values(b).reduce((s, v) => s + v, 0) };
}

const PUBLISHERS = 32;

export async function billBench(o: {
  messages: number;
  distanceMs: number;
}): Promise<{ text: string; measured: Measured[] }> {
  const sqld = await startSqld({ admin: true });
  const adminUrl = sqld.adminUrl as string;
  const proxy = await startProxy(sqld.port);
  proxy.latencyMs = o.distanceMs;
  const worker = await serveWorker({ databaseUrl: proxy.url, queueToken: TOKEN });
  const workerd = descendantsNamed("workerd");
  let requests = 0;
  const counting = (input: RequestInfo | URL, init?: RequestInit) => {
    requests++;
    return fetch(input, init);
  };
  const q: QueueClient = createClient({ url: worker.url, token: TOKEN, fetch: counting });
  const measured: Measured[] = [];
  /** Runs `phase`, measuring around it: per message of `n`. */
  const measure = async (mode: Measured["mode"], n: number, phase: () => Promise<void>) => {
    await sleep(150); // sqld's counters settle
    const rows0 = await billed(adminUrl);
    const req0 = requests;
    const cpu0 = cpuMsOf(workerd);
    const t0 = performance.now();
    await phase();
    const ms = performance.now() - t0;
    const cpu1 = cpuMsOf(workerd);
    await sleep(150);
    const rows1 = await billed(adminUrl);
    return {
      mode,
      messages: n,
      workerRequests: (requests - req0) / n,
      written: (rows1.written - rows0.written) / n,
      read: (rows1.read - rows0.read) / n,
      writerMs: ms / n,
      workerdCpuMs: (cpu1 - cpu0) / n,
    };
  };
  const add = (a: Measured, b: Measured): Measured => ({
    mode: a.mode,
    messages: a.messages,
    workerRequests: a.workerRequests + b.workerRequests,
    written: a.written + b.written,
    read: a.read + b.read,
    writerMs: a.writerMs + b.writerMs,
    workerdCpuMs: a.workerdCpuMs + b.workerdCpuMs,
  });
  const n = o.messages;
  // Many messages a group, as a queue in use has (a group created and emptied per message costs 2 rows more).
  const groups = Math.min(256, n);
  const drain = () =>
    measure("single", n, async () => {
      const stop = new AbortController();
      let handled = 0;
      await consume(
        q,
        () => {
          if (++handled >= n) stop.abort();
        },
        { workerId: "bill", concurrency: 256, visibility: 60, signal: stop.signal },
      );
    });
  try {
    await q.stats();
    progress(`bill: ${n} messages a way, database +${o.distanceMs} ms; single publishes`);
    const single = await measure("single", n, async () => {
      let next = 0;
      await Promise.all(
        Array.from({ length: PUBLISHERS }, async () => {
          for (let i = next++; i < n; i = next++) await q.publish(`g${i % groups}`, { i });
        }),
      );
    });
    measured.push(add(single, await drain()));
    progress("bill: publishMany(100)");
    const batch = await measure("batch", n, async () => {
      for (let i = 0; i < n; i += 100) {
        await q.publishMany(
          Array.from({ length: Math.min(100, n - i) }, (_, k) => ({ groupId: `g${(i + k) % groups}`, event: { k } })),
        );
      }
    });
    measured.push({ ...add(batch, await drain()), mode: "batch" });
    progress("bill: push");
    let pushed = 0;
    const consumer = await startConsumer(() => {
      pushed++;
      return { status: 200 };
    });
    try {
      await q.subscribe("bill", { url: `${consumer.url}/bill`, maxInFlight: 16 });
      measured.push(
        await measure("push", n, async () => {
          let next = 0;
          await Promise.all(
            Array.from({ length: PUBLISHERS }, async () => {
              for (let i = next++; i < n; i = next++) await q.publish(`g${i % groups}`, { i });
            }),
          );
          const deadline = Date.now() + 120_000;
          while (Date.now() < deadline) {
            const s = await q.stats();
            if (pushed >= n && s.ready + s.waiting + s.inFlight === 0) break;
            await sleep(50);
          }
        }),
      );
      await q.unsubscribe("bill");
    } finally {
      await consumer.close();
    }
  } finally {
    await worker.stop();
    await proxy.close();
    await sqld.stop();
  }
  return { text: billReport(measured, o), measured };
}

const WAYS: Record<Measured["mode"], string> = {
  single: "single publish + consume(256)",
  batch: "publishMany(100) + consume(256)",
  push: "single publish, pushed",
};

export function billReport(measured: Measured[], o: { messages: number; distanceMs: number }): string {
  const per = table(
    [
      "way",
      "Worker (= Durable Object) requests / msg",
      "rows written / msg",
      "rows read / msg",
      "writer wall ms / msg",
      "workerd CPU ms / msg",
    ],
    measured.map((m) => [
      WAYS[m.mode],
      fmt(m.workerRequests, 3),
      fmt(m.written, 2),
      fmt(m.read, 2),
      fmt(m.writerMs, 3),
      fmt(m.workerdCpuMs, 3),
    ]),
  );
  const usd = (v: number) => `$${v < 0.01 ? v.toFixed(4) : v.toFixed(2)}`;
  const bills = table(
    [
      "way",
      "Worker requests",
      "Worker CPU",
      "DO requests",
      "DO duration",
      "Turso rows written",
      "Turso rows read",
      "total",
    ],
    measured.map((m) => {
      const b = billOf(m);
      return [
        WAYS[m.mode],
        usd(b.workerRequests),
        usd(b.workerCpu),
        usd(b.doRequests),
        usd(b.doDuration),
        usd(b.tursoWritten),
        usd(b.tursoRead),
        usd(b.total),
      ];
    }),
  );
  return [
    `### Per message (${o.messages} messages a way, database +${o.distanceMs} ms)`,
    "",
    per,
    "",
    `### Per million messages, at list prices read ${PRICES.READ_ON} (past each plan's allowance)`,
    "",
    bills,
    "",
    `SQS FIFO: ${usd(3 * PRICES.sqsFifoPerM)} (three requests a message); Cloudflare Queues: ${usd(3 * PRICES.cfQueuesPerM)} (three operations a message).`,
  ].join("\n");
}

if (process.argv[1]?.endsWith("bill.ts")) {
  const quick = process.argv.includes("--quick");
  const r = await billBench({ messages: quick ? 1000 : 4000, distanceMs: 50 });
  process.stdout.write(`${r.text}\n`);
  process.exit(0);
}
