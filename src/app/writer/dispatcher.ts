/**
 * Long-poll claims inside the QueueWriter (the database's single writer).
 *
 * Waiters are held in arrival order, each with its own worker, visibility, priority floor and
 * count. A newcomer gets one claim of its own; after that the dispatcher claims again only when
 * something may have become deliverable: after a write through this transport (`onChange`: a
 * publish, an ack, a nack, a redrive, a release) for all waiters at once (their claims ride one
 * write batch, in arrival order, so the first to come is served first); and when the database says
 * a lease, a park or a delayed message comes due, or at a bounded safety re-check for writers that
 * bypass the Worker (the library elsewhere, the spec's Python transports), with one probing claim
 * for the least picky waiter, followed by a full round only if it found something. With nothing
 * changing, an idle fleet of waiters costs one claim per re-check interval, whatever its size,
 * instead of one per waiter per poll.
 *
 * A waiter that goes away (its request aborted) before its claim answered gets nothing, and the
 * leases taken for it are released at once; if the runtime never says, they lapse at the end of
 * their visibility like any lease.
 */
import type { Lease, LibsqlTransport } from "../../core/transport.js";
import { msUntilDue } from "./due.js";

export interface WaitRequest {
  workerId: string;
  visibility: number;
  /** Leases wanted, in distinct groups; the waiter is answered with what one claim got (1 or more). */
  n: number;
  minPriority: number;
  waitMs: number;
  signal?: AbortSignal | undefined;
}

interface Waiter extends WaitRequest {
  resolve(leases: Lease[]): void;
  reject(e: unknown): void;
  timer: ReturnType<typeof setTimeout> | undefined;
  onAbort: () => void;
  done: boolean;
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

export class Dispatcher {
  readonly #queue: LibsqlTransport;
  readonly #recheckMs: number;
  #waiters: Waiter[] = [];
  #running = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  readonly stats: DispatcherStats = { rounds: 0, claims: 0, released: 0 };

  constructor(queue: LibsqlTransport, recheckMs: number) {
    this.#queue = queue;
    this.#recheckMs = recheckMs;
    queue.onChange(() => {
      if (this.#waiters.length > 0) this.#kick("write");
    });
  }

  /** Waiters not answered yet. */
  get waiting(): number {
    return this.#waiters.length;
  }

  /** Resolves with the leases claimed for this waiter, or none when its wait ends or it goes away. */
  wait(req: WaitRequest): Promise<Lease[]> {
    return new Promise<Lease[]>((resolve, reject) => {
      if (req.signal?.aborted) {
        resolve([]);
        return;
      }
      const w: Waiter = { ...req, resolve, reject, timer: undefined, onAbort: () => {}, done: false };
      w.onAbort = () => this.#settle(w, []);
      w.timer = setTimeout(w.onAbort, req.waitMs);
      req.signal?.addEventListener("abort", w.onAbort, { once: true });
      this.#waiters.push(w);
      this.#kick("arrival", w);
    });
  }

  #settle(w: Waiter, leases: Lease[], error?: unknown): void {
    if (w.done) return;
    w.done = true;
    clearTimeout(w.timer);
    w.signal?.removeEventListener("abort", w.onAbort);
    this.#waiters = this.#waiters.filter((x) => x !== w);
    if (this.#waiters.length === 0) this.#stopTimer();
    if (error === undefined) w.resolve(leases);
    else w.reject(error);
  }

  /**
   * What the next round claims for: `full`, every waiter in arrival order (a write through the
   * writer may have freed several messages); `probe`, only the least picky waiter (a timer fired:
   * if even it finds nothing, so would everyone else, at the cost of one claim instead of one per
   * waiter; if it finds something, a full round follows); otherwise the waiters that just arrived
   * (a claim of their own, as without a wait: the others were served or checked since the last change).
   */
  #full = false;
  #probe = false;
  #arrivals: Waiter[] = [];

  #kick(why: "arrival" | "write" | "timer", w?: Waiter): void {
    if (why === "write") this.#full = true;
    else if (why === "timer") this.#probe = true;
    else if (w) this.#arrivals.push(w);
    if (!this.#running) void this.#run();
  }

  #nextRound(): { round: Waiter[]; probe: boolean } | undefined {
    if (this.#waiters.length === 0) {
      this.#full = this.#probe = false;
      this.#arrivals = [];
      return undefined;
    }
    if (this.#full) {
      this.#full = this.#probe = false;
      this.#arrivals = [];
      return { round: [...this.#waiters], probe: false };
    }
    if (this.#probe) {
      this.#probe = false;
      const least = this.#waiters.reduce((a, b) => (b.minPriority < a.minPriority ? b : a));
      return { round: [least], probe: true };
    }
    const round = this.#arrivals.filter((w) => !w.done);
    this.#arrivals = [];
    return round.length > 0 ? { round, probe: false } : undefined;
  }

  async #run(): Promise<void> {
    this.#running = true;
    try {
      for (let next = this.#nextRound(); next; next = this.#nextRound()) {
        const { round, probe } = next;
        this.#stopTimer();
        this.stats.rounds++;
        this.stats.claims += round.length;
        // Submitted in one tick: the committer sends them in one batch, in this order.
        const results = await Promise.allSettled(
          round.map((w) => this.#queue.claimMany(w.workerId, w.visibility, w.n, w.minPriority)),
        );
        round.forEach((w, i) => {
          const r = results[i] as PromiseSettledResult<Lease[]>;
          if (r.status === "rejected") {
            this.#settle(w, [], r.reason);
            return;
          }
          if (r.value.length === 0) return;
          if (probe) this.#full = true;
          if (w.done) {
            this.#giveBack(r.value);
            return;
          }
          this.#settle(w, r.value);
        });
      }
    } finally {
      this.#running = false;
    }
    if (this.#waiters.length > 0) await this.#scheduleNext();
  }

  #giveBack(leases: Lease[]): void {
    for (const lease of leases) {
      this.stats.released++;
      this.#queue.release(lease).catch((e) => console.error("release of an abandoned waiter's lease failed", e));
    }
  }

  /** The next round: when something held by time comes due, or at the safety re-check. */
  async #scheduleNext(): Promise<void> {
    const ms = await msUntilDue(this.#queue, this.#recheckMs);
    if (this.#running || this.#waiters.length === 0) return;
    this.#stopTimer();
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#kick("timer");
    }, ms);
  }

  #stopTimer(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

// A writer keeps its transports for its life (one per database): so does this map.
const byTransport = new Map<LibsqlTransport, Dispatcher>();

/** Every dispatcher of this isolate (for tests and counters). */
export const dispatchers = (): Dispatcher[] => [...byTransport.values()];

/** The dispatcher of a shared transport (one per transport, built on first use). */
export function dispatcherFor(queue: LibsqlTransport, recheckMs: number): Dispatcher {
  let d = byTransport.get(queue);
  if (d === undefined) {
    d = new Dispatcher(queue, recheckMs);
    byTransport.set(queue, d);
  }
  return d;
}
