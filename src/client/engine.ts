/**
 * The request engine: one call of the API, whatever the resource. It owns the call's attempts, the
 * pauses between them (the server's `Retry-After`, or jittered backoff), its deadline and abort
 * signal, and the rule of what may be sent again:
 *  - anything the API did not apply (503 BUSY / CLOSED, 429, a refused connection);
 *  - after a lost answer (no answer, 503 UNAVAILABLE / TIMEOUT, a gateway's 5xx), only what the
 *    resource declares safe (`retryUnknown`: keyed, fenced or read-only);
 *  - never past `retries`, nor a pause past the deadline (the call then fails with what it got).
 * A write that failed after an attempt may have applied says so (`outcomeUnknown`).
 */
import { type Backoff, backoff, sleepOrThrow } from "../core/backoff.js";
import { checkOptions, timeoutOf } from "./args.js";
import { type Failure, failureOfAnswer, failureOfNetwork, QueueHttpError, withUnknownOutcome } from "./http-errors.js";
import type { CallOptions, FetchLike } from "./options.js";

/** A successful answer, read whole. */
export interface Answer {
  status: number;
  headers: { get(name: string): string | null };
  text: string;
}

/** One call, as a resource describes it. */
export interface Op<R> {
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** Encoded path and query, from the API's root: `/v1/stats`. */
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** A write: a failure after an answer was lost says `outcomeUnknown`. */
  write: boolean;
  /** May be sent again after an attempt whose outcome is unknown (keyed, fenced or read-only). */
  retryUnknown: boolean;
  /** Reads a 2xx answer; `retried`: an earlier attempt of this call may have applied. */
  ok(answer: Answer, retried: boolean): R;
  /** Extra ms for the deadline (a long poll's wait). */
  extraMs?: number;
}

export interface EngineOptions {
  /** The API's root, without a trailing slash. */
  base: string;
  /** The `Authorization` header. */
  auth: string;
  fetch: FetchLike;
  /** The default budget of a call, in ms. */
  timeoutMs: number;
  /** Most resends of a call. */
  retries: number;
  /** A named queue's paths instead of the default queue's: `/v1/...` becomes `/v1/queues/{queue}/...`. */
  queue?: string | undefined;
}

/** Paths about no one queue: the same whatever queue a client serves. */
const EVERYONES = /^\/v1\/(?:queues|keys|audit|whoami)(?:[/?]|$)/;

/** Pauses between attempts when the server names none (ms), jittered so that clients do not retry in step. */
const RETRY: Backoff = { initial: 100, max: 2_000, jitter: "half" };

export class Engine {
  readonly #o: EngineOptions;

  readonly #prefix: string | undefined;

  constructor(options: EngineOptions) {
    this.#o = options;
    this.#prefix = options.queue === undefined ? undefined : `/v1/queues/${encodeURIComponent(options.queue)}/`;
  }

  /** A resource's path in this client's queue (the catalog's `/v1/queues...`, keys and the audit are everyone's). */
  #pathOf(path: string): string {
    return this.#prefix === undefined || EVERYONES.test(path) ? path : path.replace(/^\/v1\//, this.#prefix);
  }

  /** A GET: read-only, so always safe to send again. */
  read<R>(path: string, options: CallOptions, ok: (a: Answer) => R): Promise<R> {
    return this.send({ method: "GET", path, write: false, retryUnknown: true, ok }, options);
  }

  /**
   * A DELETE; false when the API answers 404 with one of `missing` (none was there), or true then
   * if an earlier attempt whose answer was lost may have deleted it.
   */
  async remove(path: string, options: CallOptions, missing: readonly string[]): Promise<boolean> {
    try {
      return await this.send({ method: "DELETE", path, write: true, retryUnknown: true, ok: () => true }, options);
    } catch (e) {
      if (e instanceof QueueHttpError && e.status === 404 && missing.includes(e.code)) return e.outcomeUnknown;
      throw e;
    }
  }

  /** Sends one call: its attempts, the pauses between them, all within its deadline. */
  async send<R>(op: Op<R>, options: CallOptions): Promise<R> {
    checkOptions(options);
    const what = `${op.method} ${op.path.replace(/\?.*/, "")}`;
    const budget = timeoutOf("options.timeoutMs", options.timeoutMs, this.#o.timeoutMs) + (op.extraMs ?? 0);
    const clock = new Clock(budget, options.signal);
    const headers: Record<string, string> = { authorization: this.#o.auth, ...op.headers };
    const body = op.body === undefined ? undefined : JSON.stringify(op.body);
    if (body !== undefined) headers["content-type"] = "application/json";
    let retried = false;
    let sent = false;
    try {
      for (let attempt = 1; ; attempt++) {
        let failure: Failure;
        let answer: Answer | undefined;
        try {
          clock.check();
          sent = true;
          const f = this.#o.fetch;
          const res = await f(this.#o.base + this.#pathOf(op.path), {
            method: op.method,
            headers,
            body,
            signal: clock.signal,
          });
          const text = await res.text();
          if (res.status < 400) answer = { status: res.status, headers: res.headers, text };
          else failure = failureOfAnswer(res.status, text, res.headers.get("retry-after"), what);
        } catch (e) {
          if (clock.aborted) throw clock.reason(what, op.write && (sent || retried));
          failure = failureOfNetwork(e, what);
        }
        if (answer !== undefined) return op.ok(answer, retried);
        failure = failure!;
        if (failure.unknown) retried = true;
        const pause = failure.retryAfterMs ?? backoff(attempt, RETRY);
        const again = failure.notApplied || (failure.unknown && op.retryUnknown);
        if (again && attempt <= this.#o.retries && pause < clock.remaining()) {
          sent = false;
          await clock.sleep(pause).catch(() => {
            throw clock.reason(what, op.write && retried);
          });
          continue;
        }
        throw op.write && retried ? withUnknownOutcome(failure.error) : failure.error;
      }
    } finally {
      clock.dispose();
    }
  }
}

/** A 2xx answer's JSON body. */
export function json<A>(a: Answer, path: string): A {
  try {
    return JSON.parse(a.text) as A;
  } catch {
    throw new QueueHttpError("INTERNAL", `${path}: the API answered ${a.status} with a body that is not JSON`, {
      status: a.status,
    });
  }
}

/**
 * One call's deadline and abort: the caller's signal and the timeout abort one controller, whose
 * signal every attempt (and every pause between them) uses.
 */
class Clock {
  readonly #ctl = new AbortController();
  readonly #deadline: number;
  readonly #budget: number;
  readonly #timer: ReturnType<typeof setTimeout>;
  readonly #caller: AbortSignal | undefined;
  #timedOut = false;

  constructor(budgetMs: number, caller: AbortSignal | undefined) {
    this.#budget = budgetMs;
    this.#deadline = Date.now() + budgetMs;
    this.#caller = caller;
    this.#timer = setTimeout(() => {
      this.#timedOut = true;
      this.#ctl.abort();
    }, budgetMs);
    if (caller?.aborted) this.#ctl.abort();
    else caller?.addEventListener("abort", this.#onAbort, { once: true });
  }

  readonly #onAbort = () => this.#ctl.abort();

  get signal(): AbortSignal {
    return this.#ctl.signal;
  }
  get aborted(): boolean {
    return this.#ctl.signal.aborted;
  }
  remaining(): number {
    return this.#deadline - Date.now();
  }
  check(): void {
    if (this.aborted) throw new Error("aborted");
  }

  /** What ends the call: the caller's reason, or a TIMEOUT. */
  reason(what: string, maybeApplied: boolean): unknown {
    if (!this.#timedOut && this.#caller?.aborted) return this.#caller.reason;
    return new QueueHttpError(
      "TIMEOUT",
      `${what}: no answer within ${this.#budget} ms${maybeApplied ? " (it may have been applied)" : ""}`,
      { outcomeUnknown: maybeApplied },
    );
  }

  sleep(ms: number): Promise<void> {
    return sleepOrThrow(ms, this.#ctl.signal);
  }

  dispose(): void {
    clearTimeout(this.#timer);
    this.#caller?.removeEventListener("abort", this.#onAbort);
  }
}
