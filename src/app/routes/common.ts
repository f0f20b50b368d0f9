/** Small helpers shared by the route modules. */
import type { Context, Handler } from "hono";
import type { Lease } from "../../core/transport.js";
import { checkId } from "../../core/validate.js";
import type { AppEnv } from "../app.js";
import type { JsonObject } from "../body.js";
import { badRequest, HttpError } from "../errors.js";

/** The field must be present (JSON null counts as present; the checker decides). */
export function required(body: JsonObject, field: string, prefix = ""): unknown {
  if (!Object.hasOwn(body, field)) throw badRequest(`${prefix}${field}`, "is required");
  return body[field];
}

/** The `Idempotency-Key` header, when sent. */
export function idempotencyKey(c: Context<AppEnv>): { idempotencyKey?: string } {
  const key = c.req.header("idempotency-key");
  return key === undefined ? {} : { idempotencyKey: checkId("Idempotency-Key", key) };
}

/** A positive integer path or query parameter (a seq). */
export function parseSeq(field: string, raw: string | undefined): number {
  if (raw === undefined || !/^[1-9][0-9]{0,15}$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw badRequest(field, "must be a positive integer");
  }
  return Number(raw);
}

export function leaseJson(l: Lease) {
  return {
    lease_id: l.id,
    seq: l.seq,
    group_id: l.groupId,
    event: l.event,
    expires_at: l.expiresAt,
    attempts: l.attempts,
  };
}

/** For a known path asked with another method. */
export const methodNotAllowed =
  (...allowed: string[]): Handler<AppEnv> =>
  (c) => {
    throw new HttpError(405, "METHOD_NOT_ALLOWED", `${c.req.method} is not allowed here (use ${allowed.join(", ")})`, {
      Allow: allowed.join(", "),
    });
  };
