/**
 * When the QueueWriter claims for consumers that do not poll (long-poll waiters, push
 * subscriptions): the machinery the dispatcher and the pusher share. Each brings its asks (one
 * claim's worth: a waiter, a subscription with free slots) and what to do with what a claim got;
 * the scheduler decides when to claim and for whom:
 *
 * - when a write batch that may free a message leaves (a publish, an ack, a nack, a redrive, a
 *   release), a full round in that very batch: one claim per ask, after its writes, in the asks'
 *   order, so that what the batch publishes or frees reaches a waiting consumer in its own round
 *   trip. If some ask's claim is still out in an earlier batch, or the owner must first prepare,
 *   a full round follows once the batch commits instead (`onChange`);
 * - when a wake fires (a lease, a park or a delayed message comes due, or the safety re-check for
 *   writers that bypass the Worker), a probe: one claim for the least picky ask. If even it finds
 *   nothing, so would the others; if it finds something, a full round follows. An idle fleet
 *   costs one claim per wake, whatever its size;
 * - on an arrival, a claim for the newcomer alone (the others were served or checked since the
 *   last change), unless a claim with a floor as low as its own found the queue short since then
 *   (no write through the transport, no wake): it would find nothing either, and waits like the
 *   others for the next change.
 *
 * One round runs at a time (a round riding a batch aside); kicks meanwhile are remembered and
 * served by the next. An ask whose claim is out is in no other round until its answer is taken in.
 * After the rounds, while its owner is active, the next wake is asked for: by a timer, or by
 * `wakeAt` (the Durable Object's alarm, which outlives an eviction).
 */
import { type Change, internalsOf } from "../../core/internals.js";
import type { LibsqlTransport } from "../../core/transport.js";
import type { Lease } from "../../core/types.js";

/** One claim's worth. */
export interface Ask {
  workerId: string;
  visibility: number;
  n: number;
  minPriority: number;
}

/** The owner of the asks: the dispatcher (waiters) or the pusher (subscriptions). */
export interface Claimer<A extends Ask> {
  /** Whether anyone is served: writes start rounds, and wakes are asked for, only then. */
  active(): boolean;
  /**
   * Everyone a full round claims for, in the order their claims ride the batch: none whose claim
   * is out (from `claiming` until `took`).
   */
  asks(): A[];
  /** A claim for `ask` is sent; its answer comes to `took`. */
  claiming?(ask: A): void;
  /** What one claim got. True when there may be more for the others: a full round follows. */
  took(ask: A, got: PromiseSettledResult<Lease[]>): boolean;
  /**
   * Before each round, what must be done first (the pusher reads its subscriptions again when they
   * changed); nothing when a round may start at once (only then may one ride a batch).
   */
  prepare?(): Promise<void> | undefined;
  /** A wake fired, before its probe. */
  woken?(): void;
  /**
   * A write through the transport freed something (`seq`: the lease it settled). True when that
   * gives the asks more room (a slot held by that lease): a full round follows even if one rode the
   * write's batch.
   */
  changed?(change: Change, seq: number | undefined): boolean;
}

/** Why a round is wanted: a write (a full round), a wake (a probe), a newcomer (its own claim). */
export type Kick = "write" | "timer" | "arrival";

export interface SchedulerOptions {
  /** Names the owner in logs. */
  name: string;
  /** Longest time without a claim while active (the safety re-check), in ms. */
  recheckMs: number;
  /** Asks for `wake()` at this time (ms since the epoch); the default is a timer, which dies with the process. */
  wakeAt?: ((atMs: number) => unknown) | undefined;
  /** Counted here: claim rounds (one write batch each) and the claims in them. */
  stats: { rounds: number; claims: number };
}

/** A claim sent for an ask and not answered yet. */
interface Out {
  /** It left in a batch. */
  sent: boolean;
  /** The epoch when it was submitted, or when its batch left. */
  epoch: number;
}

/** After a known due moment, wait this much more (the database's clock may run behind ours). */
const DUE_SLACK_MS = 20;

/**
 * Milliseconds until the next lease expiry, park end or delayed message the database knows of, or
 * `recheckMs`, whichever comes first.
 */
export async function msUntilDue(queue: LibsqlTransport, recheckMs: number): Promise<number> {
  try {
    const { next, now } = await queue.nextDueAt();
    // A due moment already past that the claims did not take (held by a priority floor) says nothing new.
    if (next !== null && next > now) return Math.min(recheckMs, Math.ceil((next - now) * 1000) + DUE_SLACK_MS);
  } catch {
    // The re-check will tell.
  }
  return recheckMs;
}

/** The least picky ask (the lowest priority floor; the first of equals): what a probe claims for. */
export const leastPicky = <A extends Ask>(asks: A[]): A | undefined =>
  asks.reduce<A | undefined>((a, b) => (a === undefined || b.minPriority < a.minPriority ? b : a), undefined);

export class Scheduler<A extends Ask> {
  readonly #queue: LibsqlTransport;
  readonly #claimer: Claimer<A>;
  readonly #name: string;
  readonly #recheckMs: number;
  readonly #wakeAt: (atMs: number) => unknown;
  readonly #stats: { rounds: number; claims: number };
  // What the next rounds owe: a full round outranks a probe, which outranks the arrivals' own claims.
  #full = false;
  #probe = false;
  #arrivals: A[] = [];
  #running = false;
  /** The run serving kicks now (its rounds, then the next wake); each run bumps the generation. */
  #current: Promise<void> | undefined;
  #generation = 0;
  readonly #runs = new Set<Promise<void>>();
  #off: (() => void) | undefined;
  /** Claims submitted and not answered yet: whether each has left in a batch, and the epoch it saw. */
  readonly #out = new Set<Out>();
  /**
   * Bumped by each batch that may free a message as it leaves, and by each wake: what a claim found
   * holds until the next bump (a claim sees the writes of its own batch).
   */
  #epoch = 0;
  /** The lowest floor at which a claim found the queue short in this epoch. */
  #shortAt = { epoch: -1, floor: Number.POSITIVE_INFINITY };
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** The wake asked for and not yet fired: an earlier one makes a later request needless (an alarm set is a storage write). */
  #wakeSetFor: number | undefined;
  #stopped = false;

  constructor(queue: LibsqlTransport, claimer: Claimer<A>, options: SchedulerOptions) {
    this.#queue = queue;
    this.#claimer = claimer;
    this.#name = options.name;
    this.#recheckMs = options.recheckMs;
    this.#stats = options.stats;
    this.#wakeAt = options.wakeAt ?? ((at) => this.#timerAt(at));
  }

  /** Whether a run (rounds, or asking for the next wake) or a round riding a batch is under way. */
  get busy(): boolean {
    return this.#runs.size > 0;
  }

  /** Hears the writes through the transport (idempotent). */
  listen(): void {
    if (this.#off !== undefined || this.#stopped) return;
    this.#off = internalsOf(this.#queue).onChange({
      leaving: (mayFree) => this.#leaving(mayFree),
      changed: (change, seq, served) => {
        const grew = this.#claimer.changed?.(change, seq) === true;
        if ((grew || !served) && this.#claimer.active()) void this.kick("write");
      },
      // Answers to claims sent are taken in before the next batch leaves (who still waits).
      settling: () => {
        for (const c of this.#out) if (c.sent) return true;
        return false;
      },
    });
  }

  /**
   * Nobody to serve: stops hearing writes and cancels the timer, so that nothing holds the owner
   * (`listen()` again for the next one). A round under way ends after its claims.
   */
  rest(): void {
    // Changes go unheard from now on: what claims found no longer holds.
    this.#epoch++;
    this.#off?.();
    this.#off = undefined;
    this.#full = this.#probe = false;
    this.#arrivals = [];
    this.#cancelTimer();
    this.#wakeSetFor = undefined;
  }

  /** For good: no more rounds or wakes. */
  stop(): void {
    this.#stopped = true;
    this.rest();
  }

  /** Asks for a round; resolves when the run that serves it is over. */
  kick(why: Exclude<Kick, "arrival">): Promise<void>;
  kick(why: "arrival", ask: A): Promise<void>;
  kick(why: Kick, ask?: A): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    if (why === "write") this.#full = true;
    else if (why === "timer") this.#probe = true;
    else if (ask !== undefined) this.#arrivals.push(ask);
    if (!this.#running) {
      const run = this.#run();
      this.#current = run;
      this.#runs.add(run);
      void run.finally(() => this.#runs.delete(run));
    }
    return this.#current ?? Promise.resolve();
  }

  /** The wake asked for (timer, alarm, cron): a probe. Resolves when its run is over. */
  wake(): Promise<void> {
    this.#wakeSetFor = undefined;
    this.#epoch++;
    if (this.#stopped) return Promise.resolve();
    this.#claimer.woken?.();
    return this.kick("timer");
  }

  /** Resolves when no run is under way. */
  async settled(): Promise<void> {
    while (this.#runs.size > 0) await Promise.allSettled([...this.#runs]);
  }

  /** Asks to be woken at `at` (ms since the epoch), unless a wake is pending before it. */
  async arm(at: number): Promise<void> {
    if (this.#stopped) return;
    if (this.#wakeSetFor !== undefined && this.#wakeSetFor > Date.now() && this.#wakeSetFor <= at) return;
    this.#wakeSetFor = at;
    try {
      await this.#wakeAt(at);
    } catch (e) {
      this.#wakeSetFor = undefined;
      console.error(`${this.#name}: could not set the next wake`, e);
    }
  }

  async #run(): Promise<void> {
    this.#running = true;
    const generation = ++this.#generation;
    try {
      for (let kind = this.#next(); kind !== undefined; kind = this.#next()) await this.#round(kind);
    } catch (e) {
      // Pending kicks stay for the next run; the wake below retries meanwhile.
      console.error(`${this.#name}: round failed`, e);
    } finally {
      this.#running = false;
    }
    // Outside the running flag: a kick meanwhile claims at once instead of waiting for this read.
    await this.#scheduleAfter(generation);
  }

  #next(): "full" | "probe" | "arrivals" | undefined {
    if (this.#stopped) return undefined;
    if (this.#full) {
      this.#full = this.#probe = false;
      this.#arrivals = [];
      return "full";
    }
    if (this.#probe) {
      this.#probe = false;
      return "probe";
    }
    return this.#arrivals.length > 0 ? "arrivals" : undefined;
  }

  /**
   * A batch leaves: our claims submitted until now go in it. If it may free a message, a full
   * round joins it at its end, for every ask whose claim is not out. Answers whether every ask then
   * has a claim after its writes (none still out in an earlier batch).
   */
  #leaving(mayFree: boolean): boolean {
    if (mayFree) this.#epoch++;
    let earlier = false;
    for (const c of this.#out) {
      if (c.sent) earlier = true;
      c.sent = true;
      c.epoch = this.#epoch;
    }
    if (!mayFree || this.#stopped || !this.#claimer.active()) return false;
    const preparing = this.#claimer.prepare?.();
    if (preparing !== undefined) {
      // The round that follows the commit awaits it.
      preparing.catch(() => {});
      return false;
    }
    const round = [...this.#claimer.asks()];
    if (round.length > 0) {
      const ride = this.#claimFor(round, false).then(
        (more) => {
          if (more) void this.kick("write");
        },
        (e) => console.error(`${this.#name}: round failed`, e),
      );
      this.#runs.add(ride);
      void ride.finally(() => this.#runs.delete(ride));
      for (const c of this.#out) {
        c.sent = true;
        c.epoch = this.#epoch;
      }
    }
    if (earlier) return false;
    // A full round owed for earlier writes is this one.
    this.#full = false;
    return true;
  }

  async #round(kind: "full" | "probe" | "arrivals"): Promise<void> {
    const preparing = this.#claimer.prepare?.();
    if (preparing !== undefined) await preparing;
    // A snapshot: asks that arrive while the claims are out are the next round's.
    const all = [...this.#claimer.asks()];
    let round = all;
    if (kind === "probe") {
      const least = leastPicky(all);
      round = least === undefined ? [] : [least];
    } else if (kind === "arrivals") {
      const current = new Set(all);
      const short = this.#shortAt.epoch === this.#epoch ? this.#shortAt.floor : Number.POSITIVE_INFINITY;
      round = this.#arrivals.filter((a) => current.has(a) && a.minPriority < short);
      this.#arrivals = [];
    }
    if (round.length === 0) return;
    if (await this.#claimFor(round, kind === "probe")) this.#full = true;
  }

  /**
   * Claims for `round`, each answer to its owner; true when a full round should follow (an owner
   * says there may be more, or a probe found something).
   */
  async #claimFor(round: A[], probe: boolean): Promise<boolean> {
    this.#stats.rounds++;
    this.#stats.claims += round.length;
    const out = round.map((a) => {
      this.#claimer.claiming?.(a);
      const c: Out = { sent: false, epoch: this.#epoch };
      this.#out.add(c);
      return c;
    });
    // Submitted in one tick (before this returns: a round riding a batch joins it): the committer
    // sends them in one batch, in this order.
    const results = await Promise.allSettled(
      round.map((a) => this.#queue.claimMany(a.workerId, a.visibility, a.n, a.minPriority)),
    );
    let more = false;
    round.forEach((a, i) => {
      const c = out[i] as Out;
      this.#out.delete(c);
      const got = results[i] as PromiseSettledResult<Lease[]>;
      if (got.status === "fulfilled" && got.value.length < a.n && c.epoch === this.#epoch) this.#short(a.minPriority);
      if (this.#claimer.took(a, got)) more = true;
      if (probe && got.status === "fulfilled" && got.value.length > 0) more = true;
    });
    return more;
  }

  /** A claim at `floor` found fewer messages than it asked for, with nothing changed since it was sent. */
  #short(floor: number): void {
    if (this.#shortAt.epoch !== this.#epoch) this.#shortAt = { epoch: this.#epoch, floor };
    else this.#shortAt.floor = Math.min(this.#shortAt.floor, floor);
  }

  /** The next wake, while active: the next due moment or the re-check. A run started since then asks for its own. */
  async #scheduleAfter(generation: number): Promise<void> {
    if (this.#stopped || !this.#claimer.active()) return;
    const ms = await msUntilDue(this.#queue, this.#recheckMs);
    if (generation !== this.#generation || this.#stopped || !this.#claimer.active()) return;
    await this.arm(Date.now() + ms);
  }

  #timerAt(atMs: number): void {
    this.#cancelTimer();
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        void this.wake();
      },
      Math.max(0, atMs - Date.now()),
    );
  }

  #cancelTimer(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
