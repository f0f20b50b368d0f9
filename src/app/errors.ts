/**
 * The one error shape of the API, `{ "error": { "code", "message" } }`, and the one mapping from
 * library errors (QueueError codes) to HTTP statuses.
 */
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { QueueError, type QueueErrorCode } from "../core/errors.js";
import { ConfigError } from "./env.js";

/** An error the app raises itself, with its status and stable code. */
export class HttpError extends Error {
  readonly status: ContentfulStatusCode;
  readonly code: string;
  readonly headers: Record<string, string>;
  constructor(status: ContentfulStatusCode, code: string, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = "HttpError";
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

/** 400 INVALID_ARGUMENT naming `field`, as the library's own argument errors do. */
export const badRequest = (field: string, problem: string) =>
  new HttpError(400, "INVALID_ARGUMENT", `${field}: ${problem}`);

export const notFound = (message: string) => new HttpError(404, "NOT_FOUND", message);

const STATUS: Record<QueueErrorCode, ContentfulStatusCode> = {
  INVALID_ARGUMENT: 400,
  LEASE_NOT_FOUND: 404,
  LEASE_LOST: 409,
  IDEMPOTENCY_CONFLICT: 409,
  BUSY: 503,
  UNAVAILABLE: 503,
  TIMEOUT: 503,
  CLOSED: 503,
  // The database refused *our* credentials (TURSO_AUTH_TOKEN): a bad gateway, not the caller's fault.
  UNAUTHORIZED: 502,
  DATABASE: 500,
};

/** Library field names (camelCase) as the HTTP API spells them. */
const FIELD_NAMES: Record<string, string> = {
  lease: "lease_id",
  n: "max",
  idempotencyKey: "Idempotency-Key",
  workerId: "worker_id",
  minPriority: "min_priority",
  groupId: "group_id",
  afterSeq: "after_seq",
};

/** Translates the library's names (`messages[3].groupId`) to the API's (`messages[3].group_id`). */
export function httpField(field: string): string {
  return field.replace(/[A-Za-z]+/g, (w) => FIELD_NAMES[w] ?? w);
}

export function errorBody(code: string, message: string) {
  return { error: { code, message } };
}

/** Config errors are parsed once per bindings object: log each once, not per request. */
const logged = new WeakSet<ConfigError>();

/** The app's `onError`: every failure becomes the JSON error shape; only real faults are 5xx. */
export function handleError(err: unknown, c: Context): Response {
  if (err instanceof HttpError) {
    return c.json(errorBody(err.code, err.message), err.status, err.headers);
  }
  if (err instanceof ConfigError) {
    if (!logged.has(err)) {
      logged.add(err);
      console.error(err.message);
    }
    return c.json(errorBody("NOT_CONFIGURED", err.message), 503);
  }
  if (err instanceof QueueError) {
    const status = STATUS[err.code] ?? 500;
    let message = err.message;
    if (err.field !== undefined && message.startsWith(`${err.field}:`)) {
      message = `${httpField(err.field)}${message.slice(err.field.length)}`;
    }
    if (status >= 500) console.error(`queue error ${err.code}: ${err.message}`);
    if (err.code === "DATABASE") message = "the database reported an error";
    else if (err.code === "TIMEOUT" && err.outcomeUnknown) {
      message = `${message} (a write may have been applied; a publish is safe to retry with the same Idempotency-Key)`;
    }
    const headers: Record<string, string> = status === 503 ? { "Retry-After": "1" } : {};
    const code = err.code === "UNAUTHORIZED" ? "DATABASE_UNAUTHORIZED" : err.code;
    return c.json(errorBody(code, message), status, headers);
  }
  console.error("unexpected error", err);
  return c.json(errorBody("INTERNAL", "internal error"), 500);
}
