/** A lease's life: ack (done), nack (give back, optionally parked), extend (heartbeat). */
import { Hono } from "hono";
import { ExtendAnswer, ExtendBody, LeasePath, NackBody, NoBody } from "../../contract/schemas.js";
import type * as T from "../../contract/types.js";
import type { Lease } from "../../core/transport.js";
import { extendAnswer } from "../answers.js";
import type { AppEnv } from "../app.js";
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
  auth: true,
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
  description: `Frees the message for a new delivery, or with \`delay\` > 0 parks it (blocking its group) that long. The delivery that used the last attempt (5) moves it to the dead letters. ${fenced}`,
  auth: true,
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

export const extend = defineRoute({
  method: "post",
  path: "/v1/leases/{lease_id}/extend",
  operationId: "extend",
  tag: "Consume",
  summary: "Extend a lease (heartbeat)",
  description: `The lease now expires \`visibility\` seconds from now. ${fenced}`,
  auth: true,
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

handle(leases, extend, async (c) => {
  const { lease_id } = c.req.valid("param");
  // extend() only reads the lease's id; the HTTP API holds nothing else of it.
  const extended = await (await c.var.queue()).extend({ id: lease_id } as Lease, c.req.valid("json").visibility);
  return c.json(extendAnswer(extended) satisfies T.ExtendAnswer, 200);
});
