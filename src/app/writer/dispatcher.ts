/**
 * Long-poll claims inside the QueueWriter (the database's single writer).
 *
 * Waiters are held in arrival order (when their request reached the API, `since`: a sharded long
 * poll reaches each shard's writer a moment after a later, quicker one may have), each with its own
 * worker, visibility, priority floor and count. When to claim for them is the scheduler's (src/app/writer/scheduler.ts): a newcomer gets
 * one claim of its own; a write through this transport, a claim for every waiter in that write's
 * own batch, after it, in arrival order (the first to come is served first); a due moment or the
 * safety re-check, one probing claim for the least picky waiter, then a full round only if it
 * found something. An idle fleet of waiters costs one claim per re-check, whatever its size.
 *
 * A waiter that goes away (its request aborted) is answered with nothing at once, and the leases a
 * claim out for it brings are released as it answers; if the runtime never says, they lapse at the
 * end of their visibility like any lease. A waiter whose time is up, or whose caller ends its wait
 * (another shard of its queue answered first), while a claim for it is out gets what that claim
 * brings, a moment later: its caller, still there, keeps it or gives it back before it answers its
 * own client. A called-off waiter waits so for `CALLED_OFF_MS` at most: a claim held up by a failing
 * database must not hold up its caller, who holds another shard's lease meanwhile; then it is
 * answered with nothing, and what the claim brings is released.
 *
 * A dispatcher lives as long as its transport, but listens to it (and keeps a timer) only while it
 * holds waiters: an idle one is referenced by nothing but its registry's WeakMap entry.
 */
import type { LibsqlTransport } from "../../core/transport.js";
import type { Lease } from "../../core/types.js";
import { Scheduler } from "./scheduler.js";

export interface WaitRequest {
  workerId: string;
  visibility: number;
  /** Leases wanted, in distinct groups; the waiter is answered with what one claim got (1 or more). */
  n: number;
  minPriority: number;
  waitMs: number;
  /** Aborted when its caller goes away: what a claim out for it brings is released. */
  signal?: AbortSignal | undefined;
  /**
   * Aborted when its caller ends the wait: it is answered with what a claim out for it brings within
   * `CALLED_OFF_MS`, or else with nothing (what that claim brings is then released).
   */
  end?: AbortSignal | undefined;
  /** When its request arrived (ms since the epoch; default: now): its place among the waiters. */
  since?: number | undefined;
}

interface Waiter extends WaitRequest {
  since: number;
  resolve(leases: Lease[]): void;
  reject(e: unknown): void;
  timer: ReturnType<typeof setTimeout> | undefined;
  onAbort: () => void;
  onCallOff: () => void;
  done: boolean;
  /** A claim for it is out. */
  claiming: boolean;
  /** Its wait is over: it is answered with what its claim out brings. */
  ending: boolean;
}

/** Counters, for tests and the bench. */
export interface DispatcherStats {
  /** Claim rounds (each one write batch holding one claim per waiter it serves). */
  rounds: number;
  /** Claims sent in those rounds. */
  claims: number;
  /** Leases released because their waiter had gone. */
  released: number;
}

/** How long a called-off waiter waits for the claim out for it (see above). */
export const CALLED_OFF_MS = 1_000;

/** Dispatchers holding waiters (what `dispatchers()` lists); an idle one leaves it. */
const holding = new Set<Dispatcher>();

export class Dispatcher {
  readonly #queue: LibsqlTransport;
  readonly #scheduler: Scheduler<Waiter>;
  #waiters: Waiter[] = [];
  #stopped = false;
  readonly stats: DispatcherStats = { rounds: 0, claims: 0, released: 0 };

  constructor(queue: LibsqlTransport, recheckMs: number) {
    this.#queue = queue;
    this.#scheduler = new Scheduler<Waiter>(
      queue,
      {
        active: () => this.#waiters.length > 0,
        asks: () => this.#waiters.filter((w) => !w.claiming && !w.ending),
        claiming: (w) => {
          w.claiming = true;
        },
        took: (w, got) => {
          w.claiming = false;
          this.#took(w, got);
          return false;
        },
      },
      { name: "long poll", recheckMs, stats: this.stats },
    );
  }

  /** Whether claims for its waiters, or the next wake's arming, are under way. */
  get busy(): boolean {
    return this.#scheduler.busy;
  }

  /** Waiters not answered yet. */
  get waiting(): number {
    return this.#waiters.length;
  }

  /** Resolves with the leases claimed for this waiter, or none when its wait ends, it goes away or the dispatcher stops. */
  wait(req: WaitRequest): Promise<Lease[]> {
    return new Promise<Lease[]>((resolve, reject) => {
      if (req.signal?.aborted || req.end?.aborted || this.#stopped) {
        resolve([]);
        return;
      }
      const w: Waiter = {
        ...req,
        since: req.since ?? Date.now(),
        resolve,
        reject,
        timer: undefined,
        onAbort: () => {},
        onCallOff: () => {},
        done: false,
        claiming: false,
        ending: false,
      };
      w.onAbort = () => this.#settle(w, []);
      w.onCallOff = () => this.#end(w, CALLED_OFF_MS);
      w.timer = setTimeout(() => this.#end(w), req.waitMs);
      req.signal?.addEventListener("abort", w.onAbort, { once: true });
      req.end?.addEventListener("abort", w.onCallOff, { once: true });
      // After every waiter that arrived before it (most often: at the end).
      let at = this.#waiters.length;
      while (at > 0 && (this.#waiters[at - 1] as Waiter).since > w.since) at--;
      this.#waiters.splice(at, 0, w);
      if (this.#waiters.length === 1) {
        holding.add(this);
        this.#scheduler.listen();
      }
      void this.#scheduler.kick("arrival", w);
    });
  }

  /**
   * Answers every waiter (with nothing, or with `error`: its queue was deleted), and stops listening
   * and waking for good (its transport is done). What a claim still out takes is given back.
   */
  stop(error?: unknown): void {
    this.#stopped = true;
    for (const w of [...this.#waiters]) this.#settle(w, [], error);
    this.#scheduler.stop();
    holding.delete(this);
    if (byTransport.get(this.#queue) === this) byTransport.delete(this.#queue);
  }

  #took(w: Waiter, got: PromiseSettledResult<Lease[]>): void {
    if (got.status === "rejected") this.#settle(w, [], w.ending ? undefined : got.reason);
    else if (w.done) this.#giveBack(got.value);
    else if (got.value.length > 0 || w.ending) this.#settle(w, got.value);
  }

  /**
   * Its wait is over: answered now, or with what its claim out brings; within `atMost` ms, if
   * given, or else with nothing (what the claim brings is then released).
   */
  #end(w: Waiter, atMost?: number): void {
    if (w.done) return;
    if (!w.claiming) {
      this.#settle(w, []);
      return;
    }
    w.ending = true;
    if (w.timer !== undefined) clearTimeout(w.timer);
    w.timer = atMost === undefined ? undefined : setTimeout(() => this.#settle(w, []), atMost);
  }

  #settle(w: Waiter, leases: Lease[], error?: unknown): void {
    if (w.done) return;
    w.done = true;
    if (w.timer !== undefined) clearTimeout(w.timer);
    w.signal?.removeEventListener("abort", w.onAbort);
    w.end?.removeEventListener("abort", w.onCallOff);
    this.#waiters = this.#waiters.filter((x) => x !== w);
    if (this.#waiters.length === 0) {
      // Nobody left to serve: no listener or timer keeps this dispatcher (or its transport) alive.
      holding.delete(this);
      this.#scheduler.rest();
    }
    if (error === undefined) w.resolve(leases);
    else w.reject(error);
  }

  #giveBack(leases: Lease[]): void {
    for (const lease of leases) {
      this.stats.released++;
      this.#queue.release(lease).catch((e) => console.error("release of an abandoned waiter's lease failed", e));
    }
  }
}

// Weak: a transport dropped takes its dispatcher with it.
const byTransport = new WeakMap<LibsqlTransport, Dispatcher>();

/** The dispatchers of this isolate that hold waiters (tests and counters). */
export const dispatchers = (): Dispatcher[] => [...holding];

/** The dispatcher of a shared transport (one per transport, built on first use, or again after a `stop()`). */
export function dispatcherFor(queue: LibsqlTransport, recheckMs: number): Dispatcher {
  let d = byTransport.get(queue);
  if (d === undefined) {
    d = new Dispatcher(queue, recheckMs);
    byTransport.set(queue, d);
  }
  return d;
}
