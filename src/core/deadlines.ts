/** One timer for many deadlines (src/core/committer.ts). */

/** Each call's deadline (queueing, attempts and backoff), and each request's (one HTTP exchange). */
export type DeadlineKind = "call" | "request";

export interface Due {
  at: number;
  fire: () => void;
  ended: boolean;
}

/**
 * The deadlines of a committer under one timer (a timer per write would be set and cleared per
 * write). Each kind's deadlines come in the order they fall due (a fixed budget from now), so the
 * timer only ever waits for the oldest one still open; ended ones leave their line from its head.
 */
export class Deadlines {
  readonly #lines: Record<DeadlineKind, Due[]> = { call: [], request: [] };
  #timer: ReturnType<typeof setTimeout> | undefined;
  #armedFor = Number.POSITIVE_INFINITY;

  add(kind: DeadlineKind, at: number, fire: () => void): Due {
    const due = { at, fire, ended: false };
    this.#lines[kind].push(due);
    if (at < this.#armedFor) this.#arm(at);
    return due;
  }

  /** The thing watched settled: its deadline no longer matters. */
  end(due: Due): void {
    due.ended = true;
    for (const line of Object.values(this.#lines)) while (line.length > 0 && (line[0] as Due).ended) line.shift();
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
    for (const line of Object.values(this.#lines)) {
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
