/**
 * The QueueWriter's clock for its database's schedules (src/core/schedules.ts): its Durable Object
 * alarm. Each wake fires the due ticks (each stored once, whoever else fires them) and asks for the
 * next one; a schedule put or deleted through this writer asks for a wake at once. One alarm serves
 * both this and the pusher: `wakeAt` only ever moves it earlier.
 */
import { internalsOf } from "../../core/internals.js";
import type { LibsqlTransport } from "../../core/transport.js";

/** Where the alarm lives (a Durable Object's storage). */
export interface AlarmStorage {
  getAlarm(): Promise<number | null>;
  setAlarm(atMs: number): Promise<void>;
}

/** After a due moment, wait this much more (the database's clock may run behind ours). */
const SLACK_MS = 50;

/** A wake at `atMs`, unless one is already asked for before it (the alarm is shared). */
export function earliestAlarm(storage: AlarmStorage): (atMs: number) => Promise<void> {
  return async (atMs) => {
    const current = await storage.getAlarm();
    if (current === null || current <= Date.now() || atMs < current) await storage.setAlarm(atMs);
  };
}

export class ScheduleClock {
  readonly #queue: LibsqlTransport;
  readonly #wakeAt: (atMs: number) => Promise<void>;
  readonly #off: () => void;
  #running: Promise<void> | undefined;

  constructor(queue: LibsqlTransport, storage: AlarmStorage) {
    this.#queue = queue;
    this.#wakeAt = earliestAlarm(storage);
    this.#off = internalsOf(queue).onSchedulesChange(() => {
      // Asked for before the put answers (a Durable Object holds its answer until the alarm is stored).
      void this.#wakeAt(Date.now() + 1000).catch((e) => console.error("schedules: could not set the alarm", e));
    });
  }

  /** The alarm (shared with the pusher). */
  get wakeAt(): (atMs: number) => Promise<void> {
    return this.#wakeAt;
  }

  /** Fires what is due, then asks for the next tick; wakes that come while one runs share it. */
  tick(): Promise<void> {
    this.#running ??= this.#run().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  stop(): void {
    this.#off();
  }

  async #run(): Promise<void> {
    try {
      const { nextAt } = await this.#queue.runSchedules();
      if (nextAt !== null) {
        const { now } = await this.#queue.nextDueAt();
        await this.#wakeAt(Date.now() + Math.max(0, (nextAt - now) * 1000) + SLACK_MS);
      }
    } catch (e) {
      console.error("schedules: run failed", e);
      // Try again soon: a tick is never lost, only late.
      await this.#wakeAt(Date.now() + 5_000).catch(() => {});
    }
  }
}
