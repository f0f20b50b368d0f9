/**
 * An isolate-wide limit on requests talking to the database at once. sqld (and a Turso primary)
 * serialize writers: dozens of concurrent write batches from one isolate make each of them slower
 * and, past a point, time out (and leave sqld wedged).
 *
 * Waiters poll on their own timers rather than being woken by the request that frees a slot:
 * a wake-up is a promise resolved from another request's context, which workerd either forwards
 * (production) or runs in the waker's context (the vitest pool), and in that case the waiter's
 * database I/O would belong to the wrong request ("Cannot perform I/O on behalf of a different
 * request"). A timer always fires in the context that set it.
 */
import { type Backoff, backoff, sleepOrReturn } from "../core/backoff.js";
import { HttpError } from "./errors.js";

/** The pauses between a waiter's looks at the slots: 1 ms doubling to 32, half-jittered. */
const LOOK: Backoff = { initial: 1, max: 32, jitter: "half" };

export class Gate {
  readonly #limit: number;
  readonly #maxWaitMs: number;
  #active = 0;
  #waiting = 0;

  constructor(limit: number, maxWaitMs: number) {
    this.#limit = limit;
    this.#maxWaitMs = maxWaitMs;
  }

  /** Resolves once a slot is held; the caller must `release()` it exactly once. */
  async acquire(): Promise<void> {
    // Newcomers queue behind waiters, so that a burst cannot starve them.
    if (this.#active < this.#limit && this.#waiting === 0) {
      this.#active++;
      return;
    }
    this.#waiting++;
    try {
      const deadline = Date.now() + this.#maxWaitMs;
      for (let attempt = 1; ; attempt++) {
        await sleepOrReturn(backoff(attempt, LOOK));
        if (this.#active < this.#limit) {
          this.#active++;
          return;
        }
        if (Date.now() > deadline) {
          throw new HttpError(
            503,
            "BUSY",
            `too many requests waiting for the database (waited ${this.#maxWaitMs} ms)`,
            {
              "Retry-After": "1",
            },
          );
        }
      }
    } finally {
      this.#waiting--;
    }
  }

  release(): void {
    this.#active--;
  }
}
