/**
 * A writer's counters, for `/metrics` and the dashboard's charts: what went through its transport
 * (messages published, acked, nacked, dead-lettered, released; claim-to-ack times as a histogram),
 * what its pusher delivered, its database's health (requests failed by outage, recoveries; each
 * outage's start and end also logged once), and a sample of the queue's state each `sampleMs` while it is active
 * (the last `keep` of them: an hour at the default minute). Kept where it outlives the writer (the
 * Durable Object's storage, saved a second after each change), so that an eviction loses nothing.
 *
 * A sample costs one read of the queue's counts (stats) and is taken only when something happens
 * (a write through the writer, a look at the history): an idle queue costs nothing, and its chart
 * carries its last known state forward.
 */
import type { HealthEvent } from "../../core/health.js";
import { internalsOf } from "../../core/internals.js";
import type { LibsqlTransport } from "../../core/transport.js";
import type { QueueHistory, QueueSample } from "../../core/types.js";

/** Upper bounds of the claim-to-ack histogram's buckets, in seconds. */
export const HELD_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

export interface Counters {
  published: number;
  acked: number;
  nacked: number;
  deadLettered: number;
  released: number;
  pushed: number;
  pushFailures: number;
  /** Requests to the database that failed with an outage, by code (src/core/health.ts). */
  dbUnavailable: number;
  dbTimeouts: number;
  dbBlocked: number;
  /** Times the database answered again after failing. */
  dbRecoveries: number;
  /** Schedule ticks published. */
  scheduled: number;
}

/** The counters and the claim-to-ack histogram: what `/metrics` reports of a writer. */
export interface MeterReading {
  counters: Counters;
  /** Claim to ack, in seconds: how many fell in each of HELD_BUCKETS (and past the last), their sum. */
  held: { counts: number[]; sum: number; count: number };
}

/** What is kept: the reading and the samples. */
export interface MeterSnapshot extends MeterReading {
  samples: QueueSample[];
}

/** Samples kept: an hour at the default QUEUE_SAMPLE_SECONDS. */
export const SAMPLES_KEPT = 60;

/** Where a snapshot outlives its writer. */
export interface MeterStore {
  load(): Promise<MeterSnapshot | undefined>;
  save(snapshot: MeterSnapshot): Promise<void>;
}

const empty = (): MeterSnapshot => ({
  counters: {
    published: 0,
    acked: 0,
    nacked: 0,
    deadLettered: 0,
    released: 0,
    pushed: 0,
    pushFailures: 0,
    dbUnavailable: 0,
    dbTimeouts: 0,
    dbBlocked: 0,
    dbRecoveries: 0,
    scheduled: 0,
  },
  held: { counts: Array(HELD_BUCKETS.length + 1).fill(0), sum: 0, count: 0 },
  samples: [],
});

/** Readings added up: a sharded queue's writers', or what was stored and what was counted since. */
export function addReadings(all: MeterReading[]): MeterReading {
  const { counters, held } = empty();
  for (const r of all) {
    for (const k of Object.keys(counters) as Array<keyof Counters>) counters[k] += r.counters[k] ?? 0;
    r.held.counts.forEach((n, i) => {
      if (i < held.counts.length) held.counts[i] = (held.counts[i] ?? 0) + n;
    });
    held.sum += r.held.sum;
    held.count += r.held.count;
  }
  return { counters, held };
}

const SAVE_AFTER_MS = 1_000;

export class Meter {
  readonly #queue: LibsqlTransport;
  readonly #store: MeterStore | undefined;
  readonly #sampleMs: number;
  readonly #keep: number;
  #snapshot = empty();
  /** What was stored, merged in once read (counts made meanwhile add to it). */
  readonly loaded: Promise<void>;
  #saveTimer: ReturnType<typeof setTimeout> | undefined;
  #saving: Promise<void> | undefined;
  #sampling: Promise<void> | undefined;
  readonly #off: Array<() => void>;

  constructor(queue: LibsqlTransport, o: { store?: MeterStore | undefined; sampleMs: number; keep?: number }) {
    this.#queue = queue;
    this.#store = o.store;
    this.#sampleMs = o.sampleMs;
    this.#keep = o.keep ?? SAMPLES_KEPT;
    this.loaded = this.#load();
    const internals = internalsOf(queue);
    this.#off = [
      internals.onCount((e) => {
        const c = this.#snapshot.counters;
        switch (e.kind) {
          case "published":
            c.published += e.count;
            break;
          case "claimed":
            c.deadLettered += e.deadLettered;
            break;
          case "acked":
            c.acked++;
            if (e.heldSeconds !== undefined) this.#held(e.heldSeconds);
            break;
          case "nacked":
            c.nacked++;
            if (e.deadLettered) c.deadLettered++;
            break;
          case "released":
            c.released++;
            break;
          case "scheduled":
            c.scheduled += e.count;
            break;
        }
        this.#changed();
      }),
      internals.conn.health.on((e) => this.#health(e)),
    ];
  }

  /** The database failed a request, or answered again: counted, and each outage's start and end logged once. */
  #health(e: HealthEvent): void {
    const c = this.#snapshot.counters;
    if (e.kind === "failed") {
      if (e.code === "TIMEOUT") c.dbTimeouts++;
      else if (e.code === "BLOCKED") c.dbBlocked++;
      else c.dbUnavailable++;
      if (e.first) console.warn(`writer: the database is failing (${e.message}); calls retry until their deadlines`);
    } else {
      c.dbRecoveries++;
      console.warn(
        `writer: the database answers again, after ${e.failures} failed request(s) over ${(e.downMs / 1000).toFixed(1)} s`,
      );
    }
    this.#saveSoon();
  }

  /** A push delivery's answer: acked or kept (2xx), or a failure that is retried. */
  pushed(ok: boolean): void {
    this.#snapshot.counters.pushed++;
    if (!ok) this.#snapshot.counters.pushFailures++;
    this.#changed();
  }

  /**
   * The counters and the histogram as they are now, once stored: a scrape never sees counts that an
   * eviction could take back.
   */
  async reading(): Promise<MeterReading> {
    await (this.#saveTimer !== undefined ? this.#save() : this.#saving);
    await this.loaded;
    const { counters, held } = structuredClone(this.#snapshot);
    return { counters, held };
  }

  /** How often a sample is taken, in seconds. */
  get sampleSeconds(): number {
    return this.#sampleMs / 1000;
  }

  /** The samples, oldest first, after taking one if it is due. */
  async history(): Promise<QueueHistory> {
    await this.loaded;
    await this.#sampleIfDue();
    return { sampleSeconds: this.sampleSeconds, samples: structuredClone(this.#snapshot.samples) };
  }

  /** Writes what is unsaved now, and stops counting. */
  async stop(): Promise<void> {
    for (const off of this.#off) off();
    await this.#save();
  }

  #held(seconds: number): void {
    const h = this.#snapshot.held;
    const found = HELD_BUCKETS.findIndex((b) => seconds <= b);
    const i = found < 0 ? HELD_BUCKETS.length : found;
    h.counts[i] = (h.counts[i] ?? 0) + 1;
    h.sum += seconds;
    h.count++;
  }

  #changed(): void {
    void this.#sampleIfDue();
    this.#saveSoon();
  }

  #saveSoon(): void {
    if (this.#store !== undefined && this.#saveTimer === undefined) {
      this.#saveTimer = setTimeout(() => void this.#save(), SAVE_AFTER_MS);
    }
  }

  /** Stores the snapshot as it is now (after any save under way). */
  #save(): Promise<void> {
    if (this.#saveTimer !== undefined) clearTimeout(this.#saveTimer);
    this.#saveTimer = undefined;
    const store = this.#store;
    if (store === undefined) return Promise.resolve();
    const before = this.#saving;
    const run = (async () => {
      await before;
      await this.loaded;
      await store.save(structuredClone(this.#snapshot)).catch((e) => console.error("meter: could not save", e));
    })();
    this.#saving = run;
    return run;
  }

  async #load(): Promise<void> {
    const stored = await this.#store?.load().catch((e) => {
      console.error("meter: could not load", e);
      return undefined;
    });
    if (stored === undefined) return;
    const sum = addReadings([stored, this.#snapshot]);
    this.#snapshot.counters = sum.counters;
    this.#snapshot.held = sum.held;
    this.#snapshot.samples = [...stored.samples, ...this.#snapshot.samples].slice(-this.#keep);
  }

  /** One sample of the queue's state when the last is `sampleMs` old (one read; one at a time). */
  #sampleIfDue(): Promise<void> {
    const last = this.#snapshot.samples.at(-1);
    if (this.#sampling !== undefined || (last !== undefined && Date.now() - last.at * 1000 < this.#sampleMs)) {
      return this.#sampling ?? Promise.resolve();
    }
    this.#sampling = (async () => {
      try {
        await this.loaded;
        const s = await this.#queue.stats();
        const c = this.#snapshot.counters;
        this.#snapshot.samples.push({
          at: s.now,
          ready: s.ready,
          waiting: s.waiting,
          inFlight: s.inFlight,
          parked: s.parked,
          delayed: s.delayed,
          deadLetters: s.deadLetters,
          oldestAge: s.oldestAge,
          published: c.published,
          acked: c.acked,
        });
        if (this.#snapshot.samples.length > this.#keep) this.#snapshot.samples.shift();
        this.#saveSoon();
      } catch (e) {
        console.error("meter: could not sample", e);
      } finally {
        this.#sampling = undefined;
      }
    })();
    return this.#sampling;
  }
}

// A writer keeps its transport for its life: so does this map (tests and the app's routes find a
// transport's meter through it).
const byTransport = new WeakMap<object, Meter>();

export function attachMeter(queue: LibsqlTransport, meter: Meter): void {
  byTransport.set(queue, meter);
}

/** The meter of a writer's transport, if it has one (a transport outside a QueueWriter has none). */
export const meterOf = (queue: object): Meter | undefined => byTransport.get(queue);
