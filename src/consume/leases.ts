/**
 * What consume() sends for the leases it holds: heartbeats (extend) while a handler runs, then the
 * ack or nack, or a release for a lease no handler will run (or one whose handler ran out of time
 * at the deadline). Many go in one `settle` where the queue has it. Each answer is counted once in
 * the summary; every failure goes to `onError`; every call is tracked, so that stopping waits for it
 * and a deadline can tell which leases it left unanswered.
 */
import { MAX_TIMER_MS } from "../core/backoff.js";
import { QueueError } from "../core/errors.js";
import type { Lease, NackResult, Settlement } from "../core/types.js";
import { MAX_SETTLE_BATCH } from "../rules.js";
import type { Lane, Settle } from "./lanes.js";
import type { ConsumeErrorContext, ConsumerQueue, ConsumeSummary, LeftLease } from "./options.js";

export interface Job<E> {
  lease: Lease<E>;
  /** The lane it was claimed on: its ack rides with that lane's next round. */
  lane: Lane;
  ctl: AbortController;
  heartbeat: ReturnType<typeof setTimeout> | undefined;
  /** A heartbeat found the lease fenced off: do not ack or nack it. */
  fenced: boolean;
  /** Over: finished, or abandoned at the end of the grace period or at the deadline. */
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
  /** The leases of those, by lease id: what a deadline leaves unanswered. */
  readonly #out = new Map<string, Settle>();
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

  /**
   * Sends these now, in the caller's tick. With `claiming` (claims leave in this tick too) each ack
   * goes by `ack()`, to ride with them (the group commit's batch, or the HTTP claim's request); the
   * rest goes in `settle` calls of at most MAX_SETTLE_BATCH, or lease by lease on a queue without it.
   */
  settle(settles: Settle[], claiming: boolean): void {
    const batchable = typeof this.#queue.settle === "function";
    const together: Settle[] = [];
    for (const s of settles) {
      if (!batchable || (claiming && s.kind === "ack")) this.#one(s);
      else together.push(s);
    }
    for (let i = 0; i < together.length; i += MAX_SETTLE_BATCH) this.#many(together.slice(i, i + MAX_SETTLE_BATCH));
  }

  /** Gives back leases no handler will run (claimed while stopping), or whose handler ran out of time, without spending their attempts. */
  release(leases: Lease<unknown>[]): void {
    this.settle(
      leases.map((lease) => ({ kind: "release", lease })),
      false,
    );
  }

  /** The leases whose ack, nack or release is still out. */
  unanswered(): LeftLease[] {
    return [...this.#out.values()].map((s) => leftLease(s.lease, "unanswered"));
  }

  #one(s: Settle): void {
    const q = this.#queue;
    const sent =
      s.kind === "ack"
        ? call(() => q.ack(s.lease))
        : s.kind === "nack"
          ? call(() => q.nack(s.lease, s.delay))
          : call(() => q.release(s.lease));
    this.#track(
      [s],
      sent.then(
        (r) => this.#outcome(s, undefined, (r as Partial<NackResult> | undefined)?.deadLettered === true),
        (e) => this.#outcome(s, e, false),
      ),
    );
  }

  #many(settles: Settle[]): void {
    const list: Settlement[] = settles.map((s) =>
      s.kind === "nack" ? { action: "nack", lease: s.lease, delay: s.delay } : { action: s.kind, lease: s.lease },
    );
    this.#track(
      settles,
      call(() => (this.#queue.settle as NonNullable<ConsumerQueue["settle"]>)(list)).then(
        (outcomes) =>
          settles.forEach((s, i) => {
            const o = Array.isArray(outcomes) ? outcomes[i] : undefined;
            if (o === undefined)
              this.#outcome(s, new QueueError("DATABASE", "settle() answered no outcome for this lease"), false);
            else this.#outcome(s, o.error, o.deadLettered === true);
          }),
        (e) => {
          for (const s of settles) this.#outcome(s, e, false);
        },
      ),
    );
  }

  /** One lease's answer, counted once. */
  #outcome(s: Settle, error: unknown, deadLettered: boolean): void {
    this.#out.delete(s.lease.id);
    const m = this.#summary;
    if (error === undefined) {
      if (s.kind === "ack") m.acked++;
      else if (s.kind === "release") m.released++;
      else if (deadLettered) m.deadLettered++;
      return;
    }
    this.#report(error, { phase: s.kind, lease: s.lease });
    if (isFenced(error)) {
      m.lost++;
    } else {
      m.settleFailed++;
      m.leftLeased.push(leftLease(s.lease, `${s.kind}-failed`));
    }
  }

  #track(settles: Settle[], p: Promise<unknown>): void {
    for (const s of settles) this.#out.set(s.lease.id, s);
    this.ops.add(p);
    void p.finally(() => {
      this.ops.delete(p);
      this.#answered();
    });
  }
}

export const leftLease = (l: Lease<unknown>, reason: LeftLease["reason"]): LeftLease => ({
  leaseId: l.id,
  seq: l.seq,
  groupId: l.groupId,
  expiresAt: l.expiresAt,
  reason,
});
