/**
 * Push delivery inside the QueueWriter: each subscription (`tq_subscriptions`) is a consumer that
 * never polls. The pusher claims for it (`claimMany`, worker `push:<name>`, its visibility and
 * priority floor) when something may have become deliverable, POSTs each lease to its URL signed
 * with its secret, and settles the lease by the answer: 2xx acks, 202 leaves it to the consumer,
 * anything else, a network error or no answer within 90% of the visibility nacks it with backoff
 * (1 s doubling to 10 min, or the consumer's `Retry-After`); past the attempts the claim moves it to
 * the dead letters as for any consumer. Exclusivity and FIFO per group are the claim's, untouched.
 *
 * When it claims (src/app/writer/scheduler.ts): with a write through this transport (a publish,
 * an ack, a nack… including the pusher's own, which is when a delivery slot frees up), in that
 * write's own batch, and at
 * `wakeAt` (the Durable Object's alarm, so that deliveries resume after an eviction with no request
 * arriving): the next lease expiry, park end or delayed message the database knows of, or the
 * safety re-check for writers that bypass the Worker. A wake with nothing changed costs one probing
 * claim, for the least picky subscription, whatever their number.
 *
 * A slow consumer holds only its own slots: deliveries are never awaited by the claim path, and
 * each subscription gets at most its share of `maxConnections` (a Worker invocation opens about 6
 * connections at once; the rest wait, and the database's requests need some too).
 */
import { SIGNATURE_HEADER, signPayload } from "../../contract/signature.js";
import { pushDeliveryToWire } from "../../contract/wire.js";
import { type Backoff, backoff, retryAfterMs } from "../../core/backoff.js";
import { internalsOf } from "../../core/internals.js";
import { listSubscriptions, type StoredSubscription as Subscription } from "../../core/subscriptions.js";
import type { LibsqlTransport } from "../../core/transport.js";
import type { Lease } from "../../core/types.js";
import { pushWorkerId } from "../../rules.js";
import { type Ask, Scheduler } from "./scheduler.js";

export interface PusherOptions {
  /** Longest the pusher goes without a claim while subscriptions exist (the safety re-check). */
  recheckMs: number;
  /**
   * How its leases are named outside (a shard of a sharded queue: seqs and lease ids that name the
   * shard, so that the consumer settles them through the queue's API); as they are by default.
   */
  leaseOut?: (lease: Lease) => Lease;
  /**
   * Asks to be woken (`wake()`) at this time (ms since the epoch) even if nothing happens before.
   * The QueueWriter sets its alarm; the default is a timer, which does not outlive the process.
   */
  wakeAt?: (atMs: number) => unknown;
  /** Deliveries in flight at once, shared fairly among subscriptions (default 4). */
  maxConnections?: number;
  /** Told of each delivery's outcome: answered 2xx (taken), or not (retried later). */
  delivered?: (ok: boolean) => void;
  fetch?: typeof fetch;
}

/** Counters, for tests and the bench. */
export interface PushStats {
  /** Claim rounds (one write batch each) and claims in them. */
  rounds: number;
  claims: number;
  /** POSTs sent; answered 2xx (acked); answered 202; nacked for a retry; released (subscription gone). */
  posted: number;
  acked: number;
  accepted: number;
  retried: number;
  released: number;
}

/** A failed delivery's retry: 1 s doubling per attempt up to 10 min, or the consumer's `Retry-After` (up to a day), in seconds. */
export function retryDelay(attempts: number, retryAfter: string | null, nowMs = Date.now()): number {
  const asked = retryAfterMs(retryAfter, nowMs);
  if (asked !== undefined) return Math.min(Math.ceil(asked / 1000), MAX_RETRY_AFTER);
  return backoff(attempts, RETRY_S);
}

const RETRY_S: Backoff = { initial: 1, max: 600 };
/** A consumer may ask for a longer pause than the backoff's cap, up to a day. */
const MAX_RETRY_AFTER = 86_400;

/** A subscription with free slots, as one claim's worth. */
interface PushAsk extends Ask {
  sub: Subscription;
}

export class Pusher {
  readonly #queue: LibsqlTransport;
  readonly #recheckMs: number;
  readonly #maxConnections: number;
  readonly #fetch: typeof fetch;
  readonly #delivered: ((ok: boolean) => void) | undefined;
  readonly #leaseOut: (lease: Lease) => Lease;
  readonly #scheduler: Scheduler<PushAsk>;
  readonly #inFlight = new Map<string, number>();
  /** Leases asked for by claims still out, per subscription. */
  readonly #claiming = new Map<string, number>();
  /**
   * Leases a consumer took with a 202, by message seq: each holds one of its subscription's
   * `max_in_flight` slots until an ack, nack or release of it goes through this writer, or until the
   * lease's deadline, moved by each extend through this writer (an ack from elsewhere is not seen here).
   */
  readonly #held = new Map<number, { sub: string; untilMs: number; leaseId: string }>();
  /** Seqs of deliveries awaiting their answer, and whether their lease was settled meanwhile. */
  readonly #posting = new Map<number, boolean>();
  readonly #deliveries = new Set<Promise<void>>();
  #subs: Subscription[] = [];
  /** The list must be read again before the next claim or delivery (a put or delete, a wake). */
  #stale = true;
  #reloading: Promise<void> | undefined;
  #rotation = 0;
  readonly #unsubscribe: Array<() => void>;
  readonly stats: PushStats = { rounds: 0, claims: 0, posted: 0, acked: 0, accepted: 0, retried: 0, released: 0 };

  constructor(queue: LibsqlTransport, options: PusherOptions) {
    this.#queue = queue;
    this.#recheckMs = options.recheckMs;
    this.#maxConnections = options.maxConnections ?? 4;
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.#delivered = options.delivered;
    this.#leaseOut = options.leaseOut ?? ((l) => l);
    this.#scheduler = new Scheduler<PushAsk>(
      queue,
      {
        // With no subscription (and none being read) there is nobody to push to: nothing to run.
        active: () => this.#subs.length > 0 || this.#stale || this.#reloading !== undefined,
        prepare: () => (this.#stale || this.#reloading !== undefined ? this.#fresh() : undefined),
        asks: () => this.#asks(),
        claiming: (ask) => {
          this.#claiming.set(ask.sub.name, (this.#claiming.get(ask.sub.name) ?? 0) + ask.n);
        },
        took: (ask, got) => {
          this.#claiming.set(ask.sub.name, (this.#claiming.get(ask.sub.name) ?? ask.n) - ask.n);
          return this.#took(ask, got);
        },
        woken: () => {
          this.#stale = true;
        },
        changed: (_change, seq) => {
          if (seq === undefined) return false;
          // A consumer may settle its lease before its 202 reaches us.
          if (this.#posting.has(seq)) this.#posting.set(seq, true);
          return this.#held.delete(seq);
        },
      },
      { name: "push", recheckMs: options.recheckMs, wakeAt: options.wakeAt, stats: this.stats },
    );
    this.#scheduler.listen();
    const hooks = internalsOf(queue);
    this.#unsubscribe = [
      // A consumer that took a lease with a 202 and extends it keeps its slot as long as the lease.
      hooks.onExtend((leaseId, seq, expiresAt) => {
        const held = this.#held.get(seq);
        if (held?.leaseId === leaseId) held.untilMs = expiresAt * 1000;
      }),
      hooks.onSubscriptionsChange(() => {
        this.#stale = true;
        // Armed before the put or delete answers (a Durable Object holds its answer until the alarm
        // is stored): an eviction right after a subscription is made cannot leave it unserved.
        void this.#scheduler.arm(Date.now() + this.#recheckMs);
        void this.#scheduler.kick("write");
      }),
    ];
  }

  /**
   * Reads the subscriptions again and claims for them: at start, on the alarm, on a cron tick.
   * Resolves once that round's deliveries have settled (each is bounded by its visibility).
   */
  async wake(): Promise<void> {
    await this.#scheduler.wake();
    await Promise.allSettled([...this.#deliveries]);
  }

  /** Stops claiming, waking and listening to the transport; deliveries under way finish. */
  stop(): void {
    this.#scheduler.stop();
    for (const off of this.#unsubscribe.splice(0)) off();
  }

  /** Resolves when no delivery is under way (tests, graceful shutdown). */
  async settled(): Promise<void> {
    while (this.#deliveries.size > 0 || this.#scheduler.busy) {
      await Promise.allSettled([...this.#deliveries, this.#scheduler.settled()]);
    }
  }

  /** A claim's leases go out; a full answer says there may be more (for this one or the others). */
  #took(ask: PushAsk, got: PromiseSettledResult<Lease[]>): boolean {
    if (got.status === "rejected") {
      console.error(`push: claim for subscription ${ask.sub.name} failed`, got.reason);
      return false;
    }
    for (const lease of got.value) this.#deliver(ask.sub, lease);
    return got.value.length === ask.n;
  }

  /** Reads the list again when a put, delete or wake made it stale; callers meanwhile share one read. */
  async #fresh(): Promise<void> {
    while (this.#stale || this.#reloading) {
      this.#reloading ??= this.#reload().finally(() => {
        this.#reloading = undefined;
      });
      await this.#reloading;
    }
  }

  async #reload(): Promise<void> {
    this.#stale = false;
    try {
      this.#subs = await listSubscriptions(this.#queue);
    } catch (e) {
      this.#stale = true;
      throw e;
    }
    this.#rotation = (this.#rotation + 1) % Math.max(1, this.#subs.length);
  }

  /**
   * Each subscription with a free slot and how many leases to ask for, in turn (competing
   * consumers): its `max_in_flight` less the deliveries awaiting an answer, the leases it holds
   * after a 202 and those its claims still out asked for, within its share of the connections (a
   * held lease holds no connection).
   */
  #asks(): PushAsk[] {
    const share = Math.max(1, Math.floor(this.#maxConnections / Math.max(1, this.#subs.length)));
    const subs = [...this.#subs.slice(this.#rotation), ...this.#subs.slice(0, this.#rotation)];
    const held = this.#heldBySub();
    const asks: PushAsk[] = [];
    for (const sub of subs) {
      const posting = (this.#inFlight.get(sub.name) ?? 0) + (this.#claiming.get(sub.name) ?? 0);
      const n = Math.min(sub.maxInFlight - (held.get(sub.name) ?? 0), share) - posting;
      if (n > 0)
        asks.push({
          sub,
          n,
          workerId: pushWorkerId(sub.name),
          visibility: sub.visibility,
          minPriority: sub.minPriority,
        });
    }
    return asks;
  }

  /** Leases held after a 202, per subscription; those past their deadline are let go. */
  #heldBySub(): Map<string, number> {
    const now = Date.now();
    const counts = new Map<string, number>();
    for (const [seq, h] of this.#held) {
      if (h.untilMs <= now) this.#held.delete(seq);
      else counts.set(h.sub, (counts.get(h.sub) ?? 0) + 1);
    }
    return counts;
  }

  #deliver(sub: Subscription, lease: Lease): void {
    this.#inFlight.set(sub.name, (this.#inFlight.get(sub.name) ?? 0) + 1);
    let freed = false;
    // The slot frees once the consumer has answered. After an ack, the claim that refills it rides
    // the ack's batch (the scheduler's round for a batch that may free a message), whenever that
    // leaves: an ack may wait for a publish to ride with (`rideMs`). Otherwise a round is kicked,
    // in the same tick as a nack, and it arms the wake for the nack's park to end.
    const free = (kick = true) => {
      if (freed) return;
      freed = true;
      this.#inFlight.set(sub.name, (this.#inFlight.get(sub.name) ?? 1) - 1);
      if (kick) void this.#scheduler.kick("write");
    };
    const p = this.#post(sub, lease, free)
      .catch((e) => console.error(`push: delivery of lease ${lease.id} to ${sub.name} failed`, e))
      .finally(() => {
        free();
        this.#deliveries.delete(p);
      });
    this.#deliveries.add(p);
  }

  async #post(sub: Subscription, lease: Lease, free: (kick?: boolean) => void): Promise<void> {
    // A put or delete since the claim: no delivery starts for a subscription that is gone.
    await this.#fresh();
    const current = this.#subs.find((s) => s.name === sub.name);
    if (current === undefined) {
      this.stats.released++;
      await this.#queue.release(lease);
      return;
    }
    const body = JSON.stringify(pushDeliveryToWire(this.#leaseOut(lease), sub.name));
    let answer: Response | undefined;
    this.stats.posted++;
    this.#posting.set(lease.seq, false);
    try {
      answer = await this.#fetch(current.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          // During a rotation, signed with both secrets: a consumer holding either verifies it.
          [SIGNATURE_HEADER]: await signPayload(
            current.nextSigningSecret === undefined
              ? current.signingSecret
              : [current.signingSecret, current.nextSigningSecret],
            body,
          ),
          // The trace the message was published in, where a consumer's instrumentation looks for it.
          ...(lease.traceparent === undefined ? {} : { traceparent: lease.traceparent }),
        },
        body,
        redirect: "manual",
        // Answer while the lease is still ours, so that the nack lands before it lapses.
        signal: AbortSignal.timeout(Math.max(100, current.visibility * 900)),
      });
      await answer.body?.cancel();
    } catch {
      answer = undefined;
    }
    let settle: Promise<unknown> | undefined;
    let acked = false;
    const settledMeanwhile = this.#posting.get(lease.seq) === true;
    this.#posting.delete(lease.seq);
    if (answer?.status === 202) {
      this.stats.accepted++;
      if (!settledMeanwhile) {
        this.#held.set(lease.seq, { sub: sub.name, untilMs: lease.expiresAt * 1000, leaseId: lease.id });
      }
    } else if (answer?.ok) {
      this.stats.acked++;
      settle = this.#queue.ack(lease);
      acked = true;
    } else {
      this.stats.retried++;
      const retryAfter = answer?.headers.get("retry-after") ?? null;
      settle = this.#queue.nack(lease, retryDelay(lease.attempts, retryAfter));
    }
    this.#delivered?.(answer?.ok === true);
    free(!acked);
    await settle;
  }
}
