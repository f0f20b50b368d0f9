/**
 * How the Worker's edge reaches databases: each through its QueueWriter Durable Object (src/worker.ts),
 * one per database, asked to run where its queue's location hint says. The edge runs the whole API
 * (the bearer check, validation, a queue's name resolved by the catalog) and asks the writers only
 * for what touches their databases, so that a refused request never reaches a database's single writer.
 */
import type { Database } from "../core/databases.js";
import type { CatalogStore, QueueManager } from "../core/queues.js";
import type { DatabaseAccess, TransportFactory } from "./context.js";
import type { Bindings, Config } from "./env.js";
import { keyStoreOver } from "./key-port.js";
import { databaseRef, unwrap } from "./writer/calls.js";
import { type CatalogCall, type Writer, WriterQueue } from "./writer/remote.js";

/** The writer of `db`, asked to run where `hint` says (a Durable Object location hint). */
export type WriterOf = (config: Config, env: Bindings, db: Database, hint: string | undefined) => Writer;

/**
 * Now, later than any earlier call in this isolate: requests that came within one tick of the
 * runtime's clock (it moves only between I/O) keep the order they came in.
 */
let lastArrival = 0;
function arrival(): number {
  const now = Date.now();
  lastArrival = now > lastArrival ? now : lastArrival + 0.001;
  return lastArrival;
}

export function writersAt(writerOf: WriterOf): TransportFactory {
  return (config, env, request): DatabaseAccess => {
    const hangup = request?.signal;
    // When the request came (built with its access, at its start): its long polls' place in line.
    const arrived = arrival();
    // A stub belongs to the request that made it: each is made when needed.
    const writer = (db: Database, hint: string | undefined) => writerOf(config, env, db, hint);
    const home = () => writer(config.database, config.locationHint);
    const catalog = async (call: CatalogCall) => unwrap(await home().catalog(call));
    const store: CatalogStore = {
      get: async (...a) => (await catalog(["get", a])) as Awaited<ReturnType<CatalogStore["get"]>>,
      list: async (...a) => (await catalog(["list", a])) as Awaited<ReturnType<CatalogStore["list"]>>,
      add: async (...a) => (await catalog(["add", a])) as Awaited<ReturnType<CatalogStore["add"]>>,
      setLocationHint: async (...a) => {
        await catalog(["setLocationHint", a]);
      },
      remove: async (...a) => (await catalog(["remove", a])) as boolean,
    };
    return {
      open: async (db, at) => new WriterQueue(writer(db, at.hint), db, at.shard, { hangup, arrived }),
      prepare: (db, at) => new WriterQueue(writer(db, at.hint), db, at.shard).ready(),
      catalogStore: async () => store,
      // Keys are kept by the default queue's writer, which every change of them goes through.
      keys: () => keyStoreOver(home),
      meter: async (db, at) => unwrap(await writer(db, at.hint).meter()),
      retire: async (databases) => {
        await Promise.allSettled(databases.map((db) => writer(databaseRef(db), undefined).retire()));
      },
      // Queues are made and deleted by the default queue's writer (it keeps the catalog), one at a
      // time per name, and whole even if this request's client goes away.
      manage: {
        put: async (...a) => unwrap(await home().manage(["put", a])) as Awaited<ReturnType<QueueManager["put"]>>,
        delete: async (...a) => unwrap(await home().manage(["delete", a])) as boolean,
      },
      waits: { mode: "native" },
    };
  };
}
