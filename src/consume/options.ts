/**
 * consume()'s shapes (what it needs of a queue, what it calls, what it answers) and its options,
 * checked and resolved once, before anything is claimed.
 */
import type { Backoff } from "../core/backoff.js";
import { invalid } from "../core/errors.js";
import type { Lease, LeaseQueue } from "../core/types.js";
import {
  checkDelay,
  checkInteger,
  checkObject,
  checkPositiveSeconds,
  checkPriority,
  checkWorkerId,
} from "../core/validate.js";
import { describe, IDLE_POLL } from "../rules.js";

/**
 * What consume() needs of a queue: claims and settles (`LeaseQueue`, what a sharded queue needs of
 * each shard too), and, for a queue over shards, how to claim one of them. `LibsqlTransport` is one,
 * `ShardedQueue` another, and so is the HTTP client.
 */
export interface ConsumerQueue extends LeaseQueue {
  /** The queue's name, in traces and metrics (`messaging.destination.name`; default `default`). */
  readonly name?: string;
  /**
   * A queue over shards that claim on their own (a `ShardedQueue`): how many, a group's shard, and a
   * claim on one shard. With all three (and more than one shard), consume() claims each shard on its
   * own, so that a slow or empty shard holds back none of the others.
   */
  readonly shards?: number;
  shardOf?(groupId: string): number;
  claimManyOn?<E = unknown>(
    shard: number,
    workerId: string,
    visibility: number,
    n: number,
    minPriority?: number,
  ): Promise<Lease<E>[]>;
}

export interface HandlerContext {
  /**
   * Aborted when this lease is lost (a heartbeat found it fenced off: another worker may have the
   * message now), when the consumer's grace period ran out, or at its deadline. A handler that can
   * stop early should.
   */
  signal: AbortSignal;
}

export type Handler<E> = (event: E, lease: Lease<E>, context: HandlerContext) => unknown;

export type ConsumePhase = "handler" | "claim" | "ack" | "nack" | "release" | "extend";

export interface ConsumeErrorContext {
  phase: ConsumePhase;
  /** The lease concerned (absent for a claim). */
  lease?: Lease<unknown>;
}

export interface ConsumeOptions {
  /** Names this consumer in the leases it holds. */
  workerId: string;
  /** Handlers running at once, and so leases held at once (default 1; at most 1000). */
  concurrency?: number;
  /** Seconds a lease lasts before a heartbeat renews it (default 30). */
  visibility?: number;
  /** Only claim from groups of at least this priority (default 0). */
  minPriority?: number;
  /** Aborting it stops the loop gracefully (see `graceMs`); consume() then resolves. */
  signal?: AbortSignal;
  /**
   * `"stopped"` (default): run until `signal` aborts (or the deadline). `"drained"`: also stop once
   * the queue has had nothing for this consumer for `idleGraceMs` (nothing running, every claim
   * empty), for a run that should end when its work is done (a Cron Trigger, a request).
   */
  until?: "stopped" | "drained";
  /** With `until: "drained"`: how long the queue must have had nothing before it stops (ms, default 200). */
  idleGraceMs?: number;
  /**
   * The run's budget, in ms from the call (or `deadline`, epoch ms): consume() resolves by then,
   * having given back every lease it holds. The budget also sizes `graceMs`, what is kept to give
   * leases back, and the retry delay (docs/library.md, "Consuming at the edge").
   */
  budgetMs?: number;
  deadline?: number | Date;
  /**
   * Delay (seconds) before a message whose handler threw is delivered again: `initial * factor^(attempts-1)`,
   * at most `max` (defaults 1, 2, 300), or a function of the delivery's attempt count and the error.
   * The queue's `maxAttempts` decides when a message goes to the dead letters instead. With a
   * deadline, the delay is at least what is left of the run: a retry is the next run's.
   */
  backoff?: { initial?: number; factor?: number; max?: number } | ((attempts: number, error: unknown) => number);
  /**
   * Pause between claims that found nothing, in ms: from `minMs`, doubling per empty claim, up to
   * `maxMs` (defaults 50 and 1000). A handler finishing ends the pause at once (its ack may have
   * freed its group's next message).
   */
  idleBackoff?: { minMs?: number; maxMs?: number };
  /**
   * After `signal` aborts, how long running handlers get to finish (ms; default 30 000, or a tenth
   * of the budget). Past it, a handler still running is abandoned: its signal aborts and its
   * heartbeats stop. Without a deadline its lease is left to lapse (after at most `visibility`
   * seconds), so the message is never handed to another worker while the handler may still be
   * working on it; at a deadline its lease is released (the run is ending anyway).
   */
  graceMs?: number;
  /** Every error the loop meets (a handler's throw included). The loop carries on. Default: console.error. */
  onError?: (error: unknown, context: ConsumeErrorContext) => void;
}

/** A lease consume() still held when it resolved: nobody settled it, so it lapses after its visibility. */
export interface LeftLease {
  leaseId: string;
  seq: number;
  groupId: string;
  /** When it lapses, as last known (epoch seconds, the database's clock). */
  expiresAt: number;
  /**
   * `"ack-failed"`, `"nack-failed"`, `"release-failed"`: the queue did not confirm it (the error went
   * to `onError`); `"unanswered"`: its ack, nack or release was still out at the deadline;
   * `"abandoned"`: its handler was still running when the grace period ended, with no deadline.
   */
  reason: "ack-failed" | "nack-failed" | "release-failed" | "unanswered" | "abandoned";
}

/** What a stopped consumer did. */
export interface ConsumeSummary {
  /** Why it stopped: `signal` aborted, the queue was drained (`until: "drained"`), the deadline came, or the queue was closed. */
  stopped: "signal" | "drained" | "deadline" | "closed";
  /** Leases it received. */
  claimed: number;
  /** Handlers that ran to their end (returned or threw). */
  handled: number;
  /** Handlers that returned, whose ack the queue confirmed. */
  acked: number;
  /** Handlers that threw (their lease nacked for a later retry, unless the nack failed: see `leftLeased`). */
  nacked: number;
  /** Of those, messages that had used their last attempt and went to the dead letters. */
  deadLettered: number;
  /**
   * Leases given back without spending an attempt, as the queue confirmed: claimed while stopping
   * (no handler ran), or whose handler was still running at the deadline.
   */
  released: number;
  /** Leases fenced off (found by a heartbeat, an ack, a nack or a release): another worker may hold the message now. */
  lost: number;
  /** Handlers still running when it resolved (the grace period or the deadline came first); their signals were aborted. */
  abandoned: number;
  /** Acks, nacks and releases the queue did not confirm (failed, or unanswered at the deadline): each lease is in `leftLeased`. */
  settleFailed: number;
  /** Leases it still held when it resolved, each with why. */
  leftLeased: LeftLease[];
  /** Claims still unanswered at the deadline: a lease one took lapses after its visibility. */
  claimsUnanswered: number;
}

export const DEFAULTS = {
  concurrency: 1,
  visibility: 30,
  minPriority: 0,
  backoff: { initial: 1, factor: 2, max: 300 },
  graceMs: 30_000,
  idleGraceMs: 200,
};

/**
 * A run with a deadline: claims stop at `deadline - reserve - grace`; running handlers get `grace`
 * to finish; at `deadline - reserve` the handlers still running are abandoned and their leases
 * released; consume() resolves by `deadline`, reporting what was still unanswered.
 * `reserve` (to give leases back) is a tenth of the budget, from 100 ms to 5 s; `grace` defaults to
 * a tenth of the budget too, and may not leave less than `reserve` before the deadline.
 */
export interface Budget {
  /** Epoch ms. */
  deadline: number;
  reserveMs: number;
}

export function budgetOf(deadline: number, budgetMs: number): Budget {
  return { deadline, reserveMs: Math.min(5_000, Math.max(100, budgetMs / 10)) };
}
const MAX_CONCURRENCY = 1000;
const MAX_MS = 3_600_000;

export interface Resolved {
  workerId: string;
  concurrency: number;
  visibility: number;
  minPriority: number;
  retryDelay: (attempts: number, error: unknown) => number;
  /** Pauses after claims that came back short (ms). */
  idle: Backoff;
  graceMs: number;
  until: "stopped" | "drained";
  idleGraceMs: number;
  /** With `budgetMs` or `deadline`. */
  budget: Budget | undefined;
  signal: AbortSignal | undefined;
  onError: (error: unknown, context: ConsumeErrorContext) => void;
}

/** The queue and the handler: refused (INVALID_ARGUMENT naming `queue` or `handler`) when not usable. */
export function checkQueue(queue: unknown, handler: unknown): void {
  if (typeof queue !== "object" || queue === null) throw invalid("queue", `must be a queue, got ${describe(queue)}`);
  for (const m of ["claimMany", "ack", "nack", "release", "extend"] as const) {
    if (typeof (queue as Partial<ConsumerQueue>)[m] !== "function") throw invalid("queue", `has no ${m}() method`);
  }
  if (typeof handler !== "function") throw invalid("handler", `must be a function, got ${describe(handler)}`);
}

export function resolveOptions(o: ConsumeOptions): Resolved {
  checkObject("options", o);
  const int = (field: string, v: unknown, d: number, min: number, max: number): number =>
    v === undefined ? d : checkInteger(`options.${field}`, v, min, max);
  const obj = <T>(field: string, v: T | undefined): Partial<T> =>
    v === undefined ? {} : checkObject(`options.${field}`, v);

  let retryDelay: Resolved["retryDelay"];
  if (typeof o.backoff === "function") {
    const f = o.backoff;
    retryDelay = (attempts, error) => checkDelay("options.backoff()", f(attempts, error));
  } else {
    const b = obj("backoff", o.backoff);
    const initial =
      b.initial === undefined ? DEFAULTS.backoff.initial : checkDelay("options.backoff.initial", b.initial);
    const max = b.max === undefined ? DEFAULTS.backoff.max : checkDelay("options.backoff.max", b.max);
    const factor = b.factor ?? DEFAULTS.backoff.factor;
    if (typeof factor !== "number" || !Number.isFinite(factor) || factor < 1) {
      throw invalid("options.backoff.factor", `must be a finite number >= 1, got ${describe(factor)}`);
    }
    if (max < initial) throw invalid("options.backoff.max", `must be >= options.backoff.initial (${initial})`);
    // Not core/backoff's backoff(): that caps its exponent at 64, and attempts are the queue's to count.
    retryDelay = (attempts) => Math.min(max, initial * factor ** Math.max(0, attempts - 1));
  }

  const idle = obj("idleBackoff", o.idleBackoff);
  const idleMinMs = int("idleBackoff.minMs", idle.minMs, IDLE_POLL.minMs, 1, MAX_MS);
  const idleMaxMs = int("idleBackoff.maxMs", idle.maxMs, Math.max(IDLE_POLL.maxMs, idleMinMs), 1, MAX_MS);
  if (idleMaxMs < idleMinMs) {
    throw invalid("options.idleBackoff.maxMs", `must be >= options.idleBackoff.minMs (${idleMinMs})`);
  }

  if (o.until !== undefined && o.until !== "stopped" && o.until !== "drained") {
    throw invalid("options.until", `must be "stopped" or "drained", got ${describe(o.until)}`);
  }
  if (o.budgetMs !== undefined && o.deadline !== undefined) {
    throw invalid("options.deadline", "give either budgetMs or deadline, not both");
  }
  const now = Date.now();
  let deadline: number | undefined;
  if (o.budgetMs !== undefined) deadline = now + int("budgetMs", o.budgetMs, 0, 1, 24 * MAX_MS);
  if (o.deadline !== undefined) {
    const d = o.deadline instanceof Date ? o.deadline.getTime() : o.deadline;
    if (typeof d !== "number" || !Number.isFinite(d) || d > now + 24 * MAX_MS) {
      throw invalid("options.deadline", `must be a Date or epoch ms within 24 hours, got ${describe(o.deadline)}`);
    }
    deadline = d;
  }
  const budget = deadline === undefined ? undefined : budgetOf(deadline, Math.max(0, deadline - now));
  let graceMs: number;
  if (budget === undefined) {
    graceMs = int("graceMs", o.graceMs, DEFAULTS.graceMs, 0, 24 * MAX_MS);
  } else {
    const room = Math.max(0, budget.deadline - now - budget.reserveMs);
    graceMs = int("graceMs", o.graceMs, Math.max(0, Math.floor((budget.deadline - now) / 10)), 0, 24 * MAX_MS);
    if (o.graceMs !== undefined && graceMs > room) {
      throw invalid(
        "options.graceMs",
        `must leave ${budget.reserveMs} ms of the budget to give leases back: at most ${Math.floor(room)}, got ${graceMs}`,
      );
    }
  }

  const signal = o.signal;
  if (signal !== undefined && !isAbortSignal(signal)) {
    throw invalid("options.signal", `must be an AbortSignal, got ${describe(signal)}`);
  }
  if (o.onError !== undefined && typeof o.onError !== "function") {
    throw invalid("options.onError", `must be a function, got ${describe(o.onError)}`);
  }
  return {
    workerId: checkWorkerId("options.workerId", o.workerId),
    concurrency: int("concurrency", o.concurrency, DEFAULTS.concurrency, 1, MAX_CONCURRENCY),
    visibility:
      o.visibility === undefined ? DEFAULTS.visibility : checkPositiveSeconds("options.visibility", o.visibility),
    minPriority:
      o.minPriority === undefined ? DEFAULTS.minPriority : checkPriority("options.minPriority", o.minPriority),
    retryDelay,
    // Jittered ("half"), so that idle consumers do not poll in step.
    idle: { initial: idleMinMs, max: idleMaxMs, jitter: "half" },
    graceMs,
    until: o.until ?? "stopped",
    idleGraceMs: int("idleGraceMs", o.idleGraceMs, DEFAULTS.idleGraceMs, 0, MAX_MS),
    budget,
    signal,
    onError: o.onError ?? defaultOnError,
  };
}

function isAbortSignal(v: unknown): v is AbortSignal {
  return (
    typeof v === "object" &&
    v !== null &&
    typeof (v as AbortSignal).aborted === "boolean" &&
    typeof (v as AbortSignal).addEventListener === "function"
  );
}

function defaultOnError(error: unknown, context: ConsumeErrorContext): void {
  const where = context.lease ? ` (message ${context.lease.seq} of group ${context.lease.groupId})` : "";
  console.error(`turso-queue consume(): ${context.phase} failed${where}:`, error);
}
