/** A sharded queue's history: its writers' samples as one series (pure: addHistories). */
import { expect, it } from "vitest";
import { addHistories } from "../../src/core/shard.js";
import type { QueueSample } from "../../src/core/types.js";

const sample = (at: number, ready: number, published: number, oldestAge: number | null = null): QueueSample => ({
  at,
  ready,
  waiting: 0,
  inFlight: 0,
  parked: 0,
  delayed: 0,
  deadLetters: 0,
  oldestAge,
  published,
  acked: 0,
});

it("adds up each writer's latest sample at each step, carrying a quiet writer's last one forward", () => {
  const a = { sampleSeconds: 60, samples: [sample(600, 1, 10, 5), sample(660, 2, 20, 7), sample(785, 3, 30)] };
  const b = { sampleSeconds: 60, samples: [sample(610, 10, 100, 9)] };
  const h = addHistories([a, b]);
  expect(h.sampleSeconds).toBe(60);
  expect(h.samples.map((s) => [s.at, s.ready, s.published, s.oldestAge])).toEqual([
    [610, 11, 110, 9],
    [660, 12, 120, 9],
    [785, 13, 130, 9],
  ]);
});

it("before a writer's first sample, its first one stands in (no false jump in a running total)", () => {
  const a = { sampleSeconds: 60, samples: [sample(600, 1, 10), sample(660, 1, 15)] };
  const b = { sampleSeconds: 60, samples: [sample(670, 4, 400)] };
  expect(addHistories([a, b]).samples.map((s) => s.published)).toEqual([410, 415]);
});

it("no writer with samples: none; the longest interval is the step", () => {
  expect(addHistories([])).toEqual({ sampleSeconds: 1, samples: [] });
  expect(
    addHistories([
      { sampleSeconds: 5, samples: [] },
      { sampleSeconds: 60, samples: [] },
    ]).sampleSeconds,
  ).toBe(60);
});
