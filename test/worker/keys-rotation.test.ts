/**
 * A push subscription's signing secret rotated without a moment where deliveries fail to verify:
 * through the real QueueWriter inside workerd, to a consumer on 127.0.0.1. While the rotation is under
 * way each delivery carries a signature for each secret; once finished, only the new one's.
 */
import { afterEach, beforeEach, expect, inject, it } from "vitest";
import { verifySignature } from "../../src/contract/signature.js";
import type * as T from "../../src/contract/types.js";
import { waitFor } from "../support/wait.js";
import { api, post, resetDatabase } from "./support.js";

beforeEach(resetDatabase);
afterEach(async () => {
  await api("/v1/subscriptions/rotating", { method: "DELETE" });
});

const path = `/rotating/${Date.now()}`;
const received = async () => {
  const r = await fetch(`${inject("consumerLogUrl")}/?path=${encodeURIComponent(path)}`);
  return (await r.json()) as Array<{ raw: string; signature: string }>;
};
const put = (extra: Record<string, unknown> = {}) =>
  api<T.SubscriptionAnswer>("/v1/subscriptions/rotating", {
    method: "PUT",
    json: { url: `${inject("consumerUrl")}${path}`, ...extra },
  });
/** Publishes one message and answers its delivery, once it arrived. */
async function delivered(n: number) {
  await post("/v1/groups/g/messages", { event: n });
  return waitFor(async () => (await received()).find((r) => JSON.parse(r.raw).event === n), {
    what: `delivery ${n}`,
  });
}

it("start: deliveries verify with the old secret and the new; finish: with the new one only", async () => {
  const made = await put();
  const old = made.body.signing_secret;
  expect(made.body.next_signing_secret).toBeNull();

  const started = await put({ rotate_secret: "start" });
  expect(started.body.signing_secret).toBe(old);
  const next = started.body.next_signing_secret as string;
  expect(next).toMatch(/^[0-9a-f]{64}$/);
  // Starting again (a retried PUT) keeps the same next secret.
  expect((await put({ rotate_secret: "start" })).body.next_signing_secret).toBe(next);
  // An update that says nothing of secrets keeps the rotation going.
  expect((await put({ max_in_flight: 5 })).body.next_signing_secret).toBe(next);

  const during = await delivered(1);
  expect(during.signature).toMatch(/^t=[0-9]+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
  expect(await verifySignature(old, during.signature, during.raw)).toBe(true);
  expect(await verifySignature(next, during.signature, during.raw)).toBe(true);

  const finished = await put({ rotate_secret: "finish" });
  expect(finished.body).toMatchObject({ signing_secret: next, next_signing_secret: null });
  const after = await delivered(2);
  expect(await verifySignature(next, after.signature, after.raw)).toBe(true);
  expect(await verifySignature(old, after.signature, after.raw)).toBe(false);
});

it("rotate_secret with a secret of one's own is a 400 naming it", async () => {
  await put();
  const res = await put({ rotate_secret: "start", signing_secret: "s".repeat(32) });
  expect(res.status).toBe(400);
  expect(res.text).toContain("rotate_secret: cannot be given with signing_secret");
  expect((await put({ rotate_secret: "later" })).status).toBe(400);
});
