/** What a request of the app carries (Hono's `Env`): the bindings, and what the middleware sets. Types only. */
import type { Database } from "../core/databases.js";
import type { KeyStore } from "../core/keys.js";
import type { QueueCatalog, QueueInfo } from "../core/queues.js";
import type { ShardedQueue } from "../core/sharded.js";
import type { LibsqlTransport } from "../core/transport.js";
import type { Bindings, Config } from "./env.js";
import type { Principal } from "./keys.js";
import type { MeterReading } from "./writer/meter.js";

/** The queue a request is for: its name and, where the Worker's edge resolved it, its database. */
export interface QueueTarget {
  name: string;
  database?: Database | undefined;
  /** Where the database is one shard of a sharded queue: which, of how many (its pushes name their shard). */
  shard?: ShardOf | undefined;
}

export interface ShardOf {
  index: number;
  count: number;
}

/**
 * How a claim's `wait` (long poll) is served: by the writer's dispatcher (re-checking every
 * `recheckMs`), by the queue itself (a sharded queue whose shards' writers wait), or by polling.
 */
export type Waits = { mode: "dispatch"; recheckMs: number } | { mode: "native" } | { mode: "poll" };

/** What serves a queue's requests: a transport over its database, or a sharded queue over its shards. */
export type ServedQueue = LibsqlTransport | ShardedQueue;

/** Returns what serves a queue; expected to build it once and cache it, or to be cheap. `env`: the request's bindings. */
export type TransportFactory = (config: Config, target: QueueTarget, env: Bindings) => Promise<ServedQueue>;

export interface AppEnv {
  Bindings: Bindings;
  Variables: {
    config: Config;
    /** What serves this request's queue, fetched only once the input has been validated. */
    queue: () => Promise<ServedQueue>;
    /** The request's queue (`/v1/queues/{queue}/...`; the default queue for `/v1/...`). */
    queueName: string;
    /** The catalog of named queues (the `/v1/queues` routes). */
    catalog: () => Promise<QueueCatalog>;
    /** The counters kept by a queue's writers, one per database (none without the QueueWriter). */
    meters: (queue: QueueInfo) => Promise<MeterReading[]>;
    /** After a queue's deletion: lets go of what served it (the QueueWriter retires its writers). */
    queueDeleted: (queue: QueueInfo) => Promise<void>;
    /** Lets go of the database for `ms` (a long poll's pause); the next `queue()` takes it again. */
    idle: (ms: number, signal?: AbortSignal) => Promise<void>;
    /** How a claim's `wait` is served (AppOptions.waits). */
    waits: Waits;
    /** Who made the request and what it may do (src/app/auth.ts). */
    principal: Principal;
    /** Where keys and the audit are kept (AppOptions.keys). */
    keys: () => KeyStore;
  };
}
