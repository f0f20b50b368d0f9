/**
 * Named queues: each queue is a database of its own (a sharded queue, one per shard), made by a
 * DatabaseProvider (./databases.ts) and listed in a catalog (`tq_queues`) kept in the default
 * queue's database. The default queue is the database the catalog lives in; it is always there.
 *
 * Making a queue is idempotent (its databases, their schema, then its row); its shard count cannot
 * change afterwards, since a group's messages would then be split over two shards and lose their
 * order: make a new queue and drain the old one. Deleting a queue that holds messages or dead
 * letters is refused unless forced.
 */
import { DEFAULT_QUEUE, locationHintProblem, MAX_SHARDS, queueNameProblem, shardDatabaseName } from "../rules.js";
import type { Database, DatabaseProvider } from "./databases.js";
import { invalid, QueueError } from "./errors.js";
import { internalsOf } from "./internals.js";
import { addUp } from "./shard.js";
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
import type { QueueFlow, QueueFlowInput, QueueStats } from "./types.js";
import { checkCount } from "./validate.js";

export type QueueInfo = QueueRow;

export interface QueueSettings {
  /** Databases the queue spreads over (1 to 16, default 1); fixed once the queue exists. */
  shards?: number | undefined;
  /** Where its writers should run (a Durable Object location hint); may change. */
  locationHint?: string | undefined;
}

/** Something that can count a database's messages (a transport over it), and read or set its flow settings. */
interface StatsSource {
  stats(): Promise<QueueStats>;
  queueSettings?(): Promise<QueueFlow>;
  setQueue?(patch: QueueFlowInput): Promise<QueueFlow>;
  close?(): void;
}

/** A queue and where its messages are. */
export interface QueueWithCounts extends QueueInfo {
  stats: QueueStats;
}

export class QueueCatalog {
  readonly #home: LibsqlTransport;
  readonly #provider: DatabaseProvider;
  readonly #default: QueueInfo;
  readonly #open: (db: Database) => Promise<StatsSource>;

  /**
   * `home`: the default queue's transport (the catalog's table is in its database); `defaultDatabase`
   * how to reach it; `open` opens a database and ensures its schema (a transport, closed after use).
   */
  constructor(o: {
    home: LibsqlTransport;
    defaultDatabase: Database;
    provider: DatabaseProvider;
    open: (db: Database) => Promise<StatsSource>;
    defaultLocationHint?: string | undefined;
  }) {
    this.#home = o.home;
    this.#provider = o.provider;
    this.#open = o.open;
    this.#default = {
      name: DEFAULT_QUEUE,
      shards: 1,
      databases: [o.defaultDatabase],
      locationHint: o.defaultLocationHint,
      createdAt: 0,
    };
  }

  /** The queue named `name`, or undefined; refuses a name no queue could have. */
  async get(name: string): Promise<QueueInfo | undefined> {
    checkName(name);
    if (name === DEFAULT_QUEUE) return this.#default;
    return this.#read(getQueuePlan(name));
  }

  /** Every queue, the default one first, then by name (at most 1,000). */
  async list(): Promise<QueueInfo[]> {
    return [this.#default, ...(await this.#read(listQueuesPlan(1000)))];
  }

  /** Every queue with its counts (each shard's stats, added up). */
  async listWithCounts(): Promise<QueueWithCounts[]> {
    const queues = await this.list();
    return Promise.all(queues.map(async (q) => ({ ...q, stats: await this.countOf(q) })));
  }

  /** Makes the queue, or answers it as it is (`created: false`); refuses to change its shard count. */
  async put(name: string, settings: QueueSettings = {}): Promise<{ queue: QueueInfo; created: boolean }> {
    checkName(name);
    const shards = settings.shards === undefined ? undefined : checkCount("shards", settings.shards, MAX_SHARDS);
    if (settings.locationHint !== undefined) {
      const p = locationHintProblem(settings.locationHint);
      if (p !== undefined) throw invalid("location_hint", p);
    }
    const existing = await this.get(name);
    if (existing !== undefined) {
      checkSameShards(existing, shards);
      if (
        name !== DEFAULT_QUEUE &&
        settings.locationHint !== undefined &&
        settings.locationHint !== existing.locationHint
      ) {
        await this.#write(setLocationHintPlan(name, settings.locationHint));
        return { queue: { ...existing, locationHint: settings.locationHint }, created: false };
      }
      return { queue: existing, created: false };
    }
    const count = shards ?? 1;
    const databases = await Promise.all(
      Array.from({ length: count }, (_, i) => this.#provider.create(shardDatabaseName(name, i, count))),
    );
    // Each database gets the schema before the queue is listed: no request finds it half made.
    for (const db of databases) (await this.#open(db)).close?.();
    const { row, added } = await this.#write(
      addQueuePlan({ name, shards: count, databases, locationHint: settings.locationHint }),
    );
    // Another put of the same name won the race: its shard count stands.
    checkSameShards(row, shards);
    return { queue: row, created: added };
  }

  /**
   * Removes the queue from the catalog and drops its databases; refused while it holds messages or
   * dead letters unless `force`. False when there was no such queue.
   */
  async delete(name: string, options: { force?: boolean } = {}): Promise<boolean> {
    checkName(name);
    if (name === DEFAULT_QUEUE) throw invalid("queue", `the ${DEFAULT_QUEUE} queue cannot be deleted`);
    const queue = await this.get(name);
    if (queue === undefined) return false;
    if (options.force !== true) {
      const s = await this.countOf(queue);
      const messages = s.ready + s.waiting + s.inFlight + s.parked + s.delayed;
      if (messages > 0 || s.deadLetters > 0) {
        throw new QueueError(
          "QUEUE_NOT_EMPTY",
          `queue: ${name} holds ${messages} messages and ${s.deadLetters} dead letters (delete with force to drop them)`,
          { field: "queue" },
        );
      }
    }
    // Out of the catalog first: nothing is routed to a database that is going away.
    const removed = await this.#write(removeQueuePlan(name));
    await Promise.all(queue.databases.map((_, i) => this.#provider.drop(shardDatabaseName(name, i, queue.shards))));
    return removed;
  }

  /**
   * A queue's flow settings, after `patch` is applied to every shard (when given): each shard keeps
   * its own copy, so that its claims read them in their own batch.
   */
  async settingsOf(q: QueueInfo, patch?: QueueFlowInput): Promise<QueueFlow> {
    const all = await Promise.all(
      q.databases.map(async (db) => {
        const t = await this.#open(db);
        try {
          if (t.setQueue === undefined || t.queueSettings === undefined) throw new Error("no flow settings here");
          return patch === undefined ? await t.queueSettings() : await t.setQueue(patch);
        } finally {
          t.close?.();
        }
      }),
    );
    return all[0] as QueueFlow;
  }

  /** Where a queue's messages are: each shard's stats, added up. */
  async countOf(q: QueueInfo): Promise<QueueStats> {
    const all = await Promise.all(
      q.databases.map(async (db) => {
        const t = await this.#open(db);
        try {
          return await t.stats();
        } finally {
          t.close?.();
        }
      }),
    );
    return addUp(all);
  }

  #read<T>(plan: Plan<T>): Promise<T> {
    return internalsOf(this.#home).conn.readPlan(plan);
  }

  #write<T>(plan: Plan<T>): Promise<T> {
    return internalsOf(this.#home).conn.writes.submit({ ...plan, idempotent: true });
  }
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
