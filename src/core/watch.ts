/** One timer for many deadlines (src/core/committer.ts). */

/** A call's deadline (queueing, attempts and backoff) and a request's (one HTTP exchange). */
export const CALLS = 0;
export const REQUESTS = 1;

export interface Due {
  at: number;
  fire: () => void;
  ended: boolean;
}

/**
 * The deadlines of a committer (each call's, each request's) under one timer: a timer per write
 * cost more than the rest of its bookkeeping in workerd (a set and a clear per write, BENCHMARKS.md).
 * Each line's deadlines come in the order they fall due (a fixed budget from now), so the timer
 * only ever waits for the oldest one still open; ended ones leave their line from its head.
 */
export class Watch {
  readonly #lines: [Due[], Due[]] = [[], []];
  #timer: ReturnType<typeof setTimeout> | undefined;
  #armedFor = Number.POSITIVE_INFINITY;

  add(line: typeof CALLS | typeof REQUESTS, at: number, fire: () => void): Due {
    const due = { at, fire, ended: false };
    this.#lines[line].push(due);
    if (at < this.#armedFor) this.#arm(at);
    return due;
  }

  /** The thing watched settled: its deadline no longer matters. */
  end(due: Due): void {
    due.ended = true;
    for (const line of this.#lines) while (line.length > 0 && (line[0] as Due).ended) line.shift();
  }

  #arm(at: number): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#armedFor = at;
    this.#timer = setTimeout(() => this.#check(), Math.max(0, at - Date.now()));
    // In Node a pending deadline must not keep the process alive by itself (its request does).
    (this.#timer as { unref?: () => void }).unref?.();
  }

  #check(): void {
    this.#timer = undefined;
    this.#armedFor = Number.POSITIVE_INFINITY;
    const now = Date.now();
    let next = Number.POSITIVE_INFINITY;
    for (const line of this.#lines) {
      while (line.length > 0 && ((line[0] as Due).ended || (line[0] as Due).at <= now)) {
        const due = line.shift() as Due;
        if (due.ended) continue;
        due.ended = true;
        due.fire();
      }
      if (line.length > 0) next = Math.min(next, (line[0] as Due).at);
    }
    if (next < Number.POSITIVE_INFINITY) this.#arm(next);
  }
}
