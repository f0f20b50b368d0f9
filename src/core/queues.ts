/**
 * Named queues: each queue is a database of its own (a sharded queue, one per shard), made by a
 * DatabaseProvider (./databases.ts) and listed in a catalog (`tq_queues`) kept in the default
 * queue's database. The default queue is the database the catalog lives in; it is always there.
 *
 * The catalog keeps what a queue is (its name, shard count and location hint), never where it
 * lives: `resolve(name)` asks the provider, under today's configuration, where each shard's database
 * is. It is the one way from a queue's name to its databases, for the default queue too.
 *
 * Making a queue is idempotent (its databases, their schema, then its row); its shard count cannot
 * change afterwards, since a group's messages would then be split over two shards and lose their
 * order: make a new queue and drain the old one. Deleting a queue that holds messages or dead
 * letters is refused unless forced. Makes and deletes of one name run one at a time (here, or where
 * `manage` says: the Worker's default queue's writer), so that a make racing a delete never makes
 * databases the delete then drops, nor meets them half dropped.
 */
import {
  DEFAULT_QUEUE,
  locationHintProblem,
  MAX_SHARDS,
  queueAllowed,
  queueNameProblem,
  shardDatabaseName,
} from "../rules.js";
import type { Database, DatabaseProvider } from "./databases.js";
import { invalid, QueueError, type QueueErrorCode, toQueueError } from "./errors.js";
import { internalsOf } from "./internals.js";
import { statsAcross } from "./shard.js";
import {
  addQueuePlan,
  getQueuePlan,
  listQueuesPlan,
  type Plan,
  type QueueRow,
  removeQueuePlan,
  setLocationHintPlan,
} from "./sql/index.js";
import type { LibsqlTransport } from "./transport.js";
import type { QueueStats } from "./types.js";
import { checkCount } from "./validate.js";

/** A queue as the catalog holds it: what it is. */
export type QueueInfo = QueueRow;

/** A queue and where its databases are, in shard order, under today's configuration. */
export interface ResolvedQueue extends QueueInfo {
  databases: Database[];
}

export interface QueueSettings {
  /** Databases the queue spreads over (1 to 16, default 1); fixed once the queue exists. */
  shards?: number | undefined;
  /** Where its writers should run (a Durable Object location hint); may change. */
  locationHint?: string | undefined;
}

/** What the catalog needs of a database it counts or makes (a transport over it, or its writer). */
export interface CatalogDatabase {
  stats(): Promise<QueueStats>;
  /** Its schema in place (a transport has it once opened). */
  ready?(): Promise<void>;
  close?(): void;
}

/** Opens the `index`-th database of `queue`. */
type OpenDatabase = (db: Database, at: { queue: QueueInfo; index: number }) => Promise<CatalogDatabase>;

/** Where queues are made and deleted when not by the catalog itself (the Worker's default queue's writer). */
export interface QueueManager {
  put(name: string, settings: QueueSettings): Promise<{ queue: ResolvedQueue; created: boolean }>;
  delete(name: string, options: { force?: boolean }): Promise<boolean>;
}

/** A queue with its counts, or, where its databases did not answer, why. */
export type QueueWithCounts = ResolvedQueue & ({ stats: QueueStats } | { stats: null; error: QueueError });

/** Where the catalog's rows are: the default queue's database, through its transport or its writer. */
export interface CatalogStore {
  get(name: string): Promise<QueueRow | undefined>;
  list(limit: number): Promise<QueueRow[]>;
  add(q: Omit<QueueRow, "createdAt">): Promise<{ row: QueueRow; added: boolean }>;
  setLocationHint(name: string, hint: string | undefined): Promise<void>;
  remove(name: string): Promise<boolean>;
}

/** The catalog's rows through the default queue's transport. */
export function catalogStoreOf(home: LibsqlTransport): CatalogStore {
  const read = <T>(plan: Plan<T>): Promise<T> => internalsOf(home).conn.readPlan(plan);
  const write = <T>(plan: Plan<T>): Promise<T> => internalsOf(home).conn.writes.submit({ ...plan, idempotent: true });
  return {
    get: (name) => read(getQueuePlan(name)),
    list: (limit) => read(listQueuesPlan(limit)),
    add: (q) => write(addQueuePlan(q)),
    setLocationHint: (name, hint) => write(setLocationHintPlan(name, hint)),
    remove: (name) => write(removeQueuePlan(name)),
  };
}

/** How long a resolved queue is trusted by default: a queue deleted elsewhere is still routed to for at most this long. */
export const RESOLVE_CACHE_MS = 5_000;

/** Most queues listed (and cached). */
const MAX_QUEUES = 1000;

export class QueueCatalog {
  readonly #store: CatalogStore;
  readonly #provider: DatabaseProvider;
  readonly #default: ResolvedQueue;
  readonly #open: OpenDatabase;
  readonly #cacheMs: number;
  readonly #resolved = new Map<string, { at: number; queue: Promise<ResolvedQueue | undefined> }>();
  readonly #manage: QueueManager | undefined;
  readonly #retire: ((queue: ResolvedQueue) => Promise<void>) | undefined;
  /** The make or delete under way for each name: the next one waits for it. */
  readonly #lanes = new Map<string, Promise<unknown>>();

  /**
   * `home`: the catalog's rows (the default queue's transport, or a store reaching them otherwise);
   * `defaultDatabase`: the default queue's database; `open`: a database to count or to make ready
   * (closed after use, where it can be); `cacheMs`: how long `resolve` trusts what it found;
   * `retire`: lets go of what serves a deleted queue's databases, before they are dropped;
   * `manage`: where makes and deletes run instead of here (checked here first).
   */
  constructor(o: {
    home: LibsqlTransport | CatalogStore;
    defaultDatabase: Database;
    provider: DatabaseProvider;
    open: OpenDatabase;
    defaultLocationHint?: string | undefined;
    cacheMs?: number;
    retire?: ((queue: ResolvedQueue) => Promise<void>) | undefined;
    manage?: QueueManager | undefined;
  }) {
    this.#store = isStore(o.home) ? o.home : catalogStoreOf(o.home);
    this.#provider = o.provider;
    this.#open = o.open;
    this.#cacheMs = o.cacheMs ?? RESOLVE_CACHE_MS;
    this.#retire = o.retire;
    this.#manage = o.manage;
    this.#default = {
      name: DEFAULT_QUEUE,
      shards: 1,
      databases: [o.defaultDatabase],
      locationHint: o.defaultLocationHint,
      createdAt: 0,
    };
  }

  /**
   * The queue named `name` and where its databases are; QUEUE_NOT_FOUND when there is none. What
   * was found is trusted for `cacheMs` (a put or a delete through this catalog forgets it at once).
   */
  async resolve(name: string): Promise<ResolvedQueue> {
    checkName(name);
    if (name === DEFAULT_QUEUE) return this.#default;
    const now = Date.now();
    let entry = this.#resolved.get(name);
    if (entry === undefined || now - entry.at > this.#cacheMs) {
      if (this.#resolved.size >= MAX_QUEUES) this.#resolved.clear();
      const queue = this.#store.get(name).then((row) => (row === undefined ? undefined : this.#locate(row)));
      entry = { at: now, queue };
      this.#resolved.set(name, entry);
      queue.catch(() => this.#resolved.delete(name));
    }
    const queue = await entry.queue;
    if (queue === undefined) throw notFound(name);
    return queue;
  }

  /** Forgets what `resolve` found for `name`. */
  forget(name: string): void {
    this.#resolved.delete(name);
  }

  /** The queue named `name` as the catalog holds it now (no cache), or undefined; refuses a name no queue could have. */
  async get(name: string): Promise<ResolvedQueue | undefined> {
    checkName(name);
    if (name === DEFAULT_QUEUE) return this.#default;
    const row = await this.#store.get(name);
    return row === undefined ? undefined : this.#locate(row);
  }

  /** Every queue, the default one first, then by name (at most 1,000). */
  async list(): Promise<QueueInfo[]> {
    return [this.#default, ...(await this.#store.list(MAX_QUEUES))];
  }

  /**
   * Every queue with its counts (each shard's stats, added up); only those `patterns` allow, when
   * given (a key's queues). A queue whose databases cannot be reached is listed with the error
   * instead: one unreachable queue hides no other.
   */
  async listWithCounts(patterns?: readonly string[]): Promise<QueueWithCounts[]> {
    const queues = (await this.list()).filter((q) => queueAllowed(patterns, q.name));
    return Promise.all(
      queues.map(async (info): Promise<QueueWithCounts> => {
        let q: ResolvedQueue = { ...info, databases: [] };
        try {
          q = info.name === DEFAULT_QUEUE ? this.#default : await this.#locate(info);
          return { ...q, stats: await this.countOf(q) };
        } catch (e) {
          return { ...q, stats: null, error: toQueueError(e) };
        }
      }),
    );
  }

  /** Makes the queue, or answers it as it is (`created: false`); refuses to change its shard count. */
  async put(name: string, settings: QueueSettings = {}): Promise<{ queue: ResolvedQueue; created: boolean }> {
    checkName(name);
    const shards = settings.shards === undefined ? undefined : checkCount("shards", settings.shards, MAX_SHARDS);
    if (settings.locationHint !== undefined) {
      const p = locationHintProblem(settings.locationHint);
      if (p !== undefined) throw invalid("location_hint", p);
      if (name === DEFAULT_QUEUE) {
        throw invalid(
          "location_hint",
          `the ${DEFAULT_QUEUE} queue's is QUEUE_LOCATION_HINT (set it in the configuration)`,
        );
      }
    }
    this.forget(name);
    const manage = this.#manage;
    if (manage !== undefined) {
      try {
        return await manage.put(name, { shards, locationHint: settings.locationHint });
      } finally {
        this.forget(name);
      }
    }
    return this.#inLane(name, () => this.#put(name, shards, settings.locationHint));
  }

  async #put(
    name: string,
    shards: number | undefined,
    locationHint: string | undefined,
  ): Promise<{ queue: ResolvedQueue; created: boolean }> {
    const existing = await this.get(name);
    if (existing !== undefined) {
      checkSameShards(existing, shards);
      if (locationHint !== undefined && locationHint !== existing.locationHint) {
        await this.#store.setLocationHint(name, locationHint);
        return { queue: { ...existing, locationHint }, created: false };
      }
      return { queue: existing, created: false };
    }
    const count = shards ?? 1;
    const databases = await Promise.all(
      Array.from({ length: count }, (_, i) => this.#provider.create(shardDatabaseName(name, i, count))),
    );
    // Each database gets the schema before the queue is listed: no request finds it half made.
    const made = { name, shards: count, locationHint, createdAt: 0 };
    for (const [index, db] of databases.entries()) {
      const d = await this.#open(db, { queue: made, index });
      try {
        await d.ready?.();
      } finally {
        d.close?.();
      }
    }
    const { row, added } = await this.#store.add({ name, shards: count, locationHint });
    // Another put of the same name won the race: its shard count stands.
    checkSameShards(row, shards);
    return { queue: await this.#locate(row), created: added };
  }

  /**
   * Removes the queue from the catalog and drops its databases; refused while it holds messages or
   * dead letters unless `force`. False when there was no such queue.
   */
  async delete(name: string, options: { force?: boolean } = {}): Promise<boolean> {
    checkName(name);
    if (name === DEFAULT_QUEUE) throw invalid("queue", `the ${DEFAULT_QUEUE} queue cannot be deleted`);
    this.forget(name);
    const manage = this.#manage;
    if (manage !== undefined) {
      try {
        return await manage.delete(name, { force: options.force === true });
      } finally {
        this.forget(name);
      }
    }
    return this.#inLane(name, () => this.#delete(name, options.force === true));
  }

  async #delete(name: string, force: boolean): Promise<boolean> {
    const queue = await this.get(name);
    if (queue === undefined) return false;
    if (!force) {
      const s = await this.countOf(queue);
      const down = s.unreachableShards?.[0];
      if (down !== undefined) {
        // What it holds cannot be counted: nothing is dropped unseen.
        throw new QueueError(
          down.code as QueueErrorCode,
          `queue: shard ${down.shard} of ${name} could not be reached`,
          {
            field: "queue",
          },
        );
      }
      const messages = s.ready + s.waiting + s.inFlight + s.parked + s.delayed;
      if (messages > 0 || s.deadLetters > 0) {
        throw new QueueError(
          "QUEUE_NOT_EMPTY",
          `queue: ${name} holds ${messages} messages and ${s.deadLetters} dead letters (delete with force to drop them)`,
          { field: "queue" },
        );
      }
    }
    // Out of the catalog first: nothing is routed to a database that is going away. Then what
    // serves its databases lets go (no long poll of the old queue is left to take a message of a
    // queue made again), and only then are they dropped.
    if (!(await this.#store.remove(name))) return false;
    this.forget(name);
    await this.#retire?.(queue).catch((e) => console.error(`queue ${name}: letting go of its databases failed`, e));
    await Promise.all(queue.databases.map((_, i) => this.#provider.drop(shardDatabaseName(name, i, queue.shards))));
    return true;
  }

  /**
   * Runs `f` once every make or delete of `name` started before it is over; what `resolve` found
   * for the name meanwhile is forgotten after it.
   */
  #inLane<T>(name: string, f: () => Promise<T>): Promise<T> {
    const before = this.#lanes.get(name) ?? Promise.resolve();
    const once = () => f().finally(() => this.forget(name));
    const run = before.then(once, once);
    const lane = run.catch(() => {});
    this.#lanes.set(name, lane);
    void lane.then(() => {
      if (this.#lanes.get(name) === lane) this.#lanes.delete(name);
    });
    return run;
  }

  /**
   * Where a queue's messages are: each shard's stats, added up; a shard that cannot be reached is
   * listed in `unreachableShards` (failing only when none answered).
   */
  async countOf(q: ResolvedQueue): Promise<QueueStats> {
    return statsAcross(q.databases.length, async (index) => {
      const t = await this.#open(q.databases[index] as Database, { queue: q, index });
      try {
        return await t.stats();
      } finally {
        t.close?.();
      }
    });
  }

  async #locate(row: QueueRow): Promise<ResolvedQueue> {
    const databases = await Promise.all(
      Array.from({ length: row.shards }, (_, i) => this.#provider.locate(shardDatabaseName(row.name, i, row.shards))),
    );
    return { ...row, databases };
  }
}

const isStore = (home: object): home is CatalogStore =>
  typeof (home as Partial<CatalogStore>).get === "function" &&
  typeof (home as Partial<CatalogStore>).add === "function";

/** What a deleted queue's database answers while an edge still routes to it (its name is not known there). */
export function queueGone(): QueueError {
  return new QueueError("QUEUE_NOT_FOUND", "queue: this queue was deleted", { field: "queue" });
}

export function notFound(name: string): QueueError {
  return new QueueError("QUEUE_NOT_FOUND", `queue: no queue ${name} (make it with PUT /v1/queues/${name})`, {
    field: "queue",
  });
}

function checkName(name: unknown): void {
  const p = queueNameProblem(name);
  if (p !== undefined) throw invalid("queue", p);
}

function checkSameShards(q: QueueInfo, shards: number | undefined): void {
  if (shards !== undefined && shards !== q.shards) {
    throw invalid(
      "shards",
      `cannot change from ${q.shards} to ${shards}: a group's messages would be split across shards and lose their order (make a new queue with ${shards} shards, publish there, and drain this one)`,
    );
  }
}
