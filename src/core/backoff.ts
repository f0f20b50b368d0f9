/**
 * Waiting, in one place: the pause before a retry (exponential, capped, jittered), a sleep that an
 * AbortSignal ends, a server's `Retry-After`, and the loop that polls until something comes. The
 * library's write path, the HTTP client, consume(), the long poll without a writer and the pusher
 * all wait through these. Pure, and free of runtime-specific imports.
 */

export interface Backoff {
  /** The first pause (any unit: the caller's). */
  initial: number;
  /** Growth per attempt (default 2). */
  factor?: number;
  /** The longest pause. */
  max: number;
  /**
   * "full": a random pause from 0 to the step (retries that must not stampede); "half": from half
   * the step to the step (pollers that should not run in step); "none" (default): the step itself.
   */
  jitter?: "full" | "half" | "none";
}

/** The pause before attempt `attempt` (1 for the first): `initial × factor^(attempt − 1)`, at most `max`, jittered. */
export function backoff(attempt: number, b: Backoff): number {
  const step = Math.min(b.max, b.initial * (b.factor ?? 2) ** Math.max(0, Math.min(attempt - 1, 64)));
  if (b.jitter === "full") return Math.random() * step;
  if (b.jitter === "half") return step * (0.5 + Math.random() / 2);
  return step;
}

/** The longest delay a timer takes (2^31 - 1 ms, about 24.8 days): a longer one fires at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** The write path's retries of what the database did not apply (BUSY, a refused connection), in ms. */
export const RETRY_MS: Backoff = { initial: 20, max: 500, jitter: "full" };

/** What a request abandoned after `ms` fails with (toQueueError maps it to TIMEOUT, outcome unknown). */
export function timeoutError(ms: number): Error {
  const e = new Error(`no answer within ${ms} ms`);
  e.name = "TimeoutError";
  return e;
}

/** `p`, or a TimeoutError when it takes longer than `ms`. */
export function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(timeoutError(ms)), ms);
    }),
  ]).finally(() => {
    if (timer !== undefined) clearTimeout(timer);
  });
}

/** Resolves after `ms`; rejects with the signal's reason as soon as `signal` aborts. */
export function sleepOrThrow(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Resolves after `ms`, or at once when `signal` aborts (an abort cuts it short, never an error). */
export function sleepOrReturn(ms: number, signal?: AbortSignal): Promise<void> {
  return sleepOrThrow(ms, signal).catch(() => undefined);
}

/**
 * `Retry-After` in ms from now: delta-seconds or an HTTP date (RFC 9110 §10.2.3); undefined when
 * absent or unreadable. A date in the past is 0.
 */
export function retryAfterMs(header: string | null | undefined, nowMs = Date.now()): number | undefined {
  if (header === null || header === undefined) return undefined;
  const t = header.trim();
  if (/^[0-9]{1,9}$/.test(t)) return Number(t) * 1000;
  const at = Date.parse(t);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/**
 * Calls `once` until it answers something `found` accepts, or until `deadline` (ms since the epoch)
 * passes or `signal` aborts, pausing between calls as `pauses` says (`wait` does the pausing, so that
 * a caller can let go of what it holds meanwhile). Answers the last result.
 */
export async function pollUntil<T>(
  once: () => Promise<T>,
  found: (result: T) => boolean,
  o: { deadline: number; pauses: Backoff; signal?: AbortSignal | undefined; wait?: (ms: number) => Promise<void> },
): Promise<T> {
  const wait = o.wait ?? ((ms: number) => sleepOrReturn(ms, o.signal));
  for (let attempt = 1; ; attempt++) {
    const result = await once();
    if (found(result) || o.signal?.aborted) return result;
    const left = o.deadline - Date.now();
    if (left <= 0) return result;
    await wait(Math.min(backoff(attempt, o.pauses), left));
    if (o.signal?.aborted) return result;
  }
}
