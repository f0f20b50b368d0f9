/**
 * What the Worker's writer needs of a transport and users do not: to hear of the writes that went
 * through it (a long poll or a push may be served at once), of extends and of subscription changes,
 * and to reach its connection. Internal: not exported by the package; `internalsOf(transport)` is
 * how src/app reaches it.
 */
import type { Connection } from "./connect.js";

/** A write that may have made a message deliverable. */
export type Change = "publish" | "ack" | "nack" | "redrive" | "release" | "purge" | "settings";

type ChangeListener = (change: Change, seq?: number) => void;

/** What a write through the transport did, for the writer's counters (/metrics). */
export type Counted =
  | { kind: "published"; count: number }
  | { kind: "claimed"; count: number; deadLettered: number }
  | { kind: "acked"; heldSeconds: number | undefined }
  | { kind: "nacked"; deadLettered: boolean }
  | { kind: "released" }
  | { kind: "scheduled"; count: number };
type CountListener = (counted: Counted) => void;
type ExtendListener = (leaseId: string, seq: number, expiresAt: number) => void;

export class Internals {
  readonly conn: Connection;
  readonly #changes = new Set<ChangeListener>();
  readonly #extends = new Set<ExtendListener>();
  readonly #subscriptions = new Set<() => void>();
  readonly #schedules = new Set<() => void>();
  readonly #counts = new Set<CountListener>();

  constructor(conn: Connection) {
    this.conn = conn;
  }

  /**
   * Calls `listener` after each write through this transport that may have made a message
   * deliverable (a publish, an ack or nack freeing its group, a redrive, a release). For an ack,
   * nack or release, `seq` is the message whose lease it settled. Writes by other processes are not
   * seen. Returns the function that removes the listener.
   */
  onChange(listener: ChangeListener): () => void {
    return on(this.#changes, listener);
  }

  /** Calls `listener` after each extend through this transport: the lease's id, its message, its new expiry (unix seconds). */
  onExtend(listener: ExtendListener): () => void {
    return on(this.#extends, listener);
  }

  /** Calls `listener` after each subscription put or delete through this transport. */
  onSubscriptionsChange(listener: () => void): () => void {
    return on(this.#subscriptions, listener);
  }

  /** Calls `listener` after each schedule put or delete through this transport (the writer sets its alarm). */
  onSchedulesChange(listener: () => void): () => void {
    return on(this.#schedules, listener);
  }

  schedulesChanged(): void {
    tell(this.#schedules, "onSchedulesChange");
  }

  /** Calls `listener` with what each write through this transport did (messages published, acked, ...). */
  onCount(listener: CountListener): () => void {
    return on(this.#counts, listener);
  }

  counted(counted: Counted): void {
    if (this.#counts.size > 0) tell(this.#counts, "onCount", counted);
  }

  changed(change: Change, seq?: number): void {
    tell(this.#changes, "onChange", change, seq);
  }

  extended(leaseId: string, seq: number, expiresAt: number): void {
    tell(this.#extends, "onExtend", leaseId, seq, expiresAt);
  }

  subscriptionsChanged(): void {
    tell(this.#subscriptions, "onSubscriptionsChange");
  }
}

const byTransport = new WeakMap<object, Internals>();

/** Called once by each transport's constructor. */
export function attach(transport: object, conn: Connection): Internals {
  const internals = new Internals(conn);
  byTransport.set(transport, internals);
  return internals;
}

/** The internals of a LibsqlTransport. */
export function internalsOf(transport: object): Internals {
  const internals = byTransport.get(transport);
  if (internals === undefined) throw new TypeError("not a LibsqlTransport");
  return internals;
}

function on<L>(set: Set<L>, listener: L): () => void {
  set.add(listener);
  return () => set.delete(listener);
}

/** Calls each listener; one that throws is logged and does not stop the others or the write. */
function tell<A extends unknown[]>(listeners: Set<(...args: A) => void>, name: string, ...args: A): void {
  for (const listener of listeners) {
    try {
      listener(...args);
    } catch (e) {
      console.error(`${name} listener threw`, e);
    }
  }
}

/** The libSQL client under a transport (tests and benchmarks reset and inspect the database through it). */
export const clientOf = (transport: object) => internalsOf(transport).conn.client;

/** The write engine's counters of a transport: batches, writes, statements, retries, BUSY answers, holds. */
export const writeStatsOf = (transport: object) => internalsOf(transport).conn.writes.stats;
