/**
 * Model-based: fast-check runs random sequences of steps (test/trust/model/commands.ts) against a
 * queue of one shard and one of four, through the Worker's production bundle on Miniflare with
 * named queues in sqld namespaces (test/trust/named-worker.ts): publishes (keyed and not, single and
 * batch, sent again), claims (of one and many, long polls, long polls whose client hangs up, several
 * waiters and one batch), acks, nacks (parked, dead-lettered), releases, extends, stale leases,
 * redrives, purges, and the queue deleted and made again. After every step the queue must agree with
 * the model (test/trust/model/model.ts): each claim a choice it may make (a group's first message,
 * nothing else of the group in flight), each answer as the model says, its stats equal to the
 * model's counts (so no lease is out that no caller received); after every run, each group's
 * messages in order with their states and attempts, and the dead letters. A failure is shrunk to a
 * short sequence of steps.
 *
 * CI size by default; `npm run test:soak` runs it long (TRUST_MODEL_RUNS, TRUST_MODEL_STEPS).
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, it } from "vitest";
import { shardOf } from "../../src/rules.js";
import { envInt, report } from "../support/trust.js";
import { Conflict, commands, contents, GROUPS, Publish, QueueModel, type Real, recreate } from "./model/commands.js";
import { type NamedWorker, startNamedWorker } from "./named-worker.js";

const TOKEN = "model-test-token-0123456789";
const RUNS = envInt("TRUST_MODEL_RUNS", 8);
const STEPS = envInt("TRUST_MODEL_STEPS", 30);
const SEED = process.env.TRUST_MODEL_SEED === undefined ? undefined : Number(process.env.TRUST_MODEL_SEED);

let w: NamedWorker;

beforeAll(async () => {
  w = await startNamedWorker({ token: TOKEN });
}, 180_000);

afterAll(async () => w?.stop());

async function check(shards: number, conflicts: boolean, runs = RUNS): Promise<void> {
  const real: Real = { api: w.api, name: `model-${shards}`, shards, conflicts };
  let steps = 0;
  const started = Date.now();
  await fc.assert(
    fc.asyncProperty(fc.commands(commands(), { maxCommands: STEPS, size: "max" }), async (cmds) => {
      await recreate(real);
      const model = new QueueModel();
      await fc.asyncModelRun(() => ({ model, real }), cmds);
      await contents(model, real);
      steps += [...cmds].length;
    }),
    { numRuns: runs, ...(SEED === undefined ? {} : { seed: SEED }), endOnFailure: false },
  );
  report(`model: ${shards} shard(s)`, { runs, steps, ms: Date.now() - started });
}

describe("the queue against its model, through the Worker", () => {
  it("one shard: every step as the model says", { timeout: 600_000 }, async () => {
    await check(1, true);
  });

  it("four shards: every step as the model says", { timeout: 600_000 }, async () => {
    await check(4, true);
  });

  // The shortest sequence the model finds: a keyed publish, then its key for a group of another shard.
  it("four shards: a key used again for a group of another shard is refused, as one database refuses it (issue 30 item 2)", async () => {
    const real: Real = { api: w.api, name: "model-4", shards: 4, conflicts: true };
    await recreate(real);
    const [a, b] = [0, 1].map((s) => GROUPS.findIndex((g) => shardOf(g, 4) === s)) as [number, number];
    const model = new QueueModel();
    await fc.asyncModelRun(() => ({ model, real }), [new Publish(a, 0), new Conflict(0, b)]);
  });
});
