/**
 * Faults on one shard of a sharded queue, on the Worker path: the production bundle on Miniflare,
 * a queue of four shards in namespaces of a sqld of this file's own (test/trust/named-worker.ts),
 * the writers reaching sqld through the fault proxy, the faults aimed at one shard's database alone
 * (by its namespace). Publishers and claimers as in test/trust/worker-faults.test.ts (the same run,
 * test/trust/worker-fault-run.ts, on the named queue), with the same checks after each: nothing
 * published-and-answered lost, nothing stored twice, nothing acked delivered again, no lease answered already lapsed, one live lease
 * per group (as the claimers saw it, and polled on every shard), FIFO per group, every shard drained
 * to empty with no dead letter, no call past its timeout, every error answer documented, no publish
 * through the client failed.
 *
 * CI size by default; `npm run test:soak` runs it at full size (the knobs of worker-faults.test.ts,
 * and TRUST_WORKER_FAULT_DOWN_SECONDS: how long the shard is down).
 */
import type { Client } from "@libsql/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Proxy as FaultProxy } from "../../scripts/support/proxy.js";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { shardDatabaseName, shardedSeq } from "../../src/rules.js";
import { checkInvariants, resetDatabase } from "../support/db.js";
import { envInt, report, sleep, tableCounts } from "../support/trust.js";
import { type NamedWorker, onNamespace, startNamedWorker } from "./named-worker.js";
import { FaultRun, type RunOptions } from "./worker-fault-run.js";

const MESSAGES = envInt("TRUST_WORKER_FAULT_MESSAGES", 96);
const GROUPS = envInt("TRUST_WORKER_FAULT_GROUPS", 16);
const CLAIMERS = envInt("TRUST_WORKER_FAULT_CLAIMERS", 64);
const PUBLISHERS = envInt("TRUST_WORKER_FAULT_PUBLISHERS", 4);
const DOWN_SECONDS = envInt("TRUST_WORKER_FAULT_DOWN_SECONDS", 3);
const VISIBILITY = 4;
const CALL_TIMEOUT_MS = 20_000;
const BUDGET_MS = Math.max(90_000, MESSAGES * 60);
const TEST_MS = BUDGET_MS + 60_000;
const TOKEN = "worker-faults-sharded-token-0123456789";
const QUEUE = "faulty";
const SHARDS = 4;
/** The shard whose database the faults hit. */
const HIT = 2;
const WRITES = "BEGIN IMMEDIATE";

/**
 * While one shard is down, the others keep being served: claims and long polls, publishes to their
 * groups (issue 26 item 3). Turn on once a sharded queue serves around a down shard; until then the
 * figure is printed, not asserted.
 */
const SERVES_AROUND_A_DOWN_SHARD = false;

let w: NamedWorker;
let proxy: FaultProxy;
let shards: LibsqlTransport[] = [];
let dbs: Client[] = [];

const onHitShard = onNamespace(shardDatabaseName(QUEUE, HIT, SHARDS));
const hitWrites = (r: string) => r.includes(WRITES) && onHitShard(r);

beforeAll(async () => {
  w = await startNamedWorker({ token: TOKEN, proxy: true });
  proxy = w.proxy as FaultProxy;
  const made = await w.api(`/v1/queues/${QUEUE}`, { method: "PUT", json: { shards: SHARDS } });
  expect(made.status, made.text).toBe(201);
  // Each shard's database itself, for the checks (never through the proxy).
  shards = await Promise.all(
    Array.from({ length: SHARDS }, (_, i) =>
      LibsqlTransport.create(w.sqld.url, { namespace: shardDatabaseName(QUEUE, i, SHARDS) }),
    ),
  );
  dbs = shards.map((t) => clientOf(t));
}, 180_000);

afterAll(async () => {
  for (const t of shards) t.close();
  await w?.stop();
});

const options = (o: Partial<RunOptions> = {}): RunOptions => ({
  url: () => w.url,
  token: TOKEN,
  db: dbs,
  queue: QUEUE,
  messages: MESSAGES,
  groups: GROUPS,
  publishers: PUBLISHERS,
  claimers: CLAIMERS,
  visibility: VISIBILITY,
  callTimeoutMs: CALL_TIMEOUT_MS,
  budgetMs: BUDGET_MS,
  ...o,
});

/** Runs `fault` under load on the sharded queue and checks everything a run must show; prints its figures. */
async function underLoad(name: string, fault: (run: FaultRun) => Promise<void>): Promise<FaultRun> {
  for (const db of dbs) await resetDatabase(db);
  const before = { ...proxy.stats };
  const run = new FaultRun(options());
  const { drainMs, overlaps } = await run.run(() => fault(run));
  proxy.clear();
  expect(run.check().slice(0, 20)).toEqual([]);
  expect(overlaps, "groups seen on a shard with two live leases").toEqual([]);
  expect(run.clientPublishErrors, "publishes through the client that failed").toEqual([]);
  const left = { messages: 0, leased: 0, deadLetters: 0 };
  for (const db of dbs) {
    const t = await tableCounts(db);
    left.messages += t.messages ?? 0;
    left.leased += t.leased ?? 0;
    left.deadLetters += t.dead_letters ?? 0;
    await checkInvariants(db);
  }
  expect(left).toEqual({ messages: 0, leased: 0, deadLetters: 0 });
  const faults = Object.fromEntries(
    (["cut", "drop", "truncate", "hang", "stall", "delay", "status"] as const)
      .map((k) => [k, proxy.stats[k] - before[k]])
      .filter(([, n]) => (n as number) > 0),
  );
  const perShard = Array.from({ length: SHARDS }, (_, s) =>
    [...run.acked.keys()].filter((seq) => shardedSeq.shard(seq, SHARDS) === s),
  ).map((l) => l.length);
  report(`worker fault, shard ${HIT} of ${SHARDS}: ${name}`, {
    ...run.figures(),
    faults,
    drainMs,
    ackedPerShard: perShard,
  });
  return run;
}

/** Waits until `n` more faults of `kind` were applied. */
async function applied(kind: keyof FaultProxy["stats"], n: number): Promise<void> {
  const from = proxy.stats[kind];
  const until = Date.now() + 30_000;
  while (proxy.stats[kind] - from < n && Date.now() < until) await sleep(20);
}

describe(`a queue of ${SHARDS} shards, faults on shard ${HIT}'s database (${CLAIMERS} claimers, ${PUBLISHERS} publishers, ${MESSAGES} messages)`, () => {
  it("requests lost before its primary, and answers lost after the commit", { timeout: TEST_MS }, async () => {
    await underLoad("lost requests and answers", async () => {
      await sleep(100);
      proxy.inject({ kind: "cut" }, { match: hitWrites, times: 6 });
      await applied("cut", 6);
      proxy.inject({ kind: "drop" }, { match: hitWrites, times: 6 });
      await applied("drop", 6);
    });
  });

  it("bursts of 5xx and 429, and stalls of seconds", { timeout: TEST_MS }, async () => {
    await underLoad("5xx and 429 bursts, stalls", async () => {
      await sleep(100);
      for (const f of [
        { kind: "status", status: 503, retryAfter: "1" },
        { kind: "status", status: 500, after: true },
        { kind: "status", status: 502 },
        { kind: "status", status: 429, retryAfter: "1" },
      ] as const) {
        proxy.inject(f, { match: onHitShard, times: 3 });
      }
      await applied("status", 12);
      proxy.inject({ kind: "delay", ms: 2500 }, { match: hitWrites, times: 2 });
      await applied("delay", 2);
    });
  });

  it(`the shard down for ${DOWN_SECONDS} s: nothing lost, and the others served meanwhile`, {
    timeout: TEST_MS,
  }, async () => {
    let window = { from: 0, to: 0 };
    const run = await underLoad(`down for ${DOWN_SECONDS} s`, async () => {
      await sleep(300);
      // Every request to it refused as an unreachable primary's gateway would.
      proxy.inject({ kind: "status", status: 503 }, { match: onHitShard, times: 1_000_000 });
      window = { from: Date.now(), to: Date.now() + DOWN_SECONDS * 1000 };
      await sleep(DOWN_SECONDS * 1000);
      proxy.clear();
    });
    // Acks of the other shards' messages answered while it was down (a second into it: what was under way aside).
    const served = run.ackTimes.filter(
      (a) => a.at > window.from + 1000 && a.at < window.to && shardedSeq.shard(a.seq, SHARDS) !== HIT,
    ).length;
    report(`worker fault, shard ${HIT} of ${SHARDS} down`, { servedByTheOthersMeanwhile: served });
    if (SERVES_AROUND_A_DOWN_SHARD) expect(served, "acks of the other shards while one was down").toBeGreaterThan(0);
  });
});
