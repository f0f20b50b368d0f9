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
 *
 * It stops when `signal` aborts, when the queue is drained (`until: "drained"`) or at its deadline
 * (`budgetMs`, `deadline`), and gives back every lease it holds: what it owes goes in one `settle`
 * where the queue has it, a lease claimed while stopping is released, and a handler still running at
 * the deadline has its lease released too. The summary accounts for every lease it received.
 */
import { backoff, MAX_TIMER_MS } from "../core/backoff.js";
import { QueueError } from "../core/errors.js";
import type { Lease } from "../core/types.js";
import { MAX_CLAIM_BATCH } from "../rules.js";
import { Jobs } from "./jobs.js";
import { allot, claimSizes, type Lane, lanesOf, type Settle } from "./lanes.js";
import { call, LeaseCalls, leftLease } from "./leases.js";
import {
  type ConsumeErrorContext,
  type ConsumeOptions,
  type ConsumerQueue,
  type ConsumeSummary,
  checkQueue,
  type Handler,
  type LeftLease,
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
  LeftLease,
} from "./options.js";

/**
 * Runs `handler` on the messages of `queue` until `options.signal` aborts, the queue is drained
 * (`until: "drained"`) or the deadline comes; resolves (never rejects for a handler's or the
 * database's failure: those go to `onError`) once the loop has stopped. Rejects only for invalid
 * arguments, before anything is claimed.
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
  readonly #o: Resolved;
  readonly #summary: ConsumeSummary = {
    stopped: "signal",
    claimed: 0,
    handled: 0,
    acked: 0,
    nacked: 0,
    deadLettered: 0,
    released: 0,
    lost: 0,
    abandoned: 0,
    settleFailed: 0,
    leftLeased: [],
    claimsUnanswered: 0,
  };
  #resolve!: (s: ConsumeSummary) => void;

  readonly #jobs: Jobs<E>;
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
  /** With a deadline: when claims stop, when running handlers are cut short, when it resolves. */
  readonly #deadlineTimers: ReturnType<typeof setTimeout>[] = [];
  /** Drained (`until: "drained"`): since when every lane has found nothing, with nothing running. */
  #quietSince: number | undefined;
  #finished = false;

  constructor(queue: ConsumerQueue, handler: Handler<E>, o: Resolved) {
    this.#queue = queue;
    this.#o = o;
    this.#lanes = lanesOf(queue);
    this.#calls = new LeaseCalls(
      queue,
      o.visibility,
      this.#summary,
      (e, c) => this.#report(e, c),
      () => this.#maybeFinish(),
    );
    this.#jobs = new Jobs(
      queue,
      handler,
      o,
      this.#calls,
      this.#summary,
      (e, c) => this.#report(e, c),
      (lane) => this.#wake(lane),
    );
    this.done = new Promise((resolve) => {
      this.#resolve = resolve;
    });
    if (o.signal?.aborted) {
      this.#stop("signal");
      return;
    }
    o.signal?.addEventListener("abort", this.#onAbort, { once: true });
    if (o.budget !== undefined) {
      const { deadline, reserveMs } = o.budget;
      const at = (t: number, f: () => void) =>
        this.#deadlineTimers.push(setTimeout(f, Math.min(MAX_TIMER_MS, Math.max(0, t - Date.now()))));
      at(deadline - reserveMs - o.graceMs, () => this.#stop("deadline"));
      at(deadline - reserveMs, () => this.#abandon());
      at(deadline, () => this.#finish());
      if (deadline - reserveMs - o.graceMs <= Date.now()) return;
    }
    this.#pump();
  }

  readonly #onAbort = () => this.#stop("signal");

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
      this.#calls.settle(this.#takeSettles(this.#lanes), false);
      this.#maybeFinish();
      return;
    }
    const claiming = allot(this.#lanes, this.#o.concurrency, this.#turn);
    if (claiming.length > 0) this.#turn++;
    // A lane's settles ride with its next claims: they leave now, in the same tick as the claims it
    // sends now (one batch, one round trip), or without claims when it has none out either.
    this.#calls.settle(this.#takeSettles(claiming), true);
    this.#calls.settle(this.#takeSettles(this.#lanes.filter((l) => l.pending === 0)), false);
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
      if (--out === 0) this.#roundOver(lane, n, got, errors, sentAt);
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

  #roundOver(lane: Lane, asked: number, got: number, errors: unknown[], sentAt: number): void {
    if (!this.#stopping) {
      for (const e of errors) this.#report(e, { phase: "claim" });
      if (errors.some((e) => e instanceof QueueError && e.code === "CLOSED")) {
        // A closed queue stays closed: nothing left to claim from.
        this.#stop("closed");
      } else if (errors.length > 0) {
        lane.emptyClaims++;
        this.#idle(lane, true, true);
      } else if (got < asked) {
        lane.emptyClaims = got === 0 ? lane.emptyClaims + 1 : 0;
        if (got === 0) lane.emptySentAt = sentAt;
        if (got === 0 && this.#drained()) return;
        if (lane.settles.some((st) => st.kind !== "nack")) {
          // Acks owed since the claim was sent free their groups' next messages: claim again now, with them riding.
          lane.paused = false;
          lane.rest();
        } else {
          this.#idle(lane, got === 0);
        }
      } else {
        lane.emptyClaims = 0;
        lane.paused = false;
        lane.rest();
      }
      this.#wakeAwaiting();
    }
  }

  /** The lanes that found nothing and waited for the others' claims claim again once none is out (not drained after all). */
  #wakeAwaiting(): void {
    if (this.#lanes.some((l) => l.pending > 0)) return;
    for (const l of this.#lanes) {
      if (!l.awaitingOthers) continue;
      l.awaitingOthers = false;
      l.paused = false;
    }
  }

  /** Leases a claim brought: run, or given back (together) when stopping. */
  #take(leases: Lease<E>[], sentAt: number, laneOf: (l: Lease<E>) => Lane): void {
    this.#summary.claimed += leases.length;
    if (leases.length > 0 && this.#quietSince !== undefined) {
      // Not drained after all: the lanes that were waiting for the others to look again claim again.
      this.#quietSince = undefined;
      for (const l of this.#lanes) if (l.timer === undefined) l.paused = false;
    }
    if (this.#stopping) {
      this.#calls.release(leases);
      return;
    }
    for (const l of leases) {
      const lane = laneOf(l);
      lane.emptySentAt = undefined;
      this.#jobs.start(l, lane, sentAt);
    }
  }

  /**
   * `until: "drained"`: true (and stopping) once every lane has found nothing in a claim sent at
   * least `idleGraceMs` after the last lane first found nothing, with nothing running or owed
   * meanwhile. Until then, the lanes that must look again do so when the grace is over, and the
   * others wait for them: an idle run costs each lane two claims (one with no grace).
   */
  #drained(): boolean {
    if (this.#o.until !== "drained" || this.#jobs.running > 0) return false;
    const lanes = this.#lanes;
    if (lanes.some((l) => l.pending > 0 || l.emptySentAt === undefined || l.settles.length > 0)) return false;
    this.#quietSince ??= Math.max(...lanes.map((l) => l.emptySentAt as number));
    const until = this.#quietSince + this.#o.idleGraceMs;
    for (const l of lanes) l.awaitingOthers = false;
    if (lanes.every((l) => (l.emptySentAt as number) >= until)) {
      this.#stop("drained");
      return true;
    }
    for (const lane of lanes) {
      lane.rest();
      lane.paused = true;
      lane.empty = true;
      if ((lane.emptySentAt as number) >= until) continue;
      // A timer may fire a millisecond before the clock says it is due: its claim must be sent after the grace.
      const afterGrace = () => {
        const left = until - Date.now();
        if (left > 0) {
          lane.timer = setTimeout(afterGrace, left);
          return;
        }
        lane.timer = undefined;
        lane.paused = false;
        this.#pump();
      };
      lane.timer = setTimeout(afterGrace, Math.max(0, until - Date.now()));
    }
    return true;
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
      this.#o.until !== "drained" &&
      this.#jobs.running === 0 &&
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
    lane.awaitingOthers = false;
    lane.timer = setTimeout(() => {
      lane.timer = undefined;
      // Draining: claiming again before the others answer would only make this lane look once more after the grace.
      if (this.#o.until === "drained" && lane.empty && this.#lanes.some((l) => l.pending > 0)) {
        lane.awaitingOthers = true;
        return;
      }
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
          this.#stop("closed");
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

  /** The settles owed on `lanes`, taken off them. */
  #takeSettles(lanes: Lane[]): Settle[] {
    const out: Settle[] = [];
    for (const lane of lanes) {
      if (lane.settles.length === 0) continue;
      out.push(...lane.settles);
      lane.settles = [];
    }
    return out;
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

  #stop(why: ConsumeSummary["stopped"]): void {
    if (this.#stopping) return;
    this.#stopping = true;
    this.#summary.stopped = why;
    for (const lane of this.#lanes) lane.rest();
    this.#poll?.abort(new QueueError("CLOSED", "consume() is stopping"));
    if (this.#jobs.running > 0) {
      // With a deadline, the deadline's own timer cuts the grace short.
      this.#graceTimer = setTimeout(() => this.#abandon(), Math.min(MAX_TIMER_MS, this.#o.graceMs));
    }
    this.#schedule();
  }

  /** The end of the grace period (or the deadline's last reserve): the handlers still running are abandoned. */
  #abandon(): void {
    if (this.#finished) return;
    if (!this.#stopping) this.#stop("deadline");
    const atDeadline = this.#o.budget !== undefined;
    const leases = this.#jobs.abandon(atDeadline);
    this.#calls.settle(this.#takeSettles(this.#lanes), false);
    if (leases.length > 0) this.#calls.release(leases);
    this.#pump();
  }

  #maybeFinish(): void {
    if (!this.#stopping || this.#finished) return;
    if (this.#poll || this.#jobs.running > 0 || this.#calls.ops.size > 0) return;
    if (this.#lanes.some((l) => l.pending > 0 || l.settles.length > 0)) return;
    this.#finish();
  }

  /** Resolves with the summary: at once at the deadline, with what is still out counted as such. */
  #finish(): void {
    if (this.#finished) return;
    if (!this.#stopping) this.#stop("deadline");
    this.#finished = true;
    // Running past every timer (a late one): still ours, left to lapse.
    if (this.#jobs.running > 0) this.#jobs.abandon(false);
    clearTimeout(this.#graceTimer);
    for (const t of this.#deadlineTimers) clearTimeout(t);
    for (const lane of this.#lanes) lane.rest();
    this.#o.signal?.removeEventListener("abort", this.#onAbort);
    const s = this.#summary;
    const left: LeftLease[] = [...s.leftLeased, ...this.#calls.unanswered()];
    // Owed and never sent (a deadline that came first): still ours.
    for (const st of this.#takeSettles(this.#lanes)) left.push(leftLease(st.lease, "unanswered"));
    const unanswered = left.length - s.leftLeased.length;
    this.#resolve({
      ...s,
      settleFailed: s.settleFailed + unanswered,
      leftLeased: left,
      claimsUnanswered: this.#lanes.reduce((n, l) => n + l.pending, 0) + (this.#poll ? 1 : 0),
    });
  }
}
