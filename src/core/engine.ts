/**
 * The write path's one interface. Every write is a plan (src/core/sql) that must run as one atomic
 * batch; the engine (src/core/committer.ts) takes them from concurrent callers and commits them in
 * groups, each caller getting its own answer or its own error. A batch reaches its database in one
 * of two ways: a request over the network (it can be lost, so it is timed, and only idempotent
 * writes go again), or a transaction in this process (`InProcess`: a local file, run to its end
 * before it returns).
 */
import type { ResultSet } from "@libsql/client";
import type { Plan } from "./sql/index.js";

export interface WriteSpec<T> extends Plan<T> {
  /**
   * May this write be sent again after a response that never came (it may have applied)? If so,
   * its `resend` plan (when it has one) goes instead.
   */
  idempotent: boolean;
  /**
   * Given this write's answer, is its caller expected to send its next write right away (a consumer
   * that got a lease acks it; one that acked claims again)? Such callers are what a hold waits for.
   */
  comesBack?: (answer: T) => boolean;
  /**
   * Given this write's answer, what it may have made deliverable (a publish, an ack or nack freeing
   * its group, ...): told to the watchers once its batch commits.
   */
  frees?: (answer: T) => Freed | undefined;
  /**
   * Goes at the end of its batch, after the writes that are not (a claim: it then sees what the
   * batch publishes and frees). The order among such writes, and among the others, is kept.
   */
  last?: boolean;
  /**
   * Nothing waits on its answer soon (an ack, a nack, a release): when only such writes are queued,
   * the engine may keep them a moment (`rideMs`) for another write to ride with.
   */
  mayWait?: boolean;
}

/** A write that may have made a message deliverable. */
export type Change = "publish" | "ack" | "nack" | "redrive" | "release" | "purge" | "settings";

/** What a committed write freed: its kind, and for an ack, nack or release the message whose lease it settled. */
export interface Freed {
  change: Change;
  seq?: number | undefined;
}

/**
 * What the Worker's writer hangs on the engine to claim for consumers that wait (long polls, push):
 * told as each batch leaves, so that claims can ride a batch that may free a message, and of what
 * each batch freed once it commits.
 */
export interface BatchWatcher {
  /**
   * A batch is about to leave; `mayFree`: it carries a write marked `frees`. Writes submitted during
   * the call go in it, at its end. Answers whether claims for everyone waiting are now at its end,
   * so that what it frees needs no round of its own (`changed`'s `served`).
   */
  leaving?(mayFree: boolean): boolean;
  /**
   * A committed write freed something; `served`: this watcher's `leaving` answered true for its
   * batch. Called for each such write, before any caller hears its answer.
   */
  changed(change: Change, seq: number | undefined, served: boolean): void;
  /**
   * Whether answers to its claims came back and it has not taken them in yet: the next batch then
   * waits a turn of the event loop, so that it leaves with what those answers change (who still waits).
   */
  settling?(): boolean;
}

/** Counters of an engine, for tests and benchmarks. */
export interface WriteStats {
  /** Batches committed, the writes and statements they carried. */
  batches: number;
  writes: number;
  statements: number;
  /** Batches sent again after a failure that allowed it; of those, the database's BUSY answers. */
  retries: number;
  busy: number;
  /** Holds of the next batch for callers expected back, and those that ended by their timer. */
  holds: number;
  holdsTimedOut: number;
  /** Waits of writes that may wait for another to ride with, and those that ended by their timer. */
  rides: number;
  ridesInVain: number;
}

export interface WriteEngine {
  submit<T>(spec: WriteSpec<T>): Promise<T>;
  /** Fails what is queued with CLOSED; nothing is accepted after. */
  close(): void;
  /** Hangs `watcher` on every batch from now on; returns the function that takes it off. */
  watch(watcher: BatchWatcher): () => void;
  readonly stats: Readonly<WriteStats>;
}

/**
 * A database in this process (a local file, src/core/local.ts): the plans' statements run as one
 * transaction before `writeNow` returns, each only when its plan says it is needed (`Plan.when`).
 * Answers every statement's result in order (a skipped one answers nothing done).
 */
export interface InProcess {
  writeNow(plans: ReadonlyArray<Plan<unknown>>): ResultSet[];
}

export const newStats = (): WriteStats => ({
  batches: 0,
  writes: 0,
  statements: 0,
  retries: 0,
  busy: 0,
  holds: 0,
  holdsTimedOut: 0,
  rides: 0,
  ridesInVain: 0,
});

/**
 * A batch rolled back as a whole: when the database says which statement failed, only the write
 * that statement belongs to gets the error, and the others go again together. This answers which
 * write that is, from the statement counts of the batched writes; -1 when the error does not say.
 */
export function failedWrite(statementCounts: number[], error: unknown): number {
  const index = statementIndexOf(error);
  if (index === undefined) return -1;
  let end = 0;
  for (let i = 0; i < statementCounts.length; i++) {
    end += statementCounts[i] as number;
    if (index < end) return i;
  }
  return -1;
}

/** The failed statement's index in a batch, when the error carries one (LibsqlBatchError, hrana.ts, local.ts). */
function statementIndexOf(e: unknown): number | undefined {
  for (let cur = e, depth = 0; cur && depth < 8; cur = (cur as { cause?: unknown }).cause, depth++) {
    const i = (cur as { statementIndex?: unknown }).statementIndex;
    if (typeof i === "number") return i;
  }
  return undefined;
}
