/**
 * A lease's life: ack (done), nack (give back, optionally parked), release (give back unspent),
 * extend (heartbeat); and settle, many acks, nacks and releases in one request.
 */
import { Hono } from "hono";
import {
  ExtendAnswer,
  ExtendBody,
  LeasePath,
  NackBody,
  NoBody,
  SettleAnswer,
  SettleBody,
} from "../../contract/schemas.js";
import type * as T from "../../contract/types.js";
import { extendToWire, settlementFromWire, settleOutcomeToWire } from "../../contract/wire.js";
import type { Lease, Settlement, SettleOutcome } from "../../core/types.js";
import { DEFAULT_MAX_ATTEMPTS, MAX_SETTLE_BATCH } from "../../rules.js";
import type { AppEnv, ServedQueue } from "../context.js";
import { defineRoute, handle } from "../route.js";

const fenced =
  "A lease that lapsed and was claimed again (or was released) is fenced off: 409 LEASE_LOST, nothing changes.";

export const ack = defineRoute({
  method: "post",
  path: "/v1/leases/{lease_id}/ack",
  operationId: "ack",
  tag: "Consume",
  summary: "Ack: the message is done",
  description: `Deletes the message; its group moves on to the next one. ${fenced}`,
  scope: "consume",
  request: { params: LeasePath, body: { schema: NoBody, required: false } },
  responses: { 204: { description: "Done." } },
  errors: ["LEASE_LOST", "LEASE_NOT_FOUND"],
});

export const nack = defineRoute({
  method: "post",
  path: "/v1/leases/{lease_id}/nack",
  operationId: "nack",
  tag: "Consume",
  summary: "Nack: give the message back, now or after a delay",
  description: `Frees the message for a new delivery, or with \`delay\` > 0 parks it (blocking its group) that long. The nack of its last attempt (the ${DEFAULT_MAX_ATTEMPTS}th delivery) moves it to the dead letters. ${fenced}`,
  scope: "consume",
  request: { params: LeasePath, body: { schema: NackBody, required: false, example: { delay: 10 } } },
  responses: {
    204: {
      description: "Given back.",
      headers: {
        "Dead-Lettered": {
          description: "`true` when this was its last attempt and it moved to the dead letters.",
          type: "boolean",
        },
      },
    },
  },
  errors: ["LEASE_LOST", "LEASE_NOT_FOUND"],
});

export const release = defineRoute({
  method: "post",
  path: "/v1/leases/{lease_id}/release",
  operationId: "release",
  tag: "Consume",
  summary: "Release: give the message back unhandled",
  description: `The message is claimable again at once, and this delivery is not counted among its attempts: for a consumer that is stopping, or took more than it will handle. (A nack counts the attempt.) ${fenced}`,
  scope: "consume",
  request: { params: LeasePath, body: { schema: NoBody, required: false } },
  responses: { 204: { description: "Given back." } },
  errors: ["LEASE_LOST", "LEASE_NOT_FOUND"],
});

export const settle = defineRoute({
  method: "post",
  path: "/v1/settlements",
  operationId: "settle",
  tag: "Consume",
  summary: "Settle many leases at once: acks, nacks and releases",
  description: `Up to ${MAX_SETTLE_BATCH} leases in one request (a consumer that stops gives back everything it holds at once), sent to the database together. Each is fenced as on its own route and has its own outcome in the answer, in the order sent: a lease that fails never fails the others. When none of them could reach the database (it is down, or the call timed out), the request fails as a whole, as any route does.`,
  scope: "consume",
  request: {
    body: {
      schema: SettleBody,
      required: true,
      example: {
        leases: [
          { lease_id: "1.e60920e7c2e2f9e880bfec5577612017", action: "ack" },
          { lease_id: "2.0f1e2d3c4b5a69788796a5b4c3d2e1f0", action: "nack", delay: 10 },
          { lease_id: "3.aa3c5e7b9d1f2a4c6e8b0d2f4a6c8e0b", action: "release" },
        ],
      },
    },
  },
  responses: {
    200: {
      description: "Each lease's outcome.",
      schema: SettleAnswer,
      example: {
        outcomes: [
          { lease_id: "1.e60920e7c2e2f9e880bfec5577612017", action: "ack" },
          { lease_id: "2.0f1e2d3c4b5a69788796a5b4c3d2e1f0", action: "nack", dead_lettered: false },
          {
            lease_id: "3.aa3c5e7b9d1f2a4c6e8b0d2f4a6c8e0b",
            action: "release",
            error: {
              code: "LEASE_LOST",
              message:
                "lease: message 3 is no longer leased by this lease (it lapsed and was claimed again, or was released)",
            },
          },
        ],
      },
    },
  },
});

export const extend = defineRoute({
  method: "post",
  path: "/v1/leases/{lease_id}/extend",
  operationId: "extend",
  tag: "Consume",
  summary: "Extend a lease (heartbeat)",
  description: `The lease now expires \`visibility\` seconds from now. ${fenced}`,
  scope: "consume",
  request: { params: LeasePath, body: { schema: ExtendBody, required: true, example: { visibility: 30 } } },
  responses: {
    200: {
      description: "The new deadline.",
      schema: ExtendAnswer,
      example: { lease_id: "1.e60920e7c2e2f9e880bfec5577612017", expires_at: 1796230594.2 },
    },
  },
  errors: ["LEASE_LOST", "LEASE_NOT_FOUND"],
});

export const leases = new Hono<AppEnv>();

handle(leases, ack, async (c) => {
  await (await c.var.queue()).ack(c.req.valid("param").lease_id);
  return c.body(null, 204);
});

handle(leases, nack, async (c) => {
  const { lease_id } = c.req.valid("param");
  const { deadLettered } = await (await c.var.queue()).nack(lease_id, c.req.valid("json").delay ?? 0);
  return c.body(null, 204, { "Dead-Lettered": String(deadLettered) });
});

handle(leases, release, async (c) => {
  await (await c.var.queue()).release(c.req.valid("param").lease_id);
  return c.body(null, 204);
});

handle(leases, settle, async (c) => {
  const outcomes = await settleAll(await c.var.queue(), c.req.valid("json").leases.map(settlementFromWire));
  return c.json({ outcomes: outcomes.map(settleOutcomeToWire) } satisfies T.SettleAnswer, 200);
});

/** The outcomes; or, when not one lease got an answer of its own from the database, the error they met. */
async function settleAll(queue: ServedQueue, settlements: Settlement[]): Promise<SettleOutcome[]> {
  const outcomes = await queue.settle(settlements);
  const [first] = outcomes;
  const leaseAnswer = (o: SettleOutcome) =>
    o.error === undefined || o.error.code === "LEASE_LOST" || o.error.code === "LEASE_NOT_FOUND";
  if (first?.error !== undefined && !outcomes.some(leaseAnswer)) throw first.error;
  return outcomes;
}

handle(leases, extend, async (c) => {
  const { lease_id } = c.req.valid("param");
  // extend() only reads the lease's id; the HTTP API holds nothing else of it.
  const extended = await (await c.var.queue()).extend({ id: lease_id } as Lease, c.req.valid("json").visibility);
  return c.json(extendToWire(extended) satisfies T.ExtendAnswer, 200);
});
