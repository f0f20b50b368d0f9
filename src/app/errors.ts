/**
 * The one error shape of the API, `{ "error": { "code", "message" } }`, and the one mapping of every
 * failure into it: our own HttpErrors, any other Hono HTTPException, configuration errors and the
 * library's QueueErrors (statuses from the contract's ERRORS table).
 */
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ERRORS, type ErrorCode } from "../contract/schemas.js";
import { QueueError, RETRYABLE_CODES } from "../core/errors.js";
import { ConfigError } from "./env.js";

/** An error the app raises itself: a Hono HTTPException with a stable code and extra headers. */
export class HttpError extends HTTPException {
  readonly code: ErrorCode;
  readonly headers: Record<string, string>;
  constructor(status: ContentfulStatusCode, code: ErrorCode, message: string, headers: Record<string, string> = {}) {
    super(status, { message });
    this.name = "HttpError";
    this.code = code;
    this.headers = headers;
  }
}

/** 400 INVALID_ARGUMENT naming `field`, as the library's own argument errors do. */
export const badRequest = (field: string, problem: string) =>
  new HttpError(400, "INVALID_ARGUMENT", `${field}: ${problem}`);

export const notFound = (message: string) => new HttpError(404, "NOT_FOUND", message);

/**
 * The library's field names that can still reach an answer once the schemas ran: a lease's fate
 * (LEASE_LOST, LEASE_NOT_FOUND) names `lease`, an IDEMPOTENCY_CONFLICT names `idempotencyKey`.
 * Events keep their name (`event`, `messages[3].event`).
 */
const FIELD_NAMES: Record<string, string> = { lease: "lease_id", idempotencyKey: "Idempotency-Key" };

export function errorBody(code: ErrorCode, message: string) {
  return { error: { code, message } };
}

/** Codes for an HTTPException thrown by Hono or one of its middlewares. */
const CODE_OF_STATUS: Partial<Record<number, ErrorCode>> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHORIZED",
  404: "NOT_FOUND",
  405: "METHOD_NOT_ALLOWED",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
  429: "BUSY",
};

/** Config errors are parsed once per bindings object: log each once, not per request. */
const logged = new WeakSet<ConfigError>();

/** The app's `onError`: every failure becomes the JSON error shape; only real faults are 5xx. */
export function handleError(err: unknown, c: Context): Response {
  if (err instanceof HttpError) {
    return c.json(errorBody(err.code, err.message), err.status as ContentfulStatusCode, err.headers);
  }
  if (err instanceof HTTPException) {
    // Raised by Hono itself or a middleware: keep its status and headers, give it our shape.
    const status = (err.status >= 400 ? err.status : 500) as ContentfulStatusCode;
    const code = CODE_OF_STATUS[status] ?? (status >= 500 ? "INTERNAL" : "INVALID_ARGUMENT");
    const headers: Record<string, string> = {};
    err.res?.headers.forEach((value, key) => {
      if (key !== "content-type" && key !== "content-length") headers[key] = value;
    });
    if (status >= 500) console.error("HTTP exception", err);
    return c.json(errorBody(code, err.message || `HTTP ${status}`), status, headers);
  }
  if (err instanceof ConfigError) {
    if (!logged.has(err)) {
      logged.add(err);
      console.error(err.message);
    }
    return c.json(errorBody("NOT_CONFIGURED", err.message), 503);
  }
  if (err instanceof QueueError) {
    // A code the contract does not list yet (a newer library) is a 500 DATABASE, never a crash.
    const named = err.code === "UNAUTHORIZED" ? "DATABASE_UNAUTHORIZED" : err.code;
    const code: ErrorCode = Object.hasOwn(ERRORS, named) ? (named as ErrorCode) : "DATABASE";
    const status = ERRORS[code][0] as ContentfulStatusCode;
    let message = err.message;
    const field = err.field;
    if (field !== undefined && message.startsWith(`${field}:`)) {
      message = `${field.replace(/^[A-Za-z]+/, (w) => FIELD_NAMES[w] ?? w)}${message.slice(field.length)}`;
    }
    if (status >= 500) console.error(`queue error ${err.code}: ${err.message}`);
    if (err.code === "DATABASE") message = "the database reported an error";
    else if (err.code === "TIMEOUT" && err.outcomeUnknown) {
      message = `${message} (a write may have been applied; a publish is safe to retry with the same Idempotency-Key)`;
    }
    return c.json(errorBody(code, message), status, retryAfterOf(err, code));
  }
  console.error("unexpected error", err);
  return c.json(errorBody("INTERNAL", "internal error"), 500);
}

/**
 * `Retry-After` for a failure that a later attempt may not meet: what the database asked for when
 * it said (in whole seconds), else 1. None for BLOCKED: retrying will not help until it is lifted.
 */
function retryAfterOf(err: QueueError, code: ErrorCode): Record<string, string> {
  if (!RETRYABLE_CODES.has(code) && code !== "CLOSED") return {};
  const seconds = err.retryAfterMs === undefined ? 1 : Math.max(1, Math.ceil(err.retryAfterMs / 1000));
  return { "Retry-After": String(seconds) };
}
