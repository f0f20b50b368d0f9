/** Bearer authentication for `/v1`: constant-time comparison against QUEUE_TOKEN; never open. */
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "./context.js";
import { parseEnv } from "./env.js";
import { HttpError } from "./errors.js";

const BEARER = /^Bearer[ \t]+([!-~]+)[ \t]*$/i;

export const requireBearer: MiddlewareHandler<AppEnv> = async (c, next) => {
  const parsed = parseEnv(c.env);
  // Misconfigured (QUEUE_TOKEN unset, database URL missing): refuse everything, never run open.
  if (!parsed.ok) throw parsed.error;
  const header = c.req.header("authorization");
  const challenge = { "WWW-Authenticate": 'Bearer realm="turso-queue"' };
  if (header === undefined) {
    throw new HttpError(
      401,
      "UNAUTHORIZED",
      "Authorization: missing (send `Authorization: Bearer <QUEUE_TOKEN>`)",
      challenge,
    );
  }
  const m = BEARER.exec(header);
  if (!m || !sameSecret(m[1] as string, parsed.config.queueToken)) {
    throw new HttpError(401, "UNAUTHORIZED", "Authorization: invalid bearer token", challenge);
  }
  c.set("config", parsed.config);
  await next();
};

/**
 * Compares two secrets in time independent of where they differ and of the given one's length: every
 * character of `expected` is compared (with the given one's, cycled), and the lengths are folded in. Plain
 * JavaScript, synchronous: it runs on every request, where two Web Crypto digests cost more than the
 * rest of the bearer check (measured in workerd).
 */
export function sameSecret(given: string, expected: string): boolean {
  if (given.length === 0) return false;
  let diff = given.length ^ expected.length;
  for (let i = 0; i < expected.length; i++) diff |= given.charCodeAt(i % given.length) ^ expected.charCodeAt(i);
  return diff === 0;
}
