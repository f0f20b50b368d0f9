/**
 * One error class for everything the queue reports, with a stable `code`, and one function
 * (`toQueueError`) that maps every lower-level failure (driver, network, timeout) into it.
 */

export type QueueErrorCode =
  /** An argument was refused before any SQL ran; `field` names it. */
  | "INVALID_ARGUMENT"
  /** The lease was re-claimed by another worker (it lapsed) or released; the call changed nothing. */
  | "LEASE_LOST"
  /** The leased message no longer exists (acked, dead-lettered or deleted by someone else). */
  | "LEASE_NOT_FOUND"
  /** No dead letter has that seq (redriven, deleted, or never there). */
  | "DEAD_LETTER_NOT_FOUND"
  /** No queue has that name (see the catalog of named queues). */
  | "QUEUE_NOT_FOUND"
  /** The queue still holds messages or dead letters: deleting it would drop them (unless forced). */
  | "QUEUE_NOT_EMPTY"
  /** An idempotency key was reused for a different request. */
  | "IDEMPOTENCY_CONFLICT"
  /** The database stayed locked (SQLITE_BUSY) through every retry. Nothing was applied. */
  | "BUSY"
  /** The call did not finish within its deadline. A write may or may not have been applied. */
  | "TIMEOUT"
  /** The database could not be reached (connection refused, reset, DNS, 5xx). */
  | "UNAVAILABLE"
  /** The database refused the credentials (HTTP 401/403, bad JWT). */
  | "UNAUTHORIZED"
  /** The transport was closed. */
  | "CLOSED"
  /** Any other error the database reported. */
  | "DATABASE";

/** `C`: the codes a subclass may carry (the HTTP client's QueueHttpError adds the API's own). */
export class QueueError<C extends string = QueueErrorCode> extends Error {
  readonly code: C;
  /** For INVALID_ARGUMENT: the offending field, e.g. `"groupId"` or `"messages[3].event"`. */
  readonly field: string | undefined;
  /**
   * True when a write may have been applied although the call failed (a response that never came).
   * The library retries such writes itself only when that is safe (idempotent or keyed).
   */
  readonly outcomeUnknown: boolean;

  constructor(code: C, message: string, opts: { field?: string; cause?: unknown; outcomeUnknown?: boolean } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "QueueError";
    this.code = code;
    this.field = opts.field;
    this.outcomeUnknown = opts.outcomeUnknown ?? false;
  }
}

/**
 * Whether the library's own retry loops try the call again (until its deadline): a busy database, a
 * timeout, an outage; not a database that does not exist (HTTP 404), which no retry brings back.
 */
export function retryable(e: QueueError): boolean {
  if (e.code === "BUSY" || e.code === "TIMEOUT") return true;
  return e.code === "UNAVAILABLE" && statusOf(errorChain(e.cause)) !== 404;
}

const statusOf = (chain: unknown[]) =>
  chain.map((c) => (c as { status?: unknown }).status).find((s): s is number => typeof s === "number");

export const noDeadLetter = (seq: number): QueueError =>
  new QueueError("DEAD_LETTER_NOT_FOUND", `seq: no dead letter ${seq}`, { field: "seq" });

export const invalid = (field: string, problem: string): QueueError =>
  new QueueError("INVALID_ARGUMENT", `${field}: ${problem}`, { field });

const BUSY_RE = /SQLITE_BUSY|database is locked|database table is locked/i;
const AUTH_RE = /\b(401|403)\b|unauthori[sz]ed|forbidden|auth/i;

function errorChain(e: unknown): unknown[] {
  const out: unknown[] = [];
  let cur: unknown = e;
  while (cur !== undefined && cur !== null && out.length < 8) {
    out.push(cur);
    cur = (cur as { cause?: unknown }).cause;
  }
  return out;
}

function codeOf(e: unknown): string | undefined {
  const code = (e as { code?: unknown }).code;
  return typeof code === "string" ? code : undefined;
}

/** True when the request provably never reached the server, so nothing can have been applied. */
function neverSent(chain: unknown[]): boolean {
  return chain.some((c) => {
    const code = codeOf(c);
    return code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN";
  });
}

/** Maps any failure of a database call into a QueueError. Keeps the original as `cause`. */
export function toQueueError(e: unknown): QueueError {
  if (e instanceof QueueError) return e;
  const chain = errorChain(e);
  const text = chain.map((c) => (c instanceof Error ? `${c.name} ${c.message}` : String(c))).join(" | ");
  const codes = chain.map(codeOf);
  const message = e instanceof Error ? e.message : String(e);

  if (codes.includes("SQLITE_BUSY") || codes.includes("SQLITE_LOCKED") || BUSY_RE.test(text)) {
    return new QueueError("BUSY", `database is locked: ${message}`, { cause: e });
  }
  if (chain.some((c) => c instanceof Error && (c.name === "TimeoutError" || c.name === "AbortError"))) {
    return new QueueError("TIMEOUT", `request timed out: ${message}`, { cause: e, outcomeUnknown: true });
  }
  const status = statusOf(chain);
  if (status === 404) {
    // What a namespace or database that is not there answers (an older sqld's 404 for the Hrana 3
    // path is handled before it gets here).
    return new QueueError("UNAVAILABLE", `the database does not exist (HTTP 404): ${message}`, { cause: e });
  }
  if (status === 401 || status === 403 || (codes.includes("SERVER_ERROR") && AUTH_RE.test(text))) {
    return new QueueError("UNAUTHORIZED", `the database refused the credentials: ${message}`, { cause: e });
  }
  if (codes.includes("CLIENT_CLOSED")) {
    return new QueueError("CLOSED", "the transport is closed", { cause: e });
  }
  const network =
    codes.some(
      (c) =>
        c !== undefined &&
        /^(ECONN|EPIPE|ETIMEDOUT|ENOTFOUND|EAI_|UND_ERR|HRANA_(CLOSED|WEBSOCKET|PROTO)|SERVER_ERROR|STREAM_EXPIRED)/.test(
          c,
        ),
    ) ||
    (e instanceof TypeError && /fetch|network|socket|terminated/i.test(text)) ||
    /fetch failed|socket hang up|other side closed|terminated|network connection was lost/i.test(text);
  if (network) {
    return new QueueError("UNAVAILABLE", `the database could not be reached: ${message}`, {
      cause: e,
      outcomeUnknown: !neverSent(chain),
    });
  }
  return new QueueError("DATABASE", message, { cause: e });
}
