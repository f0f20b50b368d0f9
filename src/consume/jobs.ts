/**
 * consume()'s handlers: each lease it runs is a job, with its heartbeats, its `process` span and
 * its signal. A job that ends owes its lane an ack (it returned) or a nack (it threw); one still
 * running at the end of the grace period, or at the deadline, is abandoned.
 */

import { QueueError } from "../core/errors.js";
import { contextOf, traced } from "../core/telemetry.js";
import type { Lease } from "../core/types.js";
import { DEFAULT_QUEUE, MAX_SECONDS } from "../rules.js";
import type { Lane } from "./lanes.js";
import { type Job, type LeaseCalls, leftLease } from "./leases.js";
import {
  type ConsumeErrorContext,
  type ConsumerQueue,
  type ConsumeSummary,
  DEFAULTS,
  type Handler,
  type Resolved,
} from "./options.js";

export class Jobs<E> {
  readonly #jobs = new Set<Job<E>>();
  readonly #queue: ConsumerQueue;
  readonly #handler: Handler<E>;
  readonly #o: Resolved;
  readonly #calls: LeaseCalls;
  readonly #summary: ConsumeSummary;
  readonly #report: (error: unknown, context: ConsumeErrorContext) => void;
  readonly #ended: (lane: Lane) => void;

  /** `ended(lane)`: a job of `lane` ended, and its ack or nack waits in `lane.settles`. */
  constructor(
    queue: ConsumerQueue,
    handler: Handler<E>,
    o: Resolved,
    calls: LeaseCalls,
    summary: ConsumeSummary,
    report: (error: unknown, context: ConsumeErrorContext) => void,
    ended: (lane: Lane) => void,
  ) {
    this.#queue = queue;
    this.#handler = handler;
    this.#o = o;
    this.#calls = calls;
    this.#summary = summary;
    this.#report = report;
    this.#ended = ended;
  }

  get running(): number {
    return this.#jobs.size;
  }

  /** Runs the handler on `lease`, its first heartbeat at half the visibility from when the claim was sent. */
  start(lease: Lease<E>, lane: Lane, claimSentAt: number): void {
    const job: Job<E> = { lease, lane, ctl: new AbortController(), heartbeat: undefined, fenced: false, over: false };
    this.#jobs.add(job);
    lane.jobs++;
    this.#calls.beatAfter(job, claimSentAt + (this.#o.visibility * 1000) / 2 - Date.now());
    // A `process` span per message, a child of the span it was published in (when it was traced).
    traced(
      "process",
      {
        name: "consume",
        destination: this.#queue.name ?? DEFAULT_QUEUE,
        parent: contextOf(lease.traceparent),
        attributes: { "messaging.message.id": String(lease.seq), "messaging.message.delivery_count": lease.attempts },
      },
      async () => this.#handler(lease.event, lease, { signal: job.ctl.signal }),
    ).then(
      () => this.#end(job, undefined, false),
      (e) => this.#end(job, e, true),
    );
  }

  #end(job: Job<E>, error: unknown, failed: boolean): void {
    if (job.over) return; // abandoned at the end of the grace period, or at the deadline
    job.over = true;
    clearTimeout(job.heartbeat);
    this.#jobs.delete(job);
    job.lane.jobs--;
    job.lane.free++;
    this.#summary.handled++;
    if (failed) this.#report(error, { phase: "handler", lease: job.lease });
    if (job.fenced) {
      this.#summary.lost++;
    } else if (failed) {
      this.#summary.nacked++;
      job.lane.settles.push({ kind: "nack", lease: job.lease, delay: this.#retryDelay(job.lease, error) });
    } else {
      job.lane.settles.push({ kind: "ack", lease: job.lease });
    }
    this.#ended(job.lane);
  }

  /** The retry delay, in seconds; with a deadline, at least what is left of the run (a retry is the next run's). */
  #retryDelay(lease: Lease<E>, error: unknown): number {
    let delay: number;
    try {
      delay = this.#o.retryDelay(lease.attempts, error);
    } catch (e) {
      this.#report(e, { phase: "nack", lease });
      delay = DEFAULTS.backoff.initial;
    }
    const deadline = this.#o.budget?.deadline;
    if (deadline === undefined) return delay;
    return Math.min(MAX_SECONDS, Math.max(delay, Math.ceil((deadline - Date.now()) / 1000)));
  }

  /**
   * Abandons the handlers still running: their signals abort and their heartbeats stop. At a
   * deadline their leases are answered, to be released (the run is ending: nobody would settle
   * them); otherwise they are left to lapse, so that no other worker gets a message a handler may
   * still be working on.
   */
  abandon(atDeadline: boolean): Lease<E>[] {
    const release: Lease<E>[] = [];
    for (const job of this.#jobs) {
      job.over = true;
      clearTimeout(job.heartbeat);
      job.ctl.abort(
        new QueueError(
          "CLOSED",
          atDeadline
            ? "consume() reached its deadline before this handler finished: its lease was released"
            : "consume() stopped: the grace period ended before this handler did",
        ),
      );
      job.lane.jobs--;
      this.#summary.abandoned++;
      if (job.fenced) this.#summary.lost++;
      else if (atDeadline) release.push(job.lease);
      else this.#summary.leftLeased.push(leftLease(job.lease, "abandoned"));
    }
    this.#jobs.clear();
    return release;
  }
}
