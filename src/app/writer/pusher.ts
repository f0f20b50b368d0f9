/**
 * Push delivery inside the QueueWriter: each subscription (`tq_subscriptions`) is a consumer that
 * never polls. The pusher claims for it (`claimMany`, worker `push:<name>`, its visibility and
 * priority floor) when something may have become deliverable, POSTs each lease to its URL signed
 * with its secret, and settles the lease by the answer: 2xx acks, 202 leaves it to the consumer,
 * anything else, a network error or no answer within 90% of the visibility nacks it with backoff
 * (1 s doubling to 10 min, or the consumer's `Retry-After`); past the attempts the claim moves it to
 * the dead letters as for any consumer. Exclusivity and FIFO per group are the claim's, untouched.
 *
 * When it claims: after a write through this transport (a publish, an ack, a nack… including the
 * pusher's own, which is when a delivery slot frees up), and at `wakeAt` (the Durable Object's
 * alarm, so that deliveries resume after an eviction with no request arriving): the next lease
 * expiry, park end or delayed message the database knows of, or the safety re-check for writers
 * that bypass the Worker. A wake with nothing changed costs one probing claim, for the least picky
 * subscription, whatever their number.
 *
 * A slow consumer holds only its own slots: deliveries are never awaited by the claim path, and
 * each subscription gets at most its share of `maxConnections` (a Worker invocation opens about 6
 * connections at once; the rest wait, and the database's requests need some too).
 */
import { SIGNATURE_HEADER, signPayload } from "../../client/signature.js";
import type { Subscription } from "../../core/subscriptions.js";
import type { Lease, LibsqlTransport } from "../../core/transport.js";
import { msUntilDue } from "./due.js";

/** What a consumer receives (JSON body of the POST). */
export interface PushDelivery {
  lease_id: string;
  seq: number;
  group_id: string;
  event: unknown;
  attempts: number;
  expires_at: number;
  subscription: string;
}

export interface PusherOptions {
  /** Longest the pusher goes without a claim while subscriptions exist (the safety re-check). */
  recheckMs: number;
  /**
   * Asks to be woken (`wake()`) at this time (ms since the epoch) even if nothing happens before.
   * The QueueWriter sets its alarm; the default is a timer, which does not outlive the process.
   */
  wakeAt?: (atMs: number) => unknown;
  /** Deliveries in flight at once, shared fairly among subscriptions (default 4). */
  maxConnections?: number;
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

/** A failed delivery's retry delay in seconds: the consumer's Retry-After, or 1 s doubling per attempt up to 10 min. */
export function retryDelay(attempts: number, retryAfter: string | null, nowMs = Date.now()): number {
  if (retryAfter !== null) {
    const v = retryAfter.trim();
    if (/^[0-9]{1,9}$/.test(v)) return Math.min(Number(v), MAX_RETRY_AFTER);
    const at = Date.parse(v);
    if (!Number.isNaN(at)) return Math.min(Math.max(0, Math.ceil((at - nowMs) / 1000)), MAX_RETRY_AFTER);
  }
  return Math.min(2 ** Math.max(0, attempts - 1), MAX_BACKOFF);
}

const MAX_BACKOFF = 600;
/** A consumer may ask for a longer pause than the backoff's cap, up to a day. */
const MAX_RETRY_AFTER = 86_400;

export class Pusher {
  readonly #queue: LibsqlTransport;
  readonly #recheckMs: number;
  readonly #wakeAt: (atMs: number) => unknown;
  readonly #maxConnections: number;
  readonly #fetch: typeof fetch;
  readonly #inFlight = new Map<string, number>();
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
  #running: Promise<void> | undefined;
  #isRunning = false;
  #again: "full" | "probe" | undefined;
  #rotation = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #wakeSetFor: number | undefined;
  #stopped = false;
  readonly #unsubscribe: Array<() => void>;
  readonly stats: PushStats = { rounds: 0, claims: 0, posted: 0, acked: 0, accepted: 0, retried: 0, released: 0 };

  constructor(queue: LibsqlTransport, options: PusherOptions) {
    this.#queue = queue;
    this.#recheckMs = options.recheckMs;
    this.#maxConnections = options.maxConnections ?? 4;
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.#wakeAt = options.wakeAt ?? ((at) => this.#timerAt(at));
    this.#unsubscribe = [
      // With no subscription (and none being read) a write has nobody to push to: nothing to run.
      queue.onChange((_change, seq) => {
        if (seq !== undefined) {
          this.#held.delete(seq);
          // A consumer may settle its lease before its 202 reaches us.
          if (this.#posting.has(seq)) this.#posting.set(seq, true);
        }
        if (this.#subs.length > 0 || this.#stale || this.#reloading) this.#kick("full");
      }),
      // A consumer that took a lease with a 202 and extends it keeps its slot as long as the lease.
      queue.onExtend((leaseId, seq, expiresAt) => {
        const held = this.#held.get(seq);
        if (held?.leaseId === leaseId) held.untilMs = expiresAt * 1000;
      }),
      queue.onSubscriptionsChange(() => {
        this.#stale = true;
        // Armed before the put or delete answers (a Durable Object holds its answer until the alarm
        // is stored): an eviction right after a subscription is made cannot leave it unserved.
        void this.#arm(Date.now() + this.#recheckMs);
        this.#kick("full");
      }),
    ];
  }

  /**
   * Reads the subscriptions again and claims for them: at start, on the alarm, on a cron tick.
   * Resolves once that round's deliveries have settled (each is bounded by its visibility).
   */
  async wake(): Promise<void> {
    this.#wakeSetFor = undefined;
    this.#stale = true;
    this.#kick("probe");
    await this.#running;
    await Promise.allSettled([...this.#deliveries]);
  }

  /** Stops claiming and waking; deliveries under way finish. */
  stop(): void {
    this.#stopped = true;
    for (const off of this.#unsubscribe) off();
    if (this.#timer !== undefined) clearTimeout(this.#timer);
  }

  /** Resolves when no delivery is under way (tests, graceful shutdown). */
  async settled(): Promise<void> {
    while (this.#deliveries.size > 0 || this.#isRunning) {
      await Promise.allSettled([...this.#deliveries, this.#running]);
    }
  }

  #kick(why: "full" | "probe"): void {
    if (this.#stopped) return;
    if (this.#again !== "full") this.#again = why;
    if (!this.#isRunning) this.#running = this.#run();
  }

  async #run(): Promise<void> {
    this.#isRunning = true;
    try {
      do {
        await this.#rounds();
        await this.#scheduleWake();
      } while (this.#again !== undefined && !this.#stopped);
    } finally {
      this.#isRunning = false;
    }
  }

  async #rounds(): Promise<void> {
    try {
      while (this.#again !== undefined && !this.#stopped) {
        const probe = this.#again === "probe";
        this.#again = undefined;
        await this.#fresh();
        let asks = this.#asks();
        if (asks.length === 0) continue;
        // With nothing known to have changed, one claim for the least picky subscription tells whether any would find something.
        if (probe) asks = [asks.reduce((a, b) => (b.sub.minPriority < a.sub.minPriority ? b : a))];
        this.stats.rounds++;
        this.stats.claims += asks.length;
        // Submitted in one tick: the committer sends them in one batch.
        const results = await Promise.allSettled(
          asks.map((a) => this.#queue.claimMany(`push:${a.sub.name}`, a.sub.visibility, a.n, a.sub.minPriority)),
        );
        asks.forEach((a, i) => {
          const r = results[i] as PromiseSettledResult<Lease[]>;
          if (r.status === "rejected") {
            console.error(`push: claim for subscription ${a.sub.name} failed`, r.reason);
            return;
          }
          for (const lease of r.value) this.#deliver(a.sub, lease);
          // A full answer, or a probe that found something: there may be more for the others.
          if (r.value.length === a.n || (probe && r.value.length > 0)) this.#again = "full";
        });
      }
    } catch (e) {
      console.error("push: round failed", e);
    }
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
      this.#subs = await this.#queue.subscriptions();
    } catch (e) {
      this.#stale = true;
      throw e;
    }
    this.#rotation = (this.#rotation + 1) % Math.max(1, this.#subs.length);
  }

  /**
   * Each subscription with a free slot and how many leases to ask for, in turn (competing
   * consumers): its `max_in_flight` less the deliveries awaiting an answer and the leases it holds
   * after a 202, within its share of the connections (a held lease holds no connection).
   */
  #asks(): Array<{ sub: Subscription; n: number }> {
    const share = Math.max(1, Math.floor(this.#maxConnections / Math.max(1, this.#subs.length)));
    const subs = [...this.#subs.slice(this.#rotation), ...this.#subs.slice(0, this.#rotation)];
    const held = this.#heldBySub();
    const asks: Array<{ sub: Subscription; n: number }> = [];
    for (const sub of subs) {
      const posting = this.#inFlight.get(sub.name) ?? 0;
      const n = Math.min(sub.maxInFlight - (held.get(sub.name) ?? 0), share) - posting;
      if (n > 0) asks.push({ sub, n });
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
    // The slot frees once the consumer has answered: the claim that refills it is submitted in the
    // same tick as the ack or nack, so that both ride one batch.
    const free = () => {
      if (freed) return;
      freed = true;
      this.#inFlight.set(sub.name, (this.#inFlight.get(sub.name) ?? 1) - 1);
      this.#kick("full");
    };
    const p = this.#post(sub, lease, free)
      .catch((e) => console.error(`push: delivery of lease ${lease.id} to ${sub.name} failed`, e))
      .finally(() => {
        free();
        this.#deliveries.delete(p);
      });
    this.#deliveries.add(p);
  }

  async #post(sub: Subscription, lease: Lease, free: () => void): Promise<void> {
    // A put or delete since the claim: no delivery starts for a subscription that is gone.
    await this.#fresh();
    const current = this.#subs.find((s) => s.name === sub.name);
    if (current === undefined) {
      this.stats.released++;
      await this.#queue.release(lease);
      return;
    }
    const delivery: PushDelivery = {
      lease_id: lease.id,
      seq: lease.seq,
      group_id: lease.groupId,
      event: lease.event,
      attempts: lease.attempts,
      expires_at: lease.expiresAt,
      subscription: sub.name,
    };
    const body = JSON.stringify(delivery);
    let answer: Response | undefined;
    this.stats.posted++;
    this.#posting.set(lease.seq, false);
    try {
      answer = await this.#fetch(current.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          [SIGNATURE_HEADER]: await signPayload(current.signingSecret, body),
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
    } else {
      this.stats.retried++;
      const retryAfter = answer?.headers.get("retry-after") ?? null;
      settle = this.#queue.nack(lease, retryDelay(lease.attempts, retryAfter));
    }
    free();
    await settle;
  }

  /** While subscriptions exist: at the next known due moment, or at the re-check, whichever is first. */
  async #scheduleWake(): Promise<void> {
    if (this.#stopped || this.#subs.length === 0) return;
    await this.#arm(Date.now() + (await msUntilDue(this.#queue, this.#recheckMs)));
  }

  /** Asks to be woken at `at`, unless a wake is pending before it (an alarm set is a storage write). */
  async #arm(at: number): Promise<void> {
    if (this.#stopped) return;
    if (this.#wakeSetFor !== undefined && this.#wakeSetFor > Date.now() && this.#wakeSetFor <= at) return;
    this.#wakeSetFor = at;
    try {
      await this.#wakeAt(at);
    } catch (e) {
      this.#wakeSetFor = undefined;
      console.error("push: could not set the next wake", e);
    }
  }

  #timerAt(atMs: number): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        void this.wake();
      },
      Math.max(0, atMs - Date.now()),
    );
  }
}
