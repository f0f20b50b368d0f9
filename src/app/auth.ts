/** Bearer authentication for `/v1`: constant-time comparison against QUEUE_TOKEN; never open. */
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "./app.js";
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
  if (!m || !(await sameSecret(m[1] as string, parsed.config.queueToken))) {
    throw new HttpError(401, "UNAUTHORIZED", "Authorization: invalid bearer token", challenge);
  }
  c.set("config", parsed.config);
  await next();
};

/**
 * Compares two secrets in time independent of where they differ and of their lengths: both are
 * hashed to 32 bytes first, then every byte is compared.
 */
export async function sameSecret(given: string, expected: string): Promise<boolean> {
  const enc = new TextEncoder();
  const [a, b] = await Promise.all([
    crypto.subtle.digest("SHA-256", enc.encode(given)),
    crypto.subtle.digest("SHA-256", enc.encode(expected)),
  ]);
  const x = new Uint8Array(a);
  const y = new Uint8Array(b);
  let diff = 0;
  for (let i = 0; i < x.length; i++) diff |= (x[i] as number) ^ (y[i] as number);
  return diff === 0;
}
