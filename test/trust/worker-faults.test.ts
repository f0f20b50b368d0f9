/**
 * Faults on the Worker path users deploy: the production bundle on Miniflare's direct socket
 * (scripts/support/miniflare.ts), its QueueWriter talking to a sqld of this file's own through the
 * fault proxy (scripts/support/proxy.ts), a second proxy in front of the Worker (so that the Worker
 * can be restarted on another port). Publishers and claimers go through the HTTP client and as raw
 * requests (test/trust/worker-fault-run.ts) while one fault plays out at a time: requests lost
 * before the primary, answers lost after the commit, 5xx and 429 bursts, stalls of seconds, a slow
 * wake, sqld SIGKILLed and restarted, the writer reset mid-batch (Miniflare restarted on the same
 * storage), clients hanging up mid-claim and mid-long-poll, push subscribers failing and timing out.
 *
 * After each: nothing published-and-answered lost, nothing stored twice, nothing acked delivered
 * again, one live lease per group (as the claimers saw it, and polled on sqld), FIFO per group, the
 * queue drained to empty with no dead letter, no call past its timeout, every error answer the
 * API's JSON with a documented code, and no publish through the client failed. CI size by default;
 * `npm run test:soak` runs it at full size. Knobs: TRUST_WORKER_FAULT_MESSAGES, _GROUPS, _CLAIMERS,
 * _PUBLISHERS, _ROUNDS (each scenario run that many times), _BASELINE=1 (a run without a fault too).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient as createDbClient } from "@libsql/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Consumer, startConsumer } from "../../scripts/support/consumer.js";
import { type ServedWorker, serveWorker } from "../../scripts/support/miniflare.js";
import { type Proxy as FaultProxy, startProxy } from "../../scripts/support/proxy.js";
import { type Sqld, startSqld } from "../../scripts/support/sqld.js";
import type { PushDelivery } from "../../src/contract/types.js";
import { LibsqlTransport } from "../../src/index.js";
import { checkInvariants, resetDatabase } from "../support/db.js";
import { envInt, report, sleep, tableCounts } from "../support/trust.js";
import { FaultRun, type RunOptions } from "./worker-fault-run.js";

const MESSAGES = envInt("TRUST_WORKER_FAULT_MESSAGES", 96);
const GROUPS = envInt("TRUST_WORKER_FAULT_GROUPS", 16);
const CLAIMERS = envInt("TRUST_WORKER_FAULT_CLAIMERS", 64);
const ROUNDS = envInt("TRUST_WORKER_FAULT_ROUNDS", 1);
const PUBLISHERS = envInt("TRUST_WORKER_FAULT_PUBLISHERS", 4);
/** Seconds that writes stall past the writer's request timeout (10 s): in the soak only (CI time). */
const STALL_SECONDS = envInt("TRUST_WORKER_FAULT_STALL_SECONDS", 0);
/** The run without a fault, for the figures to compare with: in the soak only (CI time). */
const BASELINE = process.env.TRUST_WORKER_FAULT_BASELINE === "1";
const VISIBILITY = 4;
const CALL_TIMEOUT_MS = 20_000;
const TOKEN = "worker-faults-token-0123456789";
/** A run's budget to drain; push deliveries (a few in flight, some timing out) get more. */
const BUDGET_MS = Math.max(90_000, MESSAGES * 60);
const PUSH_BUDGET_MS = Math.max(90_000, MESSAGES * 200);
const TEST_MS = PUSH_BUDGET_MS + 60_000;
/** Write batches (BEGIN IMMEDIATE is their first step): what the faults aim at. */
const WRITES = "BEGIN IMMEDIATE";

let dir: string;
let sqld: Sqld;
let dbProxy: FaultProxy;
let worker: ServedWorker;
let front: FaultProxy;
let admin: LibsqlTransport;
const db = () => createDbClient({ url: sqld.url });

const portOf = (url: string) => Number(new URL(url).port);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "turso-queue-worker-faults-"));
  sqld = await startSqld({ dataDir: join(dir, "data.sqld") });
  dbProxy = await startProxy(sqld.port);
  admin = await LibsqlTransport.create(sqld.url);
  worker = await serveWorker({ databaseUrl: dbProxy.url, queueToken: TOKEN, persist: join(dir, "objects") });
  // The front line: a client who hangs up cancels its request, as Cloudflare's does.
  front = await startProxy(portOf(worker.url), { resetOnHangUp: true });
}, 180_000);

afterAll(async () => {
  admin?.close();
  await front?.close();
  await worker?.stop();
  await dbProxy?.close();
  await sqld?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const options = (o: Partial<RunOptions> = {}): RunOptions => ({
  url: () => front.url,
  token: TOKEN,
  db: db(),
  messages: MESSAGES,
  groups: GROUPS,
  publishers: PUBLISHERS,
  claimers: CLAIMERS,
  visibility: VISIBILITY,
  callTimeoutMs: CALL_TIMEOUT_MS,
  budgetMs: BUDGET_MS,
  ...o,
});

/** Runs `fault` under load and checks everything a run must show; prints its figures. */
async function underLoad(name: string, fault: (run: FaultRun) => Promise<void>, o: Partial<RunOptions> = {}) {
  await resetDatabase(db());
  const before = { ...dbProxy.stats };
  const run = new FaultRun(options(o));
  const { drainMs, overlaps } = await run.run(() => fault(run));
  dbProxy.clear();
  dbProxy.latencyMs = 0;
  expect(run.check().slice(0, 20)).toEqual([]);
  expect(overlaps, "groups seen on sqld with two live leases").toEqual([]);
  expect(run.clientPublishErrors, "publishes through the client that failed").toEqual([]);
  const left = await tableCounts(db());
  expect({ messages: left.messages, leased: left.leased, deadLetters: left.dead_letters }).toEqual({
    messages: 0,
    leased: 0,
    deadLetters: 0,
  });
  await checkInvariants(db());
  const faults = Object.fromEntries(
    (["cut", "drop", "truncate", "hang", "stall", "delay", "status"] as const)
      .map((k) => [k, dbProxy.stats[k] - before[k]])
      .filter(([, n]) => (n as number) > 0),
  );
  report(`worker fault: ${name}`, {
    ...run.figures(),
    faults,
    drainMs,
    lost: 0,
    deliveredAgainAfterAck: 0,
    overlaps: 0,
  });
}

/** Waits until `n` more faults of `kind` were applied (the fault happened under load). */
async function applied(kind: keyof FaultProxy["stats"], n: number): Promise<void> {
  const from = dbProxy.stats[kind];
  const until = Date.now() + 30_000;
  while (dbProxy.stats[kind] - from < n && Date.now() < until) await sleep(20);
}

describe.each(Array.from({ length: ROUNDS }, (_, i) => ({ round: i + 1 })))(
  `the Worker path under faults (${CLAIMERS} claimers, ${PUBLISHERS} publishers, ${MESSAGES} messages; round $round)`,
  () => {
    it.runIf(BASELINE)("no fault (the baseline)", { timeout: TEST_MS }, async () => {
      await underLoad("no fault", async () => {});
    });

    it("requests lost before the primary", { timeout: TEST_MS }, async () => {
      await underLoad("requests lost before the primary", async () => {
        await sleep(100);
        dbProxy.inject({ kind: "cut" }, { match: WRITES, times: 8 });
        await applied("cut", 8);
      });
    });

    it("answers lost after the commit", { timeout: TEST_MS }, async () => {
      await underLoad("answers lost after the commit", async () => {
        await sleep(100);
        dbProxy.inject({ kind: "drop" }, { match: WRITES, times: 8 });
        await applied("drop", 8);
      });
    });

    it("bursts of 5xx and 429", { timeout: TEST_MS }, async () => {
      await underLoad("5xx and 429 bursts", async () => {
        await sleep(100);
        for (const f of [
          { kind: "status", status: 503, retryAfter: "1" },
          { kind: "status", status: 500, after: true },
          { kind: "status", status: 502 },
          { kind: "status", status: 504, after: true },
          { kind: "status", status: 429, retryAfter: "1" },
        ] as const) {
          dbProxy.inject(f, { times: 3 });
        }
        await applied("status", 15);
      });
    });

    it("stalls of seconds", { timeout: TEST_MS }, async () => {
      await underLoad("stalls of seconds", async () => {
        await sleep(100);
        dbProxy.inject({ kind: "delay", ms: 2500 }, { match: WRITES, times: 2 });
        await applied("delay", 2);
        await sleep(500);
        dbProxy.latencyMs = 300;
        await sleep(1500);
        dbProxy.latencyMs = 0;
      });
    });

    it.runIf(STALL_SECONDS > 0)(
      `writes stalled for ${STALL_SECONDS} s, past the writer's request timeout`,
      { timeout: 300_000 },
      async () => {
        const health = async () => {
          const res = await fetch(`${front.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
          const text = await res.text();
          const value = (name: string) => Number(new RegExp(`^${name} (\\d+)`, "m").exec(text)?.[1] ?? 0);
          return {
            timeouts: value('turso_queue_database_failures_total\\{queue="default",code="TIMEOUT"\\}'),
            recoveries: value('turso_queue_database_recoveries_total\\{queue="default"\\}'),
          };
        };
        const before = await health();
        await underLoad(
          `writes stalled for ${STALL_SECONDS} s`,
          async () => {
            await sleep(300);
            // sqld's stall (docs/guarantees.md): write batches hang, reads answer.
            dbProxy.inject({ kind: "stall" }, { match: WRITES, times: 100_000 });
            await sleep(STALL_SECONDS * 1000);
            dbProxy.clear();
            // A batch held when the stall ends is given up at its request timeout: calls may take
            // up to the writer's own budget (30 s), which callers are given here.
          },
          { callTimeoutMs: 35_000 },
        );
        const after = await health();
        // The writer gave its stalled requests up, and answered again by itself.
        expect(after.timeouts).toBeGreaterThan(before.timeouts);
        expect(after.recoveries).toBeGreaterThan(before.recoveries);
        report("worker fault: writer health", { before, after });
      },
    );

    it("a slow wake", { timeout: TEST_MS }, async () => {
      // Idle, then the database takes its time to answer the first requests (a free-plan wake).
      await sleep(1500);
      await underLoad("a slow wake", async () => {
        dbProxy.inject({ kind: "delay", ms: 700 }, { times: 2 });
        await applied("delay", 2);
      });
    });

    it("sqld SIGKILLed and restarted on its data", { timeout: TEST_MS }, async () => {
      let downMs = 0;
      await underLoad("sqld SIGKILLed and restarted", async () => {
        await sleep(300);
        const killed = Date.now();
        await sqld.kill();
        await sleep(500);
        sqld = await startSqld({ dataDir: sqld.dataDir, port: sqld.port });
        downMs = Date.now() - killed;
      });
      report("worker fault: sqld down", { downMs });
    });

    it("the writer reset mid-batch (Miniflare restarted on the same storage)", { timeout: TEST_MS }, async () => {
      let downMs = 0;
      await underLoad("writer reset mid-batch", async () => {
        await sleep(300);
        // A batch held at the proxy: the writer is reset while it waits for the answer.
        dbProxy.inject({ kind: "delay", ms: 1500 }, { match: WRITES });
        await applied("delay", 1);
        const stopped = Date.now();
        front.refuse = true;
        front.retarget(portOf(await worker.restart()));
        front.refuse = false;
        downMs = Date.now() - stopped;
      });
      report("worker fault: writer down", { downMs });
    });

    it("clients hanging up mid-claim and mid-long-poll", { timeout: TEST_MS }, async () => {
      await underLoad("clients hanging up", async () => {}, { hangUps: true });
    });

    describe("push subscribers failing and timing out", () => {
      let consumer: Consumer;
      afterAll(async () => consumer?.close());

      it("every message taken once, after failures and timeouts", { timeout: TEST_MS }, async () => {
        const firstTries = new Set<number>();
        let answers = { failed: 0, timedOut: 0, took: 0 };
        let run: FaultRun | undefined;
        consumer = await startConsumer((r) => {
          const d = r.delivery as PushDelivery & { event: { id: string; group: string; rank: number } };
          const first = !firstTries.has(d.seq);
          firstTries.add(d.seq);
          const at = performance.now();
          // The first delivery of every third message fails, of every fifth one never answers.
          if (first && d.seq % 5 === 0) {
            answers = { ...answers, timedOut: answers.timedOut + 1 };
            run?.pushed(d.seq, d.event, at, false);
            return { status: 200, hang: true };
          }
          if (first && d.seq % 3 === 0) {
            answers = { ...answers, failed: answers.failed + 1 };
            run?.pushed(d.seq, d.event, at, false);
            return { status: 500, headers: { "retry-after": "0" } };
          }
          answers = { ...answers, took: answers.took + 1 };
          run?.pushed(d.seq, d.event, at, true);
          return { status: 200 };
        });
        try {
          await underLoad(
            "push subscribers failing and timing out",
            async (r) => {
              run = r;
              // Made after the reset that starts the run (it empties the subscriptions too).
              const put = await fetch(`${front.url}/v1/subscriptions/faults`, {
                method: "PUT",
                headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
                body: JSON.stringify({ url: `${consumer.url}/faults`, visibility: 2, max_in_flight: 8 }),
              });
              expect(put.status, await put.text()).toBe(200);
            },
            { claim: false, budgetMs: PUSH_BUDGET_MS },
          );
        } finally {
          await fetch(`${front.url}/v1/subscriptions/faults`, {
            method: "DELETE",
            headers: { authorization: `Bearer ${TOKEN}` },
          });
        }
        expect(answers.failed + answers.timedOut).toBeGreaterThan(0);
        expect(consumer.overlaps, "deliveries of a group in flight at once").toBe(0);
        report("worker fault: push answers", answers);
      });
    });
  },
);
