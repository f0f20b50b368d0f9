/** Every error code the API answers with, its status and when; and the one error body. */
import * as v from "valibot";
import { MAX_BODY_BYTES } from "../rules.js";

export const ERRORS = {
  INVALID_ARGUMENT: [
    400,
    "A field, path or query parameter, header or body refused (the message starts with its name); invalid JSON or UTF-8; an unknown field.",
  ],
  UNAUTHORIZED: [
    401,
    "A missing, malformed, unknown, forged, revoked or expired key or token (with `WWW-Authenticate: Bearer`).",
  ],
  FORBIDDEN: [
    403,
    'A valid key without the scope the route needs, or not for its queue: the message names the scope and the queue (with `WWW-Authenticate: Bearer error="insufficient_scope"`). Nothing changed.',
  ],
  NOT_FOUND: [404, "No such route, subscription or key."],
  LEASE_NOT_FOUND: [404, "The leased message is gone (acked or dead-lettered)."],
  DEAD_LETTER_NOT_FOUND: [404, "No dead letter with that seq (redriven, deleted, or never there)."],
  QUEUE_NOT_FOUND: [404, "No queue with that name (make it with `PUT /v1/queues/{queue}`)."],
  METHOD_NOT_ALLOWED: [405, "A known path asked with another method (with `Allow`)."],
  LEASE_LOST: [409, "The lease lapsed and the message was claimed again, or it was released: nothing changed."],
  IDEMPOTENCY_CONFLICT: [409, "The Idempotency-Key was used before for a different request; nothing was stored."],
  KEY_LIMIT: [409, "The deployment holds as many keys as it may (1,000): revoke some first."],
  QUEUE_NOT_EMPTY: [409, "The queue holds messages or dead letters: delete it with `force=true` to drop them."],
  PAYLOAD_TOO_LARGE: [
    413,
    `A body over ${MAX_BODY_BYTES / 1_048_576} MiB (checked on Content-Length and on the bytes read).`,
  ],
  UNSUPPORTED_MEDIA_TYPE: [415, "A body that is not `application/json` (or `+json`) in UTF-8."],
  INTERNAL: [500, "A fault of ours; never caused by input."],
  DATABASE: [500, "The database refused a statement of ours: a fault of ours, never an outage."],
  DATABASE_UNAUTHORIZED: [502, "The database refused TURSO_AUTH_TOKEN (our configuration, not the caller's fault)."],
  NOT_CONFIGURED: [503, "QUEUE_TOKEN or TURSO_DATABASE_URL missing or unusable (the message says which)."],
  BUSY: [503, "The database stayed locked; nothing was applied (with `Retry-After`)."],
  UNAVAILABLE: [
    503,
    "The database (or the queue's writer) could not be reached, or answered 5xx or 429; a write may have been applied: retry a publish with the same Idempotency-Key (with `Retry-After`).",
  ],
  BLOCKED: [
    503,
    "The database refuses operations (over its plan's quota, or blocked by its operator); nothing was applied, and retrying will not help until the block is lifted (no `Retry-After`).",
  ],
  TIMEOUT: [
    504,
    "The database did not answer in time; a write may have been applied: retry a publish with the same Idempotency-Key (with `Retry-After`).",
  ],
  CLOSED: [503, "The transport was closed (with `Retry-After`)."],
  SHARD_MISMATCH: [
    503,
    "A database of the queue is stored as another shard, or of another queue, than the configuration lists it as (QUEUE_DATABASES maps it elsewhere); nothing was done, and retrying will not help until the configuration is put right.",
  ],
} as const satisfies Record<string, readonly [number, string]>;

export type ErrorCode = keyof typeof ERRORS;

export const ErrorAnswer = v.object({
  error: v.object({
    code: v.pipe(v.picklist(Object.keys(ERRORS) as ErrorCode[]), v.description("Stable: branch on it.")),
    message: v.pipe(v.string(), v.description("For people. A 400's message starts with the field at fault.")),
  }),
});
