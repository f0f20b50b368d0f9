/**
 * What consume() sends for the leases it holds: heartbeats (extend) while a handler runs, then the
 * ack or nack, or a release for a lease no handler will run. Every failure goes to `onError`;
 * every ack, nack and release is tracked, so that stopping waits for it.
 */
import { MAX_TIMER_MS } from "../core/backoff.js";
import { QueueError } from "../core/errors.js";
import type { Lease } from "../core/types.js";
import type { Lane, Settle } from "./lanes.js";
import type { ConsumeErrorContext, ConsumerQueue, ConsumeSummary } from "./options.js";

export interface Job<E> {
  lease: Lease<E>;
  /** The lane it was claimed on: its ack rides with that lane's next round. */
  lane: Lane;
  ctl: AbortController;
  heartbeat: ReturnType<typeof setTimeout> | undefined;
  /** A heartbeat found the lease fenced off: do not ack or nack it. */
  fenced: boolean;
  /** Over: finished, or abandoned at the end of the grace period. */
  over: boolean;
}

type Report = (error: unknown, context: ConsumeErrorContext) => void;

const isFenced = (e: unknown) => e instanceof QueueError && (e.code === "LEASE_LOST" || e.code === "LEASE_NOT_FOUND");

/** `f()`, with a synchronous throw turned into a rejection. */
export function call<T>(f: () => Promise<T>): Promise<T> {
  try {
    return Promise.resolve(f());
  } catch (e) {
    return Promise.reject(e);
  }
}

export class LeaseCalls {
  /** Acks, nacks and releases sent and not answered yet. */
  readonly ops = new Set<Promise<unknown>>();
  readonly #queue: ConsumerQueue;
  readonly #visibility: number;
  readonly #summary: ConsumeSummary;
  readonly #report: Report;
  readonly #answered: () => void;

  /** `answered` is called as each ack, nack or release is answered. */
  constructor(queue: ConsumerQueue, visibility: number, summary: ConsumeSummary, report: Report, answered: () => void) {
    this.#queue = queue;
    this.#visibility = visibility;
    this.#summary = summary;
    this.#report = report;
    this.#answered = answered;
  }

  /**
   * Extends `job`'s lease in `ms`, and every half visibility after that, until the job is over. A
   * delay past the longest timer is cut to it: an early heartbeat only renews the lease sooner.
   */
  beatAfter<E>(job: Job<E>, ms: number): void {
    job.heartbeat = setTimeout(() => this.#beat(job), Math.min(MAX_TIMER_MS, Math.max(0, ms)));
  }

  #beat<E>(job: Job<E>): void {
    if (job.over) return;
    const sentAt = Date.now();
    const visMs = this.#visibility * 1000;
    call(() => this.#queue.extend(job.lease, this.#visibility)).then(
      (l) => {
        if (job.over) return;
        if (l && typeof l.expiresAt === "number") job.lease = { ...job.lease, expiresAt: l.expiresAt };
        this.beatAfter(job, sentAt + visMs / 2 - Date.now());
      },
      (e) => {
        if (job.over) return;
        this.#report(e, { phase: "extend", lease: job.lease });
        if (isFenced(e)) {
          // Fenced off: someone else may hold the message now. Stop extending; tell the handler.
          job.fenced = true;
          job.ctl.abort(e);
          return;
        }
        // Transient: try again well before the lease lapses.
        this.beatAfter(job, Math.min(1000, visMs / 10));
      },
    );
  }

  /** Sends these acks and nacks now (in the caller's tick, with the claims it sends). */
  settle(settles: Settle[]): void {
    for (const s of settles) {
      if (s.kind === "ack") {
        this.#track(
          call(() => this.#queue.ack(s.lease)).then(
            () => {
              this.#summary.acked++;
            },
            (e) => this.#report(e, { phase: "ack", lease: s.lease }),
          ),
        );
      } else {
        this.#track(
          call(() => this.#queue.nack(s.lease, s.delay)).then(
            (r) => {
              this.#summary.nacked++;
              if ((r as { deadLettered?: unknown } | undefined)?.deadLettered === true) this.#summary.deadLettered++;
            },
            (e) => this.#report(e, { phase: "nack", lease: s.lease }),
          ),
        );
      }
    }
  }

  /** Gives back a lease that no handler will run (claimed while stopping), without spending its attempt. */
  release(lease: Lease<unknown>): void {
    this.#track(
      call(() => this.#queue.release(lease)).then(
        () => {
          this.#summary.released++;
        },
        (e) => this.#report(e, { phase: "release", lease }),
      ),
    );
  }

  #track(p: Promise<unknown>): void {
    this.ops.add(p);
    void p.finally(() => {
      this.ops.delete(p);
      this.#answered();
    });
  }
}
