/**
 * consume(): the claim → handle → ack / nack / extend loop that every user of the queue would
 * otherwise write by hand, with its retries, heartbeats and graceful stop.
 *
 * Runs anywhere (Node, Workers, Deno, browsers): it needs only a queue with `claimMany`, `ack`,
 * `nack`, `release` and `extend` — a LibsqlTransport, a ShardedQueue, or the HTTP client.
 *
 * One round trip per message: the acks (and nacks) of handlers that finished are sent in the same
 * tick as the claims that refill their slots, so that the library's group commit carries them in
 * one batch (and the HTTP client in the claims' requests). Every free slot is claimed at once, in
 * claims of at most MAX_CLAIM_BATCH sent in the same tick (one batch per database), and a queue
 * over shards is claimed shard by shard, so that no shard waits for another (./lanes.ts).
 */
import { backoff } from "../core/backoff.js";
import { QueueError } from "../core/errors.js";
import { contextOf, traced } from "../core/telemetry.js";
import type { Lease } from "../core/types.js";
import { DEFAULT_QUEUE, MAX_CLAIM_BATCH } from "../rules.js";
import { allot, claimSizes, type Lane, lanesOf } from "./lanes.js";
import { call, type Job, LeaseCalls } from "./leases.js";
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
} from "./options.js";

export type {
  ConsumeErrorContext,
  ConsumeOptions,
  ConsumePhase,
  ConsumerQueue,
  ConsumeSummary,
  Handler,
  HandlerContext,
} from "./options.js";

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

/**
 * After the current macrotask: handlers that finish in the same tick (say, a claim's worth of quick
 * ones) are settled together, with one claim.
 */
const soon: (f: () => void) => void = (() => {
  const si = (globalThis as { setImmediate?: (f: () => void) => unknown }).setImmediate;
  return typeof si === "function" ? (f) => void si(f) : (f) => void setTimeout(f, 0);
})();

class Loop<E> {
  readonly done: Promise<ConsumeSummary>;
  readonly #queue: ConsumerQueue;
  readonly #handler: Handler<E>;
  readonly #o: Resolved;
  readonly #summary: ConsumeSummary = { acked: 0, nacked: 0, deadLettered: 0, released: 0, lost: 0, abandoned: 0 };
  #resolve!: (s: ConsumeSummary) => void;

  readonly #jobs = new Set<Job<E>>();
  readonly #lanes: Lane[];
  /** Which lane gets the odd free slot first (with fewer free slots than lanes ready). */
  #turn = 0;
  /** Heartbeats, acks, nacks and releases; stopping waits for those sent. */
  readonly #calls: LeaseCalls;
  /** The long poll in flight (every lane found nothing, nothing runs): settles must not wait for it; aborted when stopping. */
  #poll: AbortController | undefined;
  #scheduled = false;
  #stopping = false;
  #graceTimer: ReturnType<typeof setTimeout> | undefined;
  #finished = false;

  constructor(queue: ConsumerQueue, handler: Handler<E>, o: Resolved) {
    this.#queue = queue;
    this.#handler = handler;
    this.#o = o;
    this.#lanes = lanesOf(queue);
    this.#calls = new LeaseCalls(
      queue,
      o.visibility,
      this.#summary,
      (e, c) => this.#report(e, c),
      () => this.#maybeFinish(),
    );
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
    if (this.#stopping || this.#poll) {
      for (const lane of this.#lanes) this.#flushSettles(lane);
      this.#maybeFinish();
      return;
    }
    const claiming = allot(this.#lanes, this.#o.concurrency, this.#turn);
    if (claiming.length > 0) this.#turn++;
    // A lane's settles ride with its next claims: they leave now, in the same tick as the claims it
    // sends now (one batch, one round trip), or alone when it has none out either.
    for (const lane of this.#lanes) if (lane.pending === 0 || claiming.includes(lane)) this.#flushSettles(lane);
    for (const lane of claiming) this.#round(lane, lane.free);
  }

  /** Claims `n` leases on `lane`: every claim of the round leaves in this tick. */
  #round(lane: Lane, n: number): void {
    const sizes = claimSizes(n);
    lane.pending += sizes.length;
    lane.reserved += n;
    lane.free = 0;
    lane.empty = false;
    const sentAt = Date.now();
    let got = 0;
    let out = sizes.length;
    const errors: unknown[] = [];
    const { workerId, visibility, minPriority } = this.#o;
    const q = this.#queue;
    const answered = (asked: number) => {
      lane.reserved -= asked;
      lane.pending--;
      // Once the handlers this answer started that finish at once have: their acks ride along.
      this.#schedule();
      if (--out === 0) this.#roundOver(lane, n, got, errors);
    };
    for (const k of sizes) {
      call(() =>
        this.#lanes.length > 1 && q.claimManyOn
          ? q.claimManyOn<E>(lane.index, workerId, visibility, k, minPriority)
          : q.claimMany<E>(workerId, visibility, k, minPriority),
      ).then(
        (leases) => {
          const list = Array.isArray(leases) ? leases : [];
          got += list.length;
          this.#take(list, sentAt, () => lane);
          answered(k);
        },
        (e) => {
          errors.push(e);
          answered(k);
        },
      );
    }
  }

  #roundOver(lane: Lane, asked: number, got: number, errors: unknown[]): void {
    if (!this.#stopping) {
      for (const e of errors) this.#report(e, { phase: "claim" });
      if (errors.some((e) => e instanceof QueueError && e.code === "CLOSED")) {
        // A closed queue stays closed: nothing left to claim from.
        this.#stop();
      } else if (errors.length > 0) {
        lane.emptyClaims++;
        this.#idle(lane, true, true);
      } else if (got < asked) {
        lane.emptyClaims = got === 0 ? lane.emptyClaims + 1 : 0;
        this.#idle(lane, got === 0);
      } else {
        lane.emptyClaims = 0;
        lane.paused = false;
        lane.rest();
      }
    }
  }

  /** Leases a claim brought: run, or given back when stopping. */
  #take(leases: Lease<E>[], sentAt: number, laneOf: (l: Lease<E>) => Lane): void {
    for (const l of leases) {
      if (this.#stopping) this.#calls.release(l);
      else this.#start(l, laneOf(l), sentAt);
    }
  }

  /** Pauses `lane`'s claims until a handler of its finishes or the idle delay passes (or long-polls, where the queue can). */
  #idle(lane: Lane, empty: boolean, failed = false): void {
    lane.paused = true;
    lane.empty = empty && !failed;
    lane.rest();
    if (this.#poll) return; // the poll's answer decides
    const maxWait = this.#queue.maxClaimWait;
    if (
      lane.empty &&
      this.#jobs.size === 0 &&
      typeof maxWait === "number" &&
      maxWait > 0 &&
      this.#lanes.every((l) => l.pending === 0 && l.empty)
    ) {
      // Nothing running to wake us, and nothing anywhere: let the server wait for a message instead of polling.
      this.#longPoll(maxWait);
      return;
    }
    // Doubling per empty claim in a row; a short (not empty) claim pauses the least.
    const delay = backoff(empty ? lane.emptyClaims : 1, this.#o.idle);
    lane.timer = setTimeout(() => {
      lane.timer = undefined;
      lane.paused = false;
      this.#pump();
    }, delay);
  }

  /** One claim on the whole queue that may wait `wait` seconds (a ShardedQueue waits on every shard). */
  #longPoll(wait: number): void {
    for (const lane of this.#lanes) lane.rest();
    const n = Math.min(this.#o.concurrency, MAX_CLAIM_BATCH);
    const ctl = new AbortController();
    this.#poll = ctl;
    const sentAt = Date.now();
    const { workerId, visibility, minPriority } = this.#o;
    call(() => this.#queue.claimMany<E>(workerId, visibility, n, minPriority, { wait, signal: ctl.signal })).then(
      (leases) => {
        this.#poll = undefined;
        const list = Array.isArray(leases) ? leases : [];
        this.#take(list, sentAt, (l) => this.#laneOf(l));
        if (!this.#stopping) {
          for (const lane of this.#lanes) {
            lane.emptyClaims = list.length === 0 ? lane.emptyClaims + 1 : 0;
            if (list.length < n) {
              this.#idle(lane, list.length === 0);
            } else {
              lane.paused = false;
              lane.empty = false;
            }
          }
        }
        this.#pump();
      },
      (e) => {
        this.#poll = undefined;
        // A long poll we cut short ourselves, on stopping, is no error.
        if (!ctl.signal.aborted) this.#report(e, { phase: "claim" });
        if (e instanceof QueueError && e.code === "CLOSED") {
          this.#stop();
        } else if (!this.#stopping) {
          for (const lane of this.#lanes) {
            lane.emptyClaims++;
            this.#idle(lane, true, true);
          }
        }
        this.#pump();
      },
    );
  }

  /** The lane of a lease the whole queue answered (a long poll's): its shard's. */
  #laneOf(lease: Lease<E>): Lane {
    if (this.#lanes.length === 1) return this.#lanes[0] as Lane;
    let s = 0;
    try {
      s = this.#queue.shardOf?.(lease.groupId) ?? 0;
    } catch {
      // Any lane will do: it only decides which round its ack rides with.
    }
    return this.#lanes[s] ?? (this.#lanes[0] as Lane);
  }

  /** A handler of `lane` finished: its ack may have freed its group's next message, so claim again now. */
  #wake(lane: Lane): void {
    lane.rest();
    lane.paused = false;
    lane.empty = false;
    this.#schedule();
  }

  #start(lease: Lease<E>, lane: Lane, claimSentAt: number): void {
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
      () => this.#finish(job, undefined, false),
      (e) => this.#finish(job, e, true),
    );
  }

  #finish(job: Job<E>, error: unknown, failed: boolean): void {
    if (job.over) return; // abandoned at the end of the grace period: its lease lapses
    job.over = true;
    clearTimeout(job.heartbeat);
    this.#jobs.delete(job);
    job.lane.jobs--;
    job.lane.free++;
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
      job.lane.settles.push({ kind: "nack", lease: job.lease, delay });
    } else {
      job.lane.settles.push({ kind: "ack", lease: job.lease });
    }
    this.#wake(job.lane);
  }

  #flushSettles(lane: Lane): void {
    if (lane.settles.length === 0) return;
    const settles = lane.settles;
    lane.settles = [];
    this.#calls.settle(settles);
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
    for (const lane of this.#lanes) lane.rest();
    this.#poll?.abort(new QueueError("CLOSED", "consume() is stopping"));
    if (this.#jobs.size > 0) this.#graceTimer = setTimeout(() => this.#abandon(), this.#o.graceMs);
    this.#schedule();
  }

  #abandon(): void {
    for (const job of this.#jobs) {
      job.over = true;
      clearTimeout(job.heartbeat);
      job.ctl.abort(new QueueError("CLOSED", "consume() stopped: the grace period ended before this handler did"));
      job.lane.jobs--;
      this.#summary.abandoned++;
    }
    this.#jobs.clear();
    this.#pump();
  }

  #maybeFinish(): void {
    if (!this.#stopping || this.#finished) return;
    if (this.#poll || this.#jobs.size > 0 || this.#calls.ops.size > 0) return;
    if (this.#lanes.some((l) => l.pending > 0 || l.settles.length > 0)) return;
    this.#finished = true;
    clearTimeout(this.#graceTimer);
    this.#o.signal?.removeEventListener("abort", this.#onAbort);
    this.#resolve({ ...this.#summary });
  }
}
