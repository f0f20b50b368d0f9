/**
 * How the Worker reaches a queue's database (a `@libsql/client/web` HTTP client plus the library's
 * write path), and the two ways it keeps transports: one per database for the life of its owner (the
 * QueueWriter Durable Object), or one per request (a Worker without it). Neither touches the network
 * until a request needs the database.
 */
import type { Database } from "../core/databases.js";
import { ShardedQueue } from "../core/sharded.js";
import type { LibsqlTransport } from "../core/transport.js";
import { DEFAULT_QUEUE } from "../rules.js";
import type { QueueTarget, ServedQueue } from "./context.js";
import { databaseKey, openDatabase } from "./databases.js";
import type { Config } from "./env.js";
import { catalogOf, lookupQueue, nextTurn } from "./queues.js";

/**
 * One transport per database, kept for the life of its owner: the QueueWriter Durable Object (which
 * serves one database: the one the edge names in `target.database`, or the default queue's), or a
 * long-lived server (Node), where a named queue is looked up in the catalog and a sharded one served
 * by a ShardedQueue over its shards' transports. Every request of a Durable Object may use I/O
 * another one started, so concurrent requests share a transport's write path: their writes ride one
 * batch (group commit), one batch in flight. A transport whose schema check failed is dropped, so
 * that the next request tries again.
 */
export function sharedTransports(): (config: Config, target?: QueueTarget) => Promise<ServedQueue> {
  const byDatabase = new Map<string, Promise<LibsqlTransport>>();
  const open: Open = (config, db) => {
    const key = databaseKey(db);
    let t = byDatabase.get(key);
    if (t === undefined) {
      // Its callers answer over HTTP and come back with their next write (an ack, the next claim) a
      // moment later: the next batch waits for them (QUEUE_HOLD_MS; BENCHMARKS.md, "What bounds the targets").
      t = openDatabase(db, config, { holdMs: config.holdMs }).then((o) => o.transport);
      byDatabase.set(key, t);
      t.catch(() => byDatabase.delete(key));
    }
    return t;
  };
  return servedBy(open);
}

/**
 * A fresh transport per request, for a Worker without the Durable Object: workerd does not let
 * one request wait on I/O started by another (a batch sent from a request that then finished
 * hangs the requests whose writes rode in it), so nothing is shared but the knowledge that a
 * database's schema is in place (a flag, not a promise), which saves every later request that read.
 * A named queue is looked up in the catalog (src/app/queues.ts); a sharded one is served by a
 * ShardedQueue over a transport per shard.
 */
export function perRequestTransports(): (config: Config, target?: QueueTarget) => Promise<ServedQueue> {
  const schemaReady = new Set<string>();
  const open: Open = async (config, db) => {
    const key = databaseKey(db);
    const { transport } = await openDatabase(db, config, { ensureSchema: !schemaReady.has(key) });
    schemaReady.add(key);
    return transport;
  };
  return servedBy(open);
}

type Open = (config: Config, db: Database) => Promise<LibsqlTransport>;

/**
 * The queue a request names, over databases opened by `open`: a database the edge named, or the
 * default queue's; a named queue as the catalog says (a ShardedQueue over its shards' transports).
 */
function servedBy(open: Open): (config: Config, target?: QueueTarget) => Promise<ServedQueue> {
  return async (config, target) => {
    const name = target?.name ?? DEFAULT_QUEUE;
    if (target?.database !== undefined || name === DEFAULT_QUEUE)
      return open(config, target?.database ?? config.database);
    const queue = await lookupQueue(config, name, async (n) =>
      catalogOf(config, await open(config, config.database)).get(n),
    );
    const shards = await Promise.all(queue.databases.map((db) => open(config, db)));
    return shards.length === 1 ? (shards[0] as LibsqlTransport) : new ShardedQueue(shards, { turn: nextTurn(name) });
  };
}
