/**
 * One error class for everything the queue reports, with a stable `code`, and one function
 * (`toQueueError`) that maps every lower-level failure (driver, network, timeout, an HTTP status of
 * the database) into it, as Node's `fetch` and workerd's report them alike. docs/guarantees.md
 * lists each outage, its code, and whether it is retried.
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
  /** A deployment holds as many keys as it may (rules.ts KEYS.max): revoke some first. */
  | "KEY_LIMIT"
  /** An idempotency key was reused for a different request. */
  | "IDEMPOTENCY_CONFLICT"
  /** The database stayed locked (SQLITE_BUSY) through every retry. Nothing was applied. */
  | "BUSY"
  /** The call did not finish within its deadline. A write may or may not have been applied. */
  | "TIMEOUT"
  /**
   * The database could not be reached or did not answer (connection refused, reset or lost, DNS,
   * an HTTP 5xx or 429 from it). A write may have been applied unless `outcomeUnknown` is false.
   */
  | "UNAVAILABLE"
  /**
   * The database refused the operation as blocked (Turso: over its plan's quota; sqld: blocked by
   * its operator). Nothing was applied, and retrying will not help until the block is lifted.
   */
  | "BLOCKED"
  /** The database refused the credentials (HTTP 401/403, bad JWT). */
  | "UNAUTHORIZED"
  /** The transport was closed. */
  | "CLOSED"
  /**
   * A database is not the shard of its queue that it is listed as (the list in another order, one
   * more or fewer, or one database twice): nothing was done.
   */
  | "SHARD_MISMATCH"
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
  /** How long the database asked to be left alone (its `Retry-After`, in ms), when it said. */
  readonly retryAfterMs: number | undefined;

  constructor(
    code: C,
    message: string,
    opts: { field?: string; cause?: unknown; outcomeUnknown?: boolean; retryAfterMs?: number | undefined } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "QueueError";
    this.code = code;
    this.field = opts.field;
    this.outcomeUnknown = opts.outcomeUnknown ?? false;
    this.retryAfterMs = opts.retryAfterMs;
  }
}

/**
 * The codes of a failure that a later attempt may not meet: the write path and reads try again
 * until the call's deadline (a write whose outcome is unknown only if sending it again is safe),
 * and so does the HTTP client. BLOCKED, UNAUTHORIZED and the rest are answered at once.
 */
export const RETRYABLE_CODES: ReadonlySet<string> = new Set<QueueErrorCode>(["BUSY", "UNAVAILABLE", "TIMEOUT"]);

/** Whether a later attempt may succeed: a retryable code, and not a database that does not exist (HTTP 404). */
export const isRetryable = (e: QueueError<string>): boolean =>
  RETRYABLE_CODES.has(e.code) && !(e.code === "UNAVAILABLE" && statusOf(errorChain(e.cause)) === 404);

const statusOf = (chain: unknown[]) =>
  chain.map((c) => (c as { status?: unknown }).status).find((s): s is number => typeof s === "number");

// The errors about one message name its seq: each is built here, from the seq, so that a sharded
// queue can name its own seq instead of its shard's (`namingSeq`).

export const noDeadLetter = (seq: number): QueueError =>
  new QueueError("DEAD_LETTER_NOT_FOUND", `seq: no dead letter ${seq}`, { field: "seq" });

export const leaseLost = (seq: number): QueueError =>
  new QueueError(
    "LEASE_LOST",
    `lease: message ${seq} is no longer leased by this lease (it lapsed and was claimed again, or was released)`,
    { field: "lease" },
  );

export const leaseGone = (seq: number): QueueError =>
  new QueueError("LEASE_NOT_FOUND", `lease: message ${seq} no longer exists (acked or dead-lettered)`, {
    field: "lease",
  });

const ABOUT_A_SEQ: Readonly<Record<string, (seq: number) => QueueError>> = {
  DEAD_LETTER_NOT_FOUND: noDeadLetter,
  LEASE_LOST: leaseLost,
  LEASE_NOT_FOUND: leaseGone,
};

/** `e`, or, where it is about one message, the same error naming that message `seq` (a sharded queue's own). */
export function namingSeq(e: unknown, seq: number): unknown {
  const build = e instanceof QueueError ? ABOUT_A_SEQ[e.code] : undefined;
  if (build === undefined) return e;
  const q = e as QueueError;
  return new QueueError(q.code, build(seq).message, {
    field: build(seq).field,
    cause: q,
    outcomeUnknown: q.outcomeUnknown,
    retryAfterMs: q.retryAfterMs,
  });
}

export const idempotencyConflict = (): QueueError =>
  new QueueError("IDEMPOTENCY_CONFLICT", "idempotencyKey: this key was already used for a different request", {
    field: "idempotencyKey",
  });

export const closed = (o: { outcomeUnknown?: boolean; cause?: unknown } = {}): QueueError =>
  new QueueError("CLOSED", "the transport is closed", o);

export const invalid = (field: string, problem: string): QueueError =>
  new QueueError("INVALID_ARGUMENT", `${field}: ${problem}`, { field });

const BUSY_RE = /SQLITE_BUSY|database is locked|database table is locked/i;
const AUTH_RE = /\b(401|403)\b|unauthori[sz]ed|forbidden|auth/i;
/** sqld's and Turso's refusal of a blocked database (over quota, or blocked by its operator). */
const BLOCKED_RE = /\bOperation was blocked\b/i;
/** Codes of a connection that failed: Node's and undici's, the libSQL client's, sqld's. */
const NETWORK_CODE =
  /^(ECONN|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_|UND_ERR|HRANA_(CLOSED|WEBSOCKET|PROTO)|STREAM_EXPIRED|PROXY_ERROR)/;
/**
 * What a lost connection says: undici ("fetch failed", "other side closed", "terminated"), Node
 * ("socket hang up"), workerd ("Network connection lost."), Safari-like runtimes, an embedded
 * replica's sync ("error trying to connect: tcp connect error: Connection refused").
 */
const NETWORK_TEXT =
  /fetch failed|socket hang up|other side closed|terminated|network connection (was )?lost|connection reset|connection refused|error trying to connect|broken pipe/i;

function errorChain(e: unknown): unknown[] {
  const out: unknown[] = [];
  let cur: unknown = e;
  while (cur !== undefined && cur !== null && out.length < 8) {
    out.push(cur);
    cur = (cur as { cause?: unknown }).cause;
  }
  return out;
}

/** The first value of `key` along the chain that `is` accepts. */
function fieldOf<T>(chain: unknown[], key: string, is: (v: unknown) => v is T): T | undefined {
  for (const c of chain) {
    const v = c !== null && typeof c === "object" ? (c as Record<string, unknown>)[key] : undefined;
    if (is(v)) return v;
  }
  return undefined;
}

const isString = (v: unknown): v is string => typeof v === "string";
const isNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

/** True when the request provably never reached the server, so nothing can have been applied. */
function neverSent(codes: Array<string | undefined>): boolean {
  return codes.some((code) => code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN");
}

/**
 * Maps any failure of a database call into a QueueError. Keeps the original as `cause`.
 *
 * An outage is UNAVAILABLE (or TIMEOUT), whatever runtime reported it: Node's and undici's codes,
 * workerd's "Network connection lost." (a plain Error with `retryable: true`, also for a refused
 * connection, which workerd does not tell apart), an HTTP 5xx or 429 from the database. DATABASE
 * is left for what the database itself reported about a statement: a bug, never an outage.
 */
export function toQueueError(e: unknown): QueueError {
  if (e instanceof QueueError) return e;
  const chain = errorChain(e);
  const text = chain.map((c) => (c instanceof Error ? `${c.name} ${c.message}` : String(c))).join(" | ");
  const codes = chain.map((c) => fieldOf([c], "code", isString));
  const message = e instanceof Error ? e.message : String(e);
  const status = fieldOf(chain, "status", isNumber);
  const retryAfterMs = fieldOf(chain, "retryAfterMs", isNumber);

  if (
    codes.includes("SQLITE_BUSY") ||
    codes.includes("SQLITE_LOCKED") ||
    codes.includes("TRANSACTION_BUSY") ||
    BUSY_RE.test(text)
  ) {
    return new QueueError("BUSY", `database is locked: ${message}`, { cause: e, retryAfterMs });
  }
  if (codes.includes("BLOCKED") || BLOCKED_RE.test(text)) {
    return new QueueError(
      "BLOCKED",
      `the database refused the operation as blocked (over its plan's quota, or blocked by its operator); nothing was applied, and retrying will not help until the block is lifted: ${message}`,
      { cause: e },
    );
  }
  if (chain.some((c) => c instanceof Error && (c.name === "TimeoutError" || c.name === "AbortError"))) {
    return new QueueError("TIMEOUT", `request timed out: ${message}`, { cause: e, outcomeUnknown: true });
  }
  if (status === 404) {
    // What a namespace or database that is not there answers (an older sqld's 404 for the Hrana 3
    // path is handled before it gets here): an outage of this queue, which no retry ends.
    return new QueueError("UNAVAILABLE", `the database does not exist (HTTP 404): ${message}`, { cause: e });
  }
  if (
    status === 401 ||
    status === 403 ||
    (status === undefined && codes.includes("SERVER_ERROR") && AUTH_RE.test(text))
  ) {
    return new QueueError("UNAUTHORIZED", `the database refused the credentials: ${message}`, { cause: e });
  }
  if (status === 429) {
    // Refused before it ran: nothing was applied.
    return new QueueError("UNAVAILABLE", `the database is overloaded (HTTP 429): ${message}`, {
      cause: e,
      retryAfterMs,
    });
  }
  if (status !== undefined && status >= 500) {
    // A gateway's 5xx may come after the database applied the request.
    return new QueueError("UNAVAILABLE", `the database did not answer (HTTP ${status}): ${message}`, {
      cause: e,
      outcomeUnknown: true,
      retryAfterMs,
    });
  }
  if (codes.includes("CLIENT_CLOSED")) {
    return closed({ cause: e });
  }
  if (codes.includes("TRANSACTION_TIMEOUT")) {
    // The database rolled the batch back: it held its transaction open too long.
    return new QueueError("UNAVAILABLE", `the database timed the transaction out: ${message}`, { cause: e });
  }
  const network =
    codes.some((c) => c !== undefined && NETWORK_CODE.test(c)) ||
    // A server error with no status: the answer never came whole. With a 4xx, the request was refused.
    (codes.includes("SERVER_ERROR") && status === undefined) ||
    chain.some((c) => c instanceof Error && (c as { retryable?: unknown }).retryable === true) ||
    (e instanceof TypeError && /fetch|network|socket|terminated/i.test(text)) ||
    NETWORK_TEXT.test(text);
  if (network) {
    return new QueueError("UNAVAILABLE", `the database could not be reached: ${message}`, {
      cause: e,
      outcomeUnknown: !neverSent(codes),
    });
  }
  return new QueueError("DATABASE", message, { cause: e });
}
