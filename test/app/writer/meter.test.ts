/**
 * A writer's meter over a real transport (a local file): it counts what goes through the transport,
 * buckets claim-to-ack times, samples the queue's state at most once per interval, keeps the last
 * `keep` samples, and stores everything where it outlives the writer (the QueueWriter passes its
 * Durable Object's storage; here, a map). Counts made before the stored ones are read add up.
 */
import { expect, it } from "vitest";
import { HELD_BUCKETS, Meter, type MeterSnapshot, type MeterStore } from "../../../src/app/writer/meter.js";
import { LibsqlTransport } from "../../../src/index.js";
import { tempFile } from "../../support/db.js";
import { waitFor } from "../../support/wait.js";

/** A store in memory, counting its saves. */
function memoryStore(initial?: MeterSnapshot): MeterStore & { kept: MeterSnapshot | undefined; saves: number } {
  const store = {
    kept: initial,
    saves: 0,
    load: async () => structuredClone(store.kept),
    save: async (s: MeterSnapshot) => {
      store.kept = structuredClone(s);
      store.saves++;
    },
  };
  return store;
}

it("counts publishes, acks, nacks, dead letters and releases; buckets claim-to-ack times; stores on reading", async () => {
  const t = await LibsqlTransport.create(`file:${tempFile()}`, { maxAttempts: 2 });
  const store = memoryStore();
  const meter = new Meter(t, { store, sampleMs: 60_000 });
  await t.publishMany([
    { groupId: "a", event: 1 },
    { groupId: "b", event: 2 },
    { groupId: "c", event: 3 },
  ]);
  const [a, b, c] = await t.claimMany("w", 30, 3);
  await t.ack(a as NonNullable<typeof a>);
  await t.nack(b as NonNullable<typeof b>);
  await t.release(c as NonNullable<typeof c>);
  const again = (await t.claimMany("w", 30, 2)).find((l) => l.groupId === "b");
  expect((await t.nack(again as NonNullable<typeof again>)).deadLettered).toBe(true);

  const r = await meter.reading();
  expect(r.counters).toEqual({
    published: 3,
    acked: 1,
    nacked: 2,
    deadLettered: 1,
    released: 1,
    pushed: 0,
    pushFailures: 0,
    // Its database never failed it.
    dbUnavailable: 0,
    dbTimeouts: 0,
    dbBlocked: 0,
    dbRecoveries: 0,
    scheduled: 0,
  });
  expect(r.held.count).toBe(1);
  expect(r.held.counts).toHaveLength(HELD_BUCKETS.length + 1);
  // Acked at once: within the first second's buckets.
  expect(r.held.counts.slice(0, HELD_BUCKETS.indexOf(1) + 1).reduce((x, y) => x + y, 0)).toBe(1);
  // A reading answers what is stored.
  expect(store.kept?.counters).toEqual(r.counters);
  await meter.stop();
  t.close();
});

it("adds what was stored to what it counts, whichever comes first", async () => {
  const t = await LibsqlTransport.create(`file:${tempFile()}`);
  const first = memoryStore();
  const m1 = new Meter(t, { store: first, sampleMs: 60_000 });
  await t.publish("g", 1);
  m1.pushed(true);
  m1.pushed(false);
  await m1.stop();
  expect(first.kept?.counters).toMatchObject({ published: 1, pushed: 2, pushFailures: 1 });

  // The next writer's meter counts a publish before its stored counters are read.
  let release!: () => void;
  const slow: MeterStore = {
    load: async () => {
      await new Promise<void>((r) => {
        release = r;
      });
      return structuredClone(first.kept);
    },
    save: first.save,
  };
  const m2 = new Meter(t, { store: slow, sampleMs: 60_000 });
  await t.publish("g", 2);
  release();
  expect((await m2.reading()).counters).toMatchObject({ published: 2, pushed: 2, pushFailures: 1 });
  await m2.stop();
  t.close();
});

it("samples the queue's state at most once per interval, when something happens, and keeps the last `keep`", async () => {
  const t = await LibsqlTransport.create(`file:${tempFile()}`);
  const meter = new Meter(t, { sampleMs: 200, keep: 3 });
  await t.publish("g", 1);
  const one = await waitFor(async () => {
    const h = await meter.history();
    return h.samples.length === 1 && h;
  });
  expect(one.sampleSeconds).toBe(0.2);
  expect(one.samples[0]).toMatchObject({ ready: 1, published: 1, acked: 0 });
  // Within the interval, a write takes no sample.
  await t.publish("g", 2);
  expect((await meter.history()).samples).toHaveLength(1);
  // After it, reading the history takes one: the running totals move with what went through.
  const lease = await t.claim("w", 30);
  await t.ack(lease as NonNullable<typeof lease>);
  const two = await waitFor(async () => {
    const h = await meter.history();
    return h.samples.length === 2 && h;
  });
  expect(two.samples[1]).toMatchObject({ ready: 1, published: 2, acked: 1 });
  expect(two.samples[1]?.at).toBeGreaterThan((two.samples[0]?.at ?? 0) + 0.19);
  // A fourth pushes the first out.
  const kept = await waitFor(async () => {
    const h = await meter.history();
    return h.samples[0]?.at !== two.samples[0]?.at && h;
  });
  expect(kept.samples).toHaveLength(3);
  expect(kept.samples[0]?.at).toBe(two.samples[1]?.at);
  await meter.stop();
  t.close();
});
