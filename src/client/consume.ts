/**
 * consume(): the claim → handle → ack / nack / extend loop that every user of the queue would
 * otherwise write by hand, with its retries, heartbeats and graceful stop.
 *
 * Runs anywhere (Node, Workers, Deno, browsers): it needs only a queue with `claimMany`, `ack`,
 * `nack`, `release` and `extend` — a LibsqlTransport, or the HTTP client.
 *
 * One round trip per message: the acks (and nacks) of handlers that finished are sent in the same
 * tick as the claim that refills their slots, so that the library's group commit carries them in
 * one batch (and the HTTP client in one request). A steady consumer pays one database round trip
 * per message, not two.
 */
import { backoff } from "../core/backoff.js";
import { QueueError } from "../core/errors.js";
import { contextOf, traced } from "../core/telemetry.js";
import type { Lease } from "../core/types.js";
import { DEFAULT_QUEUE, MAX_CLAIM_BATCH } from "../rules.js";
import {
  type ConsumeErrorContext,
  type ConsumeOptions,
  type ConsumerQueue,
  type ConsumeSummary,
  checkQueue,
  DEFAULTS,
  type Handler,
  type Resolved,
  resolveOptions,
} from "./consume-options.js";

export type {
  ConsumeErrorContext,
  ConsumeOptions,
  ConsumePhase,
  ConsumerQueue,
  ConsumeSummary,
  Handler,
  HandlerContext,
} from "./consume-options.js";

/**
 * Runs `handler` on the messages of `queue` until `options.signal` aborts; resolves (never rejects
 * for a handler's or the database's failure: those go to `onError`) once the loop has stopped.
 * Rejects only for invalid arguments, before anything is claimed.
 */
export async function consume<E = unknown>(
  queue: ConsumerQueue,
  handler: Handler<E>,
  options: ConsumeOptions,
): Promise<ConsumeSummary> {
  checkQueue(queue, handler);
  const opts = resolveOptions(options);
  return new Loop<E>(queue, handler, opts).done;
}

const isFenced = (e: unknown) => e instanceof QueueError && (e.code === "LEASE_LOST" || e.code === "LEASE_NOT_FOUND");

/**
 * After the current macrotask: handlers that finish in the same tick (say, a claim's worth of quick
 * ones) are settled together, with one claim.
 */
const soon: (f: () => void) => void = (() => {
  const si = (globalThis as { setImmediate?: (f: () => void) => unknown }).setImmediate;
  return typeof si === "function" ? (f) => void si(f) : (f) => void setTimeout(f, 0);
})();

interface Job<E> {
  lease: Lease<E>;
  ctl: AbortController;
  heartbeat: ReturnType<typeof setTimeout> | undefined;
  /** A heartbeat found the lease fenced off: do not ack or nack it. */
  fenced: boolean;
  /** Over: finished, or abandoned at the end of the grace period. */
  over: boolean;
}

type Settle = { kind: "ack"; lease: Lease<unknown> } | { kind: "nack"; lease: Lease<unknown>; delay: number };

class Loop<E> {
  readonly done: Promise<ConsumeSummary>;
  readonly #queue: ConsumerQueue;
  readonly #handler: Handler<E>;
  readonly #o: Resolved;
  readonly #summary: ConsumeSummary = { acked: 0, nacked: 0, deadLettered: 0, released: 0, lost: 0, abandoned: 0 };
  #resolve!: (s: ConsumeSummary) => void;

  readonly #jobs = new Set<Job<E>>();
  /** Acks and nacks waiting for the next claim (or for the next tick, when no claim is coming). */
  #settles: Settle[] = [];
  /** Acks, nacks and releases sent and not answered yet: stopping waits for them. */
  readonly #ops = new Set<Promise<unknown>>();
  #claiming = false;
  /** The claim in flight is a long poll (settles must not wait for it); aborted when stopping. */
  #poll: AbortController | undefined;
  /** The last claim came back short: wait for a handler to finish, or for the idle timer. */
  #starved = false;
  #emptyClaims = 0;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  #scheduled = false;
  #stopping = false;
  #graceTimer: ReturnType<typeof setTimeout> | undefined;
  #finished = false;

  constructor(queue: ConsumerQueue, handler: Handler<E>, o: Resolved) {
    this.#queue = queue;
    this.#handler = handler;
    this.#o = o;
    this.done = new Promise((resolve) => {
      this.#resolve = resolve;
    });
    if (o.signal?.aborted) {
      this.#stop();
      return;
    }
    o.signal?.addEventListener("abort", this.#onAbort, { once: true });
    this.#pump();
  }

  readonly #onAbort = () => this.#stop();

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    soon(() => {
      this.#scheduled = false;
      this.#pump();
    });
  }

  /** Decides what to send now. Every state change ends here (directly or through #schedule). */
  #pump(): void {
    if (this.#finished) return;
    if (this.#stopping) {
      this.#flushSettles();
      this.#maybeFinish();
      return;
    }
    if (this.#claiming) {
      if (this.#poll) this.#flushSettles();
      return;
    }
    const free = this.#o.concurrency - this.#jobs.size;
    if (free <= 0 || this.#starved) {
      this.#flushSettles();
      return;
    }
    // The settles and the claim leave in the same tick: one batch, one round trip.
    this.#flushSettles();
    this.#claim(Math.min(free, MAX_CLAIM_BATCH), undefined);
  }

  #claim(n: number, wait: number | undefined): void {
    this.#claiming = true;
    const poll = wait === undefined ? undefined : new AbortController();
    this.#poll = poll;
    const sentAt = Date.now();
    let claimed: Promise<Lease<E>[]>;
    try {
      claimed =
        poll === undefined
          ? this.#queue.claimMany<E>(this.#o.workerId, this.#o.visibility, n, this.#o.minPriority)
          : this.#queue.claimMany<E>(this.#o.workerId, this.#o.visibility, n, this.#o.minPriority, {
              wait,
              signal: poll.signal,
            });
    } catch (e) {
      claimed = Promise.reject(e);
    }
    claimed.then(
      (leases) => {
        this.#claiming = false;
        this.#poll = undefined;
        if (!Array.isArray(leases)) leases = [];
        if (this.#stopping) {
          for (const l of leases) this.#release(l);
        } else {
          if (leases.length < n) {
            this.#emptyClaims = leases.length === 0 ? this.#emptyClaims + 1 : 0;
            this.#idle(leases.length === 0);
          } else {
            this.#emptyClaims = 0;
          }
          for (const l of leases) this.#start(l, sentAt);
        }
        this.#pump();
      },
      (e) => {
        this.#claiming = false;
        this.#poll = undefined;
        // A long poll we cut short ourselves, on stopping, is no error.
        if (!poll?.signal.aborted) this.#report(e, { phase: "claim" });
        if (e instanceof QueueError && e.code === "CLOSED") {
          // A closed queue stays closed: nothing left to claim from.
          this.#stop();
        } else {
          this.#emptyClaims++;
          this.#idle(true, true);
        }
        this.#pump();
      },
    );
  }

  /** Pauses claiming until a handler finishes or the idle delay passes (or long-polls, where the queue can). */
  #idle(empty: boolean, failed = false): void {
    this.#starved = true;
    clearTimeout(this.#idleTimer);
    const maxWait = this.#queue.maxClaimWait;
    if (empty && !failed && this.#jobs.size === 0 && typeof maxWait === "number" && maxWait > 0) {
      // Nothing running to wake us: let the server wait for a message instead of polling.
      this.#starved = false;
      this.#claim(Math.min(this.#o.concurrency, MAX_CLAIM_BATCH), maxWait);
      return;
    }
    // Doubling per empty claim in a row; a short (not empty) claim pauses the least.
    const delay = backoff(empty ? this.#emptyClaims : 1, this.#o.idle);
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = undefined;
      this.#starved = false;
      this.#pump();
    }, delay);
  }

  #wake(): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    this.#starved = false;
    this.#schedule();
  }

  #start(lease: Lease<E>, claimSentAt: number): void {
    const job: Job<E> = { lease, ctl: new AbortController(), heartbeat: undefined, fenced: false, over: false };
    this.#jobs.add(job);
    this.#beatAfter(job, claimSentAt + (this.#o.visibility * 1000) / 2 - Date.now());
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
      () => this.#finish(job, undefined, false),
      (e) => this.#finish(job, e, true),
    );
  }

  #finish(job: Job<E>, error: unknown, failed: boolean): void {
    if (job.over) return; // abandoned at the end of the grace period: its lease lapses
    job.over = true;
    clearTimeout(job.heartbeat);
    this.#jobs.delete(job);
    if (failed) this.#report(error, { phase: "handler", lease: job.lease });
    if (job.fenced) {
      this.#summary.lost++;
    } else if (failed) {
      let delay: number;
      try {
        delay = this.#o.retryDelay(job.lease.attempts, error);
      } catch (e) {
        this.#report(e, { phase: "nack", lease: job.lease });
        delay = DEFAULTS.backoff.initial;
      }
      this.#settles.push({ kind: "nack", lease: job.lease, delay });
    } else {
      this.#settles.push({ kind: "ack", lease: job.lease });
    }
    this.#wake();
  }

  // ---------------------------------------------------------------------------------------------
  // heartbeats

  #beatAfter(job: Job<E>, ms: number): void {
    job.heartbeat = setTimeout(() => this.#beat(job), Math.max(0, ms));
  }

  #beat(job: Job<E>): void {
    if (job.over) return;
    const sentAt = Date.now();
    const visMs = this.#o.visibility * 1000;
    let extended: Promise<Lease<E>>;
    try {
      extended = this.#queue.extend(job.lease, this.#o.visibility);
    } catch (e) {
      extended = Promise.reject(e);
    }
    extended.then(
      (l) => {
        if (job.over) return;
        if (l && typeof l.expiresAt === "number") job.lease = { ...job.lease, expiresAt: l.expiresAt };
        this.#beatAfter(job, sentAt + visMs / 2 - Date.now());
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
        this.#beatAfter(job, Math.min(1000, visMs / 10));
      },
    );
  }

  // ---------------------------------------------------------------------------------------------
  // acks, nacks, releases

  #flushSettles(): void {
    if (this.#settles.length === 0) return;
    const settles = this.#settles;
    this.#settles = [];
    for (const s of settles) {
      if (s.kind === "ack") {
        this.#track(
          this.#call(() => this.#queue.ack(s.lease)).then(
            () => {
              this.#summary.acked++;
            },
            (e) => this.#report(e, { phase: "ack", lease: s.lease }),
          ),
        );
      } else {
        this.#track(
          this.#call(() => this.#queue.nack(s.lease, s.delay)).then(
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
  #release(lease: Lease<E>): void {
    this.#track(
      this.#call(() => this.#queue.release(lease)).then(
        () => {
          this.#summary.released++;
        },
        (e) => this.#report(e, { phase: "release", lease }),
      ),
    );
  }

  #call<T>(f: () => Promise<T>): Promise<T> {
    try {
      return Promise.resolve(f());
    } catch (e) {
      return Promise.reject(e);
    }
  }

  #track(p: Promise<unknown>): void {
    this.#ops.add(p);
    void p.finally(() => {
      this.#ops.delete(p);
      this.#maybeFinish();
    });
  }

  #report(error: unknown, context: ConsumeErrorContext): void {
    try {
      this.#o.onError(error, context);
    } catch {
      // A throwing onError must not stop the loop.
    }
  }

  // ---------------------------------------------------------------------------------------------
  // stopping

  #stop(): void {
    if (this.#stopping) return;
    this.#stopping = true;
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    this.#poll?.abort(new QueueError("CLOSED", "consume() is stopping"));
    if (this.#jobs.size > 0) this.#graceTimer = setTimeout(() => this.#abandon(), this.#o.graceMs);
    this.#schedule();
  }

  #abandon(): void {
    for (const job of this.#jobs) {
      job.over = true;
      clearTimeout(job.heartbeat);
      job.ctl.abort(new QueueError("CLOSED", "consume() stopped: the grace period ended before this handler did"));
      this.#summary.abandoned++;
    }
    this.#jobs.clear();
    this.#pump();
  }

  #maybeFinish(): void {
    if (!this.#stopping || this.#finished) return;
    if (this.#claiming || this.#jobs.size > 0 || this.#settles.length > 0 || this.#ops.size > 0) return;
    this.#finished = true;
    clearTimeout(this.#graceTimer);
    this.#o.signal?.removeEventListener("abort", this.#onAbort);
    this.#resolve({ ...this.#summary });
  }
}
