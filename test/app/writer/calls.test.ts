/** A writer's errors (src/app/writer/calls.ts): answered as values by the writer, thrown again at the edge as they were. */
import { expect, it } from "vitest";
import { outcome, unwrap } from "../../../src/app/writer/calls.js";
import { QueueError } from "../../../src/core/errors.js";

it("carries a QueueError's code, message, field and outcomeUnknown across, and a value as it is", async () => {
  const failed = await outcome(async () => {
    throw new QueueError("LEASE_LOST", "lease: taken over", { field: "lease", outcomeUnknown: true });
  });
  // What RPC carries: plain data only.
  expect(JSON.parse(JSON.stringify(failed))).toEqual(failed);
  let thrown: unknown;
  try {
    unwrap(failed);
  } catch (e) {
    thrown = e;
  }
  expect(thrown).toBeInstanceOf(QueueError);
  expect(thrown).toMatchObject({
    code: "LEASE_LOST",
    message: "lease: taken over",
    field: "lease",
    outcomeUnknown: true,
  });
  expect(unwrap(await outcome(async () => ({ leases: [] })))).toEqual({ leases: [] });
});

it("maps anything else the way the library does (toQueueError)", async () => {
  const failed = await outcome(async () => {
    throw new TypeError("boom");
  });
  expect("error" in failed && failed.error.code).toBeTruthy();
  expect(() => unwrap(failed)).toThrow(QueueError);
});
