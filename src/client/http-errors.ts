/**
 * The HTTP client's one error class, and the one place that turns an answer or a failed request
 * into it.
 *
 * `QueueHttpError` is a `QueueError` (so `instanceof QueueError`, consume()'s fencing checks and a
 * single `catch` work for the library and the client alike) whose `code` is the API's error code
 * (src/contract/schemas.ts, ERRORS), plus the HTTP `status` of the answer.
 */
import type { ErrorCode } from "../contract/types.js";
import { retryAfterMs } from "../core/backoff.js";
import { QueueError } from "../core/errors.js";

/** Every code the API answers with (a superset of the library's `QueueErrorCode`). */
export type HttpErrorCode = ErrorCode;

export interface HttpErrorOptions {
  /** The HTTP status of the answer; absent when no answer came (network failure, timeout, refused before sending). */
  status?: number;
  field?: string;
  cause?: unknown;
  outcomeUnknown?: boolean;
}

export class QueueHttpError extends QueueError<HttpErrorCode> {
  /** The answer's HTTP status; undefined when no answer came (network, timeout, bad argument caught before sending). */
  readonly status: number | undefined;

  constructor(code: HttpErrorCode, message: string, opts: HttpErrorOptions = {}) {
    super(code, message, opts);
    this.name = "QueueHttpError";
    this.status = opts.status;
  }
}

/** An argument refused before any request was sent, named as the API names it. */
export const invalidArgument = (field: string, problem: string) =>
  new QueueHttpError("INVALID_ARGUMENT", `${field}: ${problem}`, { field });

/**
 * What became of one attempt, before the call decides whether to try again. The API's own answers
 * say by their code (src/contract/errors.ts); an answer that is not the API's JSON says by its
 * status alone: a 5xx from something in front of the API (a gateway, a load balancer, a Worker's
 * runtime) is an outage whose outcome is unknown, never a bug of the API.
 */
export interface Failure {
  error: QueueHttpError;
  /** Nothing was applied (BUSY, CLOSED, 429, refused connection): any call may be sent again. */
  notApplied: boolean;
  /** The request may have been applied (no answer, UNAVAILABLE, TIMEOUT, a 5xx not the API's): sent again only where safe. */
  unknown: boolean;
  /** The server's Retry-After, in ms. */
  retryAfterMs: number | undefined;
}

/**
 * Codes of a fallback for answers that are not the API's JSON errors, by status alone: a bare 404
 * is a missing route (NOT_FOUND) whatever was asked for; the resources' own 404s (LEASE_NOT_FOUND,
 * DEAD_LETTER_NOT_FOUND) come only in the API's answers, which name them.
 */
const CODE_OF_STATUS: Record<number, HttpErrorCode> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  405: "METHOD_NOT_ALLOWED",
  409: "IDEMPOTENCY_CONFLICT",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
  429: "BUSY",
};

/** A 4xx message starts with the field at fault: `messages[3].priority: must be ...`, `"prority": unknown field`. */
const FIELD = /^([^\s:]+|"[^"]*"|[^\s:]*\."[^"]*"): /;

/** The failure an error answer (status >= 400) stands for. */
export function failureOfAnswer(status: number, text: string, retryAfter: string | null, what: string): Failure {
  let code: string | undefined;
  let message: string | undefined;
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (typeof body?.error?.code === "string") code = body.error.code;
    if (typeof body?.error?.message === "string") message = body.error.message;
  } catch {
    // Not the API's JSON: a gateway, a proxy, or another server.
  }
  const ours = code !== undefined;
  const known: HttpErrorCode =
    (code as HttpErrorCode | undefined) ??
    CODE_OF_STATUS[status] ??
    (status >= 500 ? "UNAVAILABLE" : "INVALID_ARGUMENT");
  const text1 = message ?? `${what}: HTTP ${status}${text ? ` ${text.slice(0, 200)}` : ""}`;
  const field = status < 500 && message !== undefined ? FIELD.exec(message)?.[1] : undefined;
  // BLOCKED, DATABASE and INTERNAL are answered as they are: sending them again would meet them again.
  const unknown = status >= 500 && (ours ? known === "UNAVAILABLE" || known === "TIMEOUT" : true);
  const notApplied = status === 429 || (status === 503 && (known === "BUSY" || known === "CLOSED"));
  return {
    error: new QueueHttpError(known, text1, { status, field, outcomeUnknown: unknown }),
    notApplied,
    unknown,
    retryAfterMs: retryAfterMs(retryAfter),
  };
}

/** The failure a request that got no answer stands for (fetch rejected). */
export function failureOfNetwork(e: unknown, what: string): Failure {
  const refused = causes(e).some((c) => {
    const code = (c as { code?: unknown }).code;
    return code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN";
  });
  const detail = causes(e)
    .map((c) => (c instanceof Error ? c.message : String(c)))
    .filter(Boolean)
    .join(": ");
  return {
    error: new QueueHttpError("UNAVAILABLE", `${what}: the API could not be reached (${detail})`, {
      cause: e,
      outcomeUnknown: !refused,
    }),
    notApplied: refused,
    unknown: !refused,
    retryAfterMs: undefined,
  };
}

function causes(e: unknown): unknown[] {
  const out: unknown[] = [];
  for (let c = e; c !== undefined && c !== null && out.length < 6; c = (c as { cause?: unknown }).cause) out.push(c);
  return out;
}

/** The same error with `outcomeUnknown` set: an earlier attempt of the call may have applied. */
export function withUnknownOutcome(e: QueueHttpError, note?: string): QueueHttpError {
  if (e.outcomeUnknown && note === undefined) return e;
  return new QueueHttpError(e.code, note ? `${e.message} (${note})` : e.message, {
    status: e.status,
    field: e.field,
    cause: e.cause,
    outcomeUnknown: true,
  });
}
