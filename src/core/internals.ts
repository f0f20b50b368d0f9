/**
 * What the Worker's writer needs of a transport and users do not: to hear of the writes that went
 * through it (a long poll or a push may be served at once), of extends and of subscription changes,
 * and to reach its connection. Internal: not exported by the package; `internalsOf(transport)` is
 * how src/app reaches it.
 */
import type { Connection } from "./connect.js";
import type { BatchWatcher } from "./engine.js";
import type { Published } from "./sql/publish.js";
import type { CheckedPublish } from "./validate.js";

export type { Change } from "./engine.js";

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
  readonly #extends = new Set<ExtendListener>();
  readonly #subscriptions = new Set<() => void>();
  readonly #schedules = new Set<() => void>();
  readonly #counts = new Set<CountListener>();

  /**
   * Publishes what was checked already (./validate.ts `checkPublish`): a sharded queue checks and
   * encodes once, then routes each part here. Set by the transport.
   */
  publish: (checked: CheckedPublish, name: "publish" | "publishMany") => Promise<Published> = () => {
    throw new TypeError("not attached");
  };

  constructor(conn: Connection) {
    this.conn = conn;
  }

  /**
   * Tells `watcher` of each write through this transport that may have made a message deliverable
   * (a publish, an ack or nack freeing its group, a redrive, a release, a purge), as its batch
   * commits; for an ack, nack or release, `seq` is the message whose lease it settled. It is also
   * told as each batch leaves, so that claims for consumers that wait can ride it (BatchWatcher).
   * Writes by other processes are not seen. Returns the function that removes the watcher.
   */
  onChange(watcher: BatchWatcher | BatchWatcher["changed"]): () => void {
    return this.conn.writes.watch(typeof watcher === "function" ? { changed: watcher } : watcher);
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

/** The internals of a LibsqlTransport; undefined for anything else (a writer, the HTTP client). */
export function maybeInternalsOf(transport: object): Internals | undefined {
  return byTransport.get(transport);
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
