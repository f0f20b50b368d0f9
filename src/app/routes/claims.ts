/** Claiming: one lease (or 204), or with `max` up to that many leases in distinct groups. */
import { Hono } from "hono";
import { MAX_CLAIM_BATCH } from "../../core/transport.js";
import { checkCount, checkPositiveSeconds, checkPriority, checkWorkerId } from "../../core/validate.js";
import type { AppEnv } from "../app.js";
import { type JsonObject, onlyFields, readJsonObject } from "../body.js";
import { leaseJson, methodNotAllowed, required } from "./common.js";

export const claims = new Hono<AppEnv>();

claims.post("/claims", async (c) => {
  const body = (await readJsonObject(c, true)) as JsonObject;
  onlyFields(body, ["worker_id", "visibility", "min_priority", "max"]);
  const workerId = checkWorkerId("worker_id", required(body, "worker_id"));
  const visibility = checkPositiveSeconds("visibility", required(body, "visibility"));
  const minPriority = body.min_priority === undefined ? 0 : checkPriority("min_priority", body.min_priority);
  const queue = await c.var.queue();
  if (body.max === undefined) {
    const lease = await queue.claim(workerId, visibility, minPriority);
    return lease ? c.json(leaseJson(lease), 200) : c.body(null, 204);
  }
  const max = checkCount("max", body.max, MAX_CLAIM_BATCH);
  const got = await queue.claimMany(workerId, visibility, max, minPriority);
  return c.json({ leases: got.map(leaseJson) }, 200);
});
claims.all("/claims", methodNotAllowed("POST"));
