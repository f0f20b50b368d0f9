/**
 * The two ways the app reaches databases with transports of its own (the Worker's edge reaches
 * them through their QueueWriters instead: src/app/writer/remote.ts): one transport per database for
 * the life of its owner (a long-lived server, or the QueueWriter itself), or one per request (a
 * Worker without the Durable Object). Neither touches the network until a request needs the database.
 */
import type { Database } from "../core/databases.js";
import { lazyKeyStore } from "../core/keys.js";
import { catalogStoreOf, queueGone } from "../core/queues.js";
import type { LibsqlTransport } from "../core/transport.js";
import type { TransportFactory } from "./context.js";
import { databaseKey, openDatabase } from "./databases.js";
import type { Config } from "./env.js";
import { dispatcherFor } from "./writer/dispatcher.js";

/**
 * One transport per database, kept for the life of its owner. Every request of a Durable Object
 * may use I/O another one started, so concurrent requests share a transport's write path: their
 * writes ride one batch (group commit), one batch in flight. A transport whose schema check failed
 * is dropped, so that the next request tries again; so is the transport of a deleted queue's
 * database (its long polls answered QUEUE_NOT_FOUND), so that a queue made again under the name gets
 * a fresh one, with its schema.
 */
export function sharedTransports(): TransportFactory {
  const byDatabase = new Map<string, ReturnType<typeof openDatabase>>();
  const open = async (config: Config, db: Database): Promise<LibsqlTransport> => {
    const key = databaseKey(db);
    let t = byDatabase.get(key);
    if (t === undefined) {
      // Its callers answer over HTTP and come back with their next write (an ack, the next claim) a
      // moment later: the next batch waits for them (QUEUE_HOLD_MS; docs/library.md, `holdMs`). Its
      // acks may wait for a publish's batch (QUEUE_RIDE_MS, `rideMs`).
      t = openDatabase(db, config, { holdMs: config.holdMs, rideMs: config.rideMs, keepStream: true });
      byDatabase.set(key, t);
      t.catch(() => byDatabase.delete(key));
    }
    return (await t).transport;
  };
  const retire = async (config: Config, databases: Database[]) => {
    await Promise.all(
      databases.map(async (db) => {
        const key = databaseKey(db);
        const t = byDatabase.get(key);
        byDatabase.delete(key);
        const opened = await t?.catch(() => undefined);
        if (opened === undefined) return;
        dispatcherFor(opened.transport, config.recheckMs).stop(queueGone());
        opened.transport.close();
        // Its write stream closed on the server before the database is dropped.
        await opened.close();
      }),
    );
  };
  return (config) => ({
    open: (db) => open(config, db),
    prepare: async (db) => {
      await open(config, db);
    },
    catalogStore: async () => catalogStoreOf(await open(config, config.database)),
    keys: () => lazyKeyStore(() => open(config, config.database)),
    retire: (databases) => retire(config, databases),
    waits: { mode: "dispatch", recheckMs: config.recheckMs },
  });
}

/**
 * A fresh transport per request, for a Worker without the Durable Object: workerd does not let
 * one request wait on I/O started by another (a batch sent from a request that then finished
 * hangs the requests whose writes rode in it), so nothing is shared but the knowledge that a
 * database's schema is in place (a flag, not a promise), which saves every later request that read.
 */
export function perRequestTransports(): TransportFactory {
  const schemaReady = new Set<string>();
  const open = async (config: Config, db: Database): Promise<LibsqlTransport> => {
    const key = databaseKey(db);
    const { transport } = await openDatabase(db, config, { ensureSchema: !schemaReady.has(key), keepStream: false });
    schemaReady.add(key);
    return transport;
  };
  return (config) => {
    // Within one request, one transport per database.
    const opened = new Map<string, Promise<LibsqlTransport>>();
    const once = (db: Database) => {
      const key = databaseKey(db);
      let t = opened.get(key);
      if (t === undefined) {
        t = open(config, db);
        opened.set(key, t);
        t.catch(() => opened.delete(key));
      }
      return t;
    };
    return {
      open: once,
      // A queue being made (perhaps made again after a delete): its schema is checked, whatever this
      // isolate knew of the database before.
      prepare: async (db) => {
        const key = databaseKey(db);
        schemaReady.delete(key);
        opened.delete(key);
        await once(db);
      },
      retire: async (databases) => {
        for (const db of databases) schemaReady.delete(databaseKey(db));
      },
      catalogStore: async () => catalogStoreOf(await once(config.database)),
      keys: () => lazyKeyStore(() => once(config.database)),
      waits: { mode: "poll" },
    };
  };
}
