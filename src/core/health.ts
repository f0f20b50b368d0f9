/**
 * A connection's health as its requests find it: which requests to the database failed with an
 * outage (unreachable, no answer in time, blocked) and when it answered again. The write path and
 * the reads report each request here; the Worker's writer counts and logs what it hears
 * (src/app/writer/meter.ts). BUSY is contention, not an outage, and is not reported.
 */
import type { QueueError } from "./errors.js";

/** The outage codes a request can fail with. */
export type OutageCode = "UNAVAILABLE" | "TIMEOUT" | "BLOCKED";

export type HealthEvent =
  /** A request failed with an outage; `first` when the one before it had been answered. */
  | { kind: "failed"; code: OutageCode; message: string; first: boolean }
  /** A request was answered after `failures` failed ones, the first of them `downMs` ago. */
  | { kind: "recovered"; failures: number; downMs: number };

type Listener = (event: HealthEvent) => void;

const OUTAGES: ReadonlySet<string> = new Set<OutageCode>(["UNAVAILABLE", "TIMEOUT", "BLOCKED"]);

export class Health {
  readonly #listeners = new Set<Listener>();
  #failingSince: number | undefined;
  #failures = 0;

  /** True while the last request reported failed with an outage. */
  get failing(): boolean {
    return this.#failingSince !== undefined;
  }

  /** Calls `listener` with every event; returns the function that removes it. */
  on(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** A request failed (only outage codes count). */
  failed(err: QueueError): void {
    if (!OUTAGES.has(err.code)) return;
    const first = this.#failingSince === undefined;
    if (first) this.#failingSince = Date.now();
    this.#failures++;
    this.#tell({ kind: "failed", code: err.code as OutageCode, message: err.message, first });
  }

  /** A request was answered. */
  answered(): void {
    const since = this.#failingSince;
    if (since === undefined) return;
    const failures = this.#failures;
    this.#failingSince = undefined;
    this.#failures = 0;
    this.#tell({ kind: "recovered", failures, downMs: Date.now() - since });
  }

  #tell(event: HealthEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch (e) {
        console.error("health listener threw", e);
      }
    }
  }
}
