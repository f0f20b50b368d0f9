/** A lease's life: ack (done), nack (give back, optionally parked), extend (heartbeat). */
import { Hono } from "hono";
import { type Lease, leaseRef } from "../../core/transport.js";
import { checkDelay, checkPositiveSeconds } from "../../core/validate.js";
import type { AppEnv } from "../app.js";
import { type JsonObject, onlyFields, readJsonObject } from "../body.js";
import { methodNotAllowed, required } from "./common.js";

export const leases = new Hono<AppEnv>();

/** Validates the path's lease id (400 naming `lease_id`) before anything else is read. */
function leaseId(raw: string): string {
  leaseRef(raw);
  return raw;
}

leases.post("/leases/:leaseId/ack", async (c) => {
  const id = leaseId(c.req.param("leaseId"));
  const body = await readJsonObject(c, false);
  if (body) onlyFields(body, []);
  await (await c.var.queue()).ack(id);
  return c.body(null, 204);
});
leases.all("/leases/:leaseId/ack", methodNotAllowed("POST"));

leases.post("/leases/:leaseId/nack", async (c) => {
  const id = leaseId(c.req.param("leaseId"));
  const body = (await readJsonObject(c, false)) ?? {};
  onlyFields(body, ["delay"]);
  const delay = body.delay === undefined ? 0 : checkDelay("delay", body.delay);
  const { deadLettered } = await (await c.var.queue()).nack(id, delay);
  return c.body(null, 204, { "Dead-Lettered": String(deadLettered) });
});
leases.all("/leases/:leaseId/nack", methodNotAllowed("POST"));

leases.post("/leases/:leaseId/extend", async (c) => {
  const id = leaseId(c.req.param("leaseId"));
  const body = (await readJsonObject(c, true)) as JsonObject;
  onlyFields(body, ["visibility"]);
  const visibility = checkPositiveSeconds("visibility", required(body, "visibility"));
  // extend() only reads the lease's id; the HTTP API holds nothing else of it.
  const extended = await (await c.var.queue()).extend({ id } as Lease, visibility);
  return c.json({ lease_id: id, expires_at: extended.expiresAt }, 200);
});
leases.all("/leases/:leaseId/extend", methodNotAllowed("POST"));
