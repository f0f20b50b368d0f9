/** What a request of the app carries (Hono's `Env`): the bindings, and what the middleware sets. Types only. */
export type { ShardOf } from "../core/shard.js";

import type { Database } from "../core/databases.js";
import type { KeyStore } from "../core/keys.js";
import type { CatalogStore, QueueCatalog, QueueManager, ResolvedQueue } from "../core/queues.js";
import type { ShardOf } from "../core/shard.js";
import type { ShardedQueue } from "../core/sharded.js";
import type { LibsqlTransport } from "../core/transport.js";
import type { Bindings, Config } from "./env.js";
import type { Principal } from "./keys.js";
import type { MeterReading } from "./writer/meter.js";
import type { WriterQueue } from "./writer/remote.js";

/** Where a database of a queue is served: its writer's location hint, and which shard it is. */
export interface Placement {
  hint: string | undefined;
  shard: ShardOf;
}

/**
 * How a claim's `wait` (long poll) is served: by the writer's dispatcher (re-checking every
 * `recheckMs`), by the queue itself (the writers a queue's databases are reached through wait), or
 * by polling.
 */
export type Waits = { mode: "dispatch"; recheckMs: number } | { mode: "native" } | { mode: "poll" };

/** What serves one database of a queue: a transport over it, or its writer. */
export type DatabaseQueue = LibsqlTransport | WriterQueue;

/** What serves a queue's requests: its one database, or a sharded queue over its shards. */
export type ServedQueue = DatabaseQueue | ShardedQueue;

/**
 * How one deployment reaches databases: the one thing that differs between the Worker's edge (each
 * database through its QueueWriter), a long-lived server (a transport per database) and a Worker
 * without the Durable Object (a transport per request). Everything else, from a queue's name to
 * the operation on its databases, is the same code (src/app/queues.ts).
 */
export interface DatabaseAccess {
  /** What serves one database of a queue (the default queue's included). */
  open(db: Database, at: Placement): Promise<DatabaseQueue>;
  /** The catalog's rows, in the default queue's database. */
  catalogStore(): Promise<CatalogStore>;
  /** Keys made through the API, and the audit, in the default queue's database. */
  keys(): KeyStore;
  /** A database's schema in place (before its queue is listed). */
  prepare(db: Database, at: Placement): Promise<void>;
  /** The counters a database's writer keeps (none where no writer keeps them). */
  meter?(db: Database, at: Placement): Promise<MeterReading | null>;
  /**
   * A deleted queue's databases are going: what serves them lets go (its long polls answered
   * QUEUE_NOT_FOUND, its connections closed), so that nothing of the old queue serves one made
   * again under the name.
   */
  retire?(databases: Database[]): Promise<void>;
  /**
   * Where a queue is made and deleted, when not here: the Worker's edge runs each in the default
   * queue's writer, one at a time per name (two racing on a name never interleave).
   */
  manage?: QueueManager;
  waits: Waits;
}

/**
 * Builds the access for a configuration (expected to be cheap: called per request). `env`: the
 * request's bindings; `request`: the request itself (its abort, when its client hangs up, goes on to
 * what it waits on).
 */
export type TransportFactory = (config: Config, env: Bindings, request?: Request) => DatabaseAccess;

export interface AppEnv {
  Bindings: Bindings;
  Variables: {
    config: Config;
    /** What serves this request's queue, fetched only once the input has been validated. */
    queue: () => Promise<ServedQueue>;
    /** The request's queue (`/v1/queues/{queue}/...`; the default queue for `/v1/...`). */
    queueName: string;
    /** The catalog of named queues: the one way from a queue's name to its databases. */
    catalog: QueueCatalog;
    /** The counters kept by a queue's writers, one per database (none without the QueueWriter). */
    meters: (queue: ResolvedQueue) => Promise<MeterReading[]>;
    /** Lets go of the database for `ms` (a long poll's pause); the next `queue()` takes it again. */
    idle: (ms: number, signal?: AbortSignal) => Promise<void>;
    /** How a claim's `wait` is served. */
    waits: Waits;
    /** Who made the request and what it may do (src/app/auth.ts). */
    principal: Principal;
    /** Where keys and the audit are kept. */
    keys: () => KeyStore;
  };
}
