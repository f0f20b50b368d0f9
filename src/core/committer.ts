/**
 * The write path: every write is a list of statements that must run as one atomic
 * `client.batch(..., "write")`. The committer
 *  - keeps at most `maxInFlight` batches in flight (sqld degrades sharply with many writers waiting),
 *  - coalesces the writes that queue up meanwhile into the next single batch (group commit), each
 *    caller still getting its own answer and its own error,
 *  - retries what is safe to retry (SQLITE_BUSY, a refused connection; a lost response only for
 *    writes marked idempotent) with bounded, jittered backoff, until the caller's deadline,
 *  - puts a timeout on every request,
 *  - optionally holds the next batch a moment for the writers the last one answered (`holdMs`),
 *  - optionally keeps writes nothing waits on a moment for another write to ride with (`rideMs`),
 *  - puts claims (`last`) at the end of their batch, and lets its watchers (the Worker's writer)
 *    add claims for consumers that wait to a batch that may free a message, so that what it
 *    publishes or frees reaches them in its own round trip.
 *
 * A local file goes through the same loop (`InProcess`): its batch is a transaction run before the
 * call returns, so there is no request to time out and no answer to lose; BUSY (another process
 * holds the lock) is retried the same way.
 */
import type { Client, InStatement, ResultSet } from "@libsql/client";
import { backoff, RETRY_MS, sleepOrThrow, timeoutError } from "./backoff.js";
import { Deadlines } from "./deadlines.js";
import {
  type BatchWatcher,
  type Freed,
  failedWrite,
  type InProcess,
  newStats,
  type WriteEngine,
  type WriteSpec,
} from "./engine.js";
import { closed, isRetryable, QueueError, toQueueError } from "./errors.js";
import type { Health } from "./health.js";
import type { Send } from "./hrana.js";
import type { Plan } from "./sql/index.js";

export interface CommitterOptions {
  /** Write batches in flight at once. */
  maxInFlight: number;
  /** Most statements coalesced into one batch (a single larger write still goes alone). */
  maxBatchStatements: number;
  /** Budget for one HTTP request; past it the request is abandoned (its outcome unknown). */
  requestTimeoutMs: number;
  /** Budget for a whole call: queueing, every attempt and every backoff. */
  timeoutMs: number;
  /**
   * Most ms the next batch waits, once the last one is answered, for the callers it answered that
   * are expected back (`comesBack`) to send their next writes (0: never). Callers that answer over a
   * network (the Worker's clients) come back a moment after their answer; without a hold each batch
   * leaves with whoever queued meanwhile, and closed-loop callers split into two cohorts taking
   * turns, each batch half full. Capped by the last batch's own duration; after a hold that ends
   * with fewer than half of them back, holds pause for 1, 2, 4 ... 64 batches.
   */
  holdMs?: number;
  /**
   * Most ms the writes nothing waits on soon (`mayWait`: acks, nacks, releases) wait, when nothing
   * else is queued, for another write to ride with (0: never). Over a network each batch is a round
   * trip and a writer has one in flight: a publish that arrives while a lone ack's batch is out waits
   * for it, then takes a round trip of its own. Capped by the last batch's own duration; after a wait
   * that no other write ends, waits pause for 1, 2, 4 ... 64 chances (a consumer working one group's
   * backlog, whose next message waits for the ack, loses little).
   */
  rideMs?: number;
  /** Told of every request that failed with an outage, and of the next one answered. */
  health?: Health;
}

interface Pending<T> extends WriteSpec<T> {
  deadline: number;
  /** True once a request carrying this write was sent and its outcome is unknown. */
  maybeApplied: boolean;
  /** True while a request carrying this write is out. */
  sent: boolean;
  lastError?: QueueError;
  resolve: (v: T) => void;
  reject: (e: unknown) => void;
}

export class Committer implements WriteEngine {
  readonly #send: Send;
  readonly #inProcess: InProcess | undefined;
  readonly #opts: CommitterOptions;
  readonly #queue: Pending<unknown>[] = [];
  #inFlight = 0;
  #scheduled = false;
  readonly #deadlines = new Deadlines();
  #closed = false;
  /** Writes submitted so far, and the callers the last batch answered that are expected back. */
  #arrivals = 0;
  #awaited = { since: 0, count: 0 };
  #queuedStatements = 0;
  #hold: Hold | undefined;
  readonly #holds = new Patience();
  /** The wait of writes that may wait (`rideMs`): its timer. */
  #ride: ReturnType<typeof setTimeout> | undefined;
  readonly #rides = new Patience();
  /** How long the last batch took, from sent to answered. */
  #lastTookMs = 0;
  /** A wait for a ride just ended: what it gathered leaves now. */
  #waited = false;
  readonly #watchers = new Set<BatchWatcher>();
  /** Turns of the event loop the next batch waits for watchers taking in their answers. */
  #turns = 0;
  readonly stats = newStats();

  /**
   * `send` runs one atomic write batch as a request (by default `client.batch(stmts, "write")`), or
   * is the database in this process.
   */
  constructor(client: Client, opts: CommitterOptions, send?: Send | InProcess) {
    this.#inProcess = typeof send === "object" ? send : undefined;
    this.#send = typeof send === "function" ? send : (stmts) => client.batch(stmts, "write");
    this.#opts = opts;
  }

  submit<T>(spec: WriteSpec<T>): Promise<T> {
    if (this.#closed) return Promise.reject(closedError());
    return new Promise<T>((resolve, reject) => {
      // The deadline is kept by the committer's watch, so that no caller waits past it, even while
      // a request that carries its write is still out (that write's outcome is then unknown).
      const pending = {
        ...spec,
        deadline: Date.now() + this.#opts.timeoutMs,
        maybeApplied: false,
        sent: false,
        resolve: (v: unknown) => {
          this.#deadlines.end(due);
          resolve(v as T);
        },
        reject: (e: unknown) => {
          this.#deadlines.end(due);
          reject(e);
        },
      } as Pending<unknown>;
      const due = this.#deadlines.add("call", pending.deadline, () => this.#giveUp(pending));
      this.#queue.push(pending);
      this.#queuedStatements += pending.stmts.length;
      this.#arrivals++;
      if (this.#ride !== undefined && (!pending.mayWait || this.#full())) this.#endRide(true);
      const hold = this.#hold;
      if (hold !== undefined) {
        if (this.#arrivals < hold.until && !this.#full()) return;
        this.#endHold(true);
      }
      // Writes submitted in the same tick share a batch even when a slot is free.
      if (!this.#scheduled) {
        this.#scheduled = true;
        queueMicrotask(() => {
          this.#scheduled = false;
          this.#pump();
        });
      }
    });
  }

  watch(watcher: BatchWatcher): () => void {
    this.#watchers.add(watcher);
    return () => this.#watchers.delete(watcher);
  }

  close(): void {
    this.#closed = true;
    if (this.#hold !== undefined) clearTimeout(this.#hold.timer);
    this.#hold = undefined;
    if (this.#ride !== undefined) clearTimeout(this.#ride);
    this.#ride = undefined;
    this.#queuedStatements = 0;
    for (const p of this.#queue.splice(0)) p.reject(closedError());
  }

  /**
   * A batch came back and the slot is free: send what queued, or first wait (at most `holdMs`, at
   * most as long as that batch took) for the callers it answered that are expected back.
   */
  #afterBatch(tookMs: number): void {
    const holdMs = Math.min(this.#opts.holdMs ?? 0, tookMs);
    const { since, count } = this.#awaited;
    const until = since + count;
    const hold = holdMs > 0 && !this.#closed && this.#arrivals < until && this.#holds.take();
    if (!hold) {
      this.#pump();
      return;
    }
    this.stats.holds++;
    const from = this.#arrivals;
    const timer = setTimeout(() => {
      if (this.#hold?.timer !== timer) return;
      this.stats.holdsTimedOut++;
      // Fewer than half of the callers still awaited came back: they are not coming soon.
      this.#endHold(this.#arrivals - from >= (until - from) / 2);
      this.#pump();
    }, holdMs);
    this.#hold = { until, timer };
  }

  #endHold(worked: boolean): void {
    if (this.#hold !== undefined) clearTimeout(this.#hold.timer);
    this.#hold = undefined;
    this.#holds.ended(worked);
  }

  #full(): boolean {
    return this.#queuedStatements >= this.#opts.maxBatchStatements;
  }

  /**
   * Starts the wait of queued writes that may wait (`rideMs`) when they are all that is queued and a
   * batch could leave now; answers whether they wait.
   */
  #waitForRide(): boolean {
    const ms = Math.min(this.#opts.rideMs ?? 0, this.#lastTookMs);
    if (ms <= 0 || this.#closed || this.#inFlight >= this.#opts.maxInFlight) return false;
    if (this.#queue.length === 0 || !this.#queue.every((w) => w.mayWait) || !this.#rides.take()) return false;
    this.stats.rides++;
    const timer = setTimeout(() => {
      if (this.#ride !== timer) return;
      this.stats.ridesInVain++;
      this.#endRide(false);
      this.#pump();
    }, ms);
    this.#ride = timer;
    return true;
  }

  #endRide(worked: boolean): void {
    if (this.#ride !== undefined) clearTimeout(this.#ride);
    this.#ride = undefined;
    this.#waited = true;
    this.#rides.ended(worked);
  }

  #pump(): void {
    if (this.#hold !== undefined || this.#ride !== undefined || this.#turns > 0) return;
    if (!this.#waited && this.#waitForRide()) return;
    this.#waited = false;
    while (this.#inFlight < this.#opts.maxInFlight && this.#queue.length > 0) {
      let batch: Pending<unknown>[] = [];
      let statements = 0;
      while (this.#queue.length > 0) {
        const next = this.#queue[0] as Pending<unknown>;
        if (batch.length > 0 && statements + next.stmts.length > this.#opts.maxBatchStatements) break;
        batch.push(next);
        statements += next.stmts.length;
        this.#queue.shift();
      }
      this.#queuedStatements -= statements;
      const served = this.#watchers.size > 0 ? this.#leaving(batch) : undefined;
      if (needsReorder(batch)) batch = [...batch.filter((w) => !w.last), ...batch.filter((w) => w.last)];
      this.#inFlight++;
      const sentAt = Date.now();
      void this.#run(batch, served).finally(() => {
        this.#inFlight--;
        this.#lastTookMs = Date.now() - sentAt;
        const next = () => {
          if (this.#inFlight === 0) this.#afterBatch(Date.now() - sentAt);
          else this.#pump();
        };
        if (!this.#settling()) {
          next();
          return;
        }
        // Their answers' continuations run before a timer fires.
        this.#turns++;
        setTimeout(() => {
          this.#turns--;
          next();
        }, 0);
      });
    }
  }

  #settling(): boolean {
    for (const w of this.#watchers) if (w.settling?.()) return true;
    return false;
  }

  /**
   * Tells the watchers that `batch` is leaving; the writes they submit meanwhile join it (past
   * `maxBatchStatements` if need be: a round of claims goes with the write it serves). Answers the
   * watchers whose claims for everyone waiting are now in it.
   */
  #leaving(batch: Pending<unknown>[]): Set<BatchWatcher> {
    const mayFree = batch.some((w) => w.frees !== undefined);
    const queued = this.#queue.length;
    const served = new Set<BatchWatcher>();
    for (const watcher of this.#watchers) {
      try {
        if (watcher.leaving?.(mayFree)) served.add(watcher);
      } catch (e) {
        console.error("a batch watcher threw", e);
      }
    }
    for (const rider of this.#queue.splice(queued)) {
      batch.push(rider);
      this.#queuedStatements -= rider.stmts.length;
    }
    return served;
  }

  async #run(writes: Pending<unknown>[], served?: Set<BatchWatcher>): Promise<void> {
    let attempt = 0;
    let live = writes;
    for (;;) {
      live = this.#dropExpired(live);
      if (live.length === 0) return;
      if (this.#closed && attempt > 0) {
        for (const w of live) w.reject(closedError(w.maybeApplied));
        return;
      }
      let results: ResultSet[];
      const plans = live.map(current);
      for (const w of live) w.sent = true;
      try {
        results =
          this.#inProcess === undefined
            ? await this.#request(plans.flatMap((p) => p.stmts))
            : this.#inProcess.writeNow(plans);
      } catch (e) {
        for (const w of live) w.sent = false;
        const err = toQueueError(e);
        if (err.code === "BUSY") this.stats.busy++;
        this.#opts.health?.failed(err);
        if (!isRetryable(err)) {
          // The batch rolled back as a whole. When the database says which statement failed, only
          // the write that statement belongs to gets the error; the others go again, together.
          // Any other refusal (BLOCKED, UNAUTHORIZED) is the database's, and every write's.
          const at =
            live.length > 1 && err.code === "DATABASE"
              ? failedWrite(
                  plans.map((p) => p.stmts.length),
                  e,
                )
              : -1;
          if (at < 0) {
            for (const w of live) w.reject(err);
            return;
          }
          (live[at] as Pending<unknown>).reject(err);
          live = live.filter((_, i) => i !== at);
          continue;
        }
        if (err.outcomeUnknown) {
          // The batch may have committed: only idempotent writes may go again.
          for (const w of live) w.maybeApplied = true;
          for (const w of live.filter((w) => !w.idempotent)) w.reject(err);
          live = live.filter((w) => w.idempotent);
        }
        for (const w of live) w.lastError = err;
        attempt++;
        this.stats.retries++;
        // The database's Retry-After, when it named one, but never past the last of these calls.
        const asked = Math.min(err.retryAfterMs ?? 0, Math.max(...live.map((w) => w.deadline)) - Date.now());
        await sleepOrThrow(Math.max(backoff(attempt, RETRY_MS), asked));
        continue;
      }
      this.#opts.health?.answered();
      for (const w of live) w.sent = false;
      this.stats.batches++;
      this.stats.writes += live.length;
      this.stats.statements += results.length;
      let offset = 0;
      const since = this.#arrivals;
      let back = 0;
      const freed: Freed[] = [];
      live.forEach((w, i) => {
        const p = plans[i] as Plan<unknown>;
        const slice = results.slice(offset, offset + p.stmts.length);
        offset += p.stmts.length;
        try {
          const answer = p.read(slice, w.maybeApplied);
          if (w.comesBack?.(answer)) back++;
          const f = this.#watchers.size > 0 ? w.frees?.(answer) : undefined;
          if (f !== undefined) freed.push(f);
          w.resolve(answer);
        } catch (e) {
          w.reject(e);
        }
      });
      this.#awaited = { since, count: back };
      if (freed.length > 0) this.#tellFreed(freed, served);
      return;
    }
  }

  #tellFreed(freed: Freed[], served: Set<BatchWatcher> | undefined): void {
    for (const watcher of this.#watchers) {
      const rode = served?.has(watcher) === true;
      for (const f of freed) {
        try {
          watcher.changed(f.change, f.seq, rode);
        } catch (e) {
          console.error("a batch watcher threw", e);
        }
      }
    }
  }

  /**
   * One request, abandoned (TimeoutError, outcome unknown) past `requestTimeoutMs`; its connection
   * is dropped then, so that the next request goes out on a fresh one rather than behind it.
   */
  #request(stmts: InStatement[]): Promise<ResultSet[]> {
    const ms = this.#opts.requestTimeoutMs;
    const abandon = new AbortController();
    return new Promise((resolve, reject) => {
      const due = this.#deadlines.add("request", Date.now() + ms, () => {
        const e = timeoutError(ms);
        reject(e);
        abandon.abort(e);
      });
      this.#send(stmts, abandon.signal).then(
        (r) => {
          this.#deadlines.end(due);
          resolve(r);
        },
        (e) => {
          this.#deadlines.end(due);
          reject(e);
        },
      );
    });
  }

  #dropExpired(writes: Pending<unknown>[]): Pending<unknown>[] {
    const now = Date.now();
    return writes.filter((w) => {
      if (now < w.deadline) return true;
      this.#giveUp(w);
      return false;
    });
  }

  /** Fails a write at its deadline (a no-op once it has settled). */
  #giveUp(w: Pending<unknown>): void {
    const last = w.lastError;
    w.reject(
      new QueueError(
        last?.code === "BUSY" ? "BUSY" : "TIMEOUT",
        `gave up after ${this.#opts.timeoutMs} ms${last ? ` (last error: ${last.message})` : ""}`,
        { cause: last, outcomeUnknown: w.maybeApplied || w.sent, retryAfterMs: last?.retryAfterMs },
      ),
    );
  }
}

/** Whether a write marked `last` comes before one that is not. */
function needsReorder(batch: Pending<unknown>[]): boolean {
  let seenLast = false;
  for (const w of batch) {
    if (w.last) seenLast = true;
    else if (seenLast) return true;
  }
  return false;
}

const closedError = (outcomeUnknown = false) => closed({ outcomeUnknown });

/** The plan a write sends now: its resend plan once an earlier request may have applied. */
const current = (w: Pending<unknown>): Plan<unknown> => (w.maybeApplied && w.resend ? w.resend : w);

/**
 * A wait that may be in vain: after one that was, the next 1, 2, 4 ... 64 chances to wait are let
 * go; one that worked starts that count again.
 */
class Patience {
  #skip = 0;
  #nextPause = 1;

  /** Whether this chance to wait is taken. */
  take(): boolean {
    if (this.#skip === 0) return true;
    this.#skip--;
    return false;
  }

  ended(worked: boolean): void {
    if (worked) {
      this.#nextPause = 1;
    } else {
      this.#skip = this.#nextPause;
      this.#nextPause = Math.min(64, this.#nextPause * 2);
    }
  }
}

interface Hold {
  /** The count of arrivals that ends it. */
  until: number;
  timer: ReturnType<typeof setTimeout>;
}
