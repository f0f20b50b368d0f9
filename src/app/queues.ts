/**
 * Named queues in the Worker: where their databases come from (QUEUE_DATABASES), the catalog that
 * lists them (kept in the default queue's database, src/core/queues.ts), and a short-lived cache of
 * lookups, so that a request to a named queue costs no read of the catalog most of the time.
 */
import { type DatabaseProvider, sqldNamespaces, staticDatabases, tursoDatabases } from "../core/databases.js";
import { QueueError } from "../core/errors.js";
import { QueueCatalog, type QueueInfo } from "../core/queues.js";
import type { LibsqlTransport } from "../core/transport.js";
import { DEFAULT_QUEUE } from "../rules.js";
import { openDatabase } from "./databases.js";
import type { Config } from "./env.js";

/** How long a lookup is trusted: a queue deleted elsewhere is still routed to for at most this long. */
const LOOKUP_TTL_MS = 5_000;

export function providerOf(config: Config): DatabaseProvider {
  const d = config.databases;
  switch (d.kind) {
    case "namespaces":
      return sqldNamespaces({ url: config.databaseUrl, adminUrl: d.adminUrl, authToken: config.databaseAuthToken });
    case "turso":
      return tursoDatabases({
        organization: d.organization,
        group: d.group,
        apiToken: d.apiToken,
        databaseToken: config.databaseAuthToken ?? "",
      });
    case "static":
      return staticDatabases(d.map);
    case "none":
      return {
        create: async () => {
          throw new QueueError(
            "INVALID_ARGUMENT",
            "queue: this Worker makes no databases for named queues (set QUEUE_DATABASES: namespaces, turso, or a map)",
            { field: "queue" },
          );
        },
        drop: async () => false,
      };
  }
}

/** The catalog, kept in the default queue's database (`home`, that database's transport). */
export function catalogOf(config: Config, home: LibsqlTransport): QueueCatalog {
  return new QueueCatalog({
    home,
    defaultDatabase: config.database,
    provider: providerOf(config),
    defaultLocationHint: config.locationHint,
    open: async (db) => {
      const { transport, close } = await openDatabase(db, config);
      return {
        stats: () => transport.stats(),
        queueSettings: () => transport.queueSettings(),
        setQueue: (patch) => transport.setQueue(patch),
        close,
      };
    },
  });
}

const looked = new Map<string, { at: number; queue: Promise<QueueInfo | undefined> }>();

/**
 * The queue named `name` (cached for a few seconds per isolate), asked of `read` when not cached
 * (the catalog, through the default queue's transport, or the default queue's writer); QUEUE_NOT_FOUND
 * when there is none.
 */
export async function lookupQueue(
  config: Config,
  name: string,
  read: (name: string) => Promise<QueueInfo | undefined>,
): Promise<QueueInfo> {
  const key = `${config.databaseUrl}\n${name}`;
  const now = Date.now();
  let entry = looked.get(key);
  if (entry === undefined || now - entry.at > LOOKUP_TTL_MS) {
    if (looked.size > 1000) looked.clear();
    entry = {
      at: now,
      queue: name === DEFAULT_QUEUE ? Promise.resolve(undefined) : read(name),
    };
    looked.set(key, entry);
    entry.queue.catch(() => looked.delete(key));
  }
  const queue = name === DEFAULT_QUEUE ? catalogDefault(config) : await entry.queue;
  if (queue === undefined) {
    throw new QueueError("QUEUE_NOT_FOUND", `queue: no queue ${name} (make it with PUT /v1/queues/${name})`, {
      field: "queue",
    });
  }
  return queue;
}

/** Forgets what was looked up about `name` (after a put or a delete through this isolate). */
export function forgetQueue(config: Config, name: string): void {
  looked.delete(`${config.databaseUrl}\n${name}`);
}

const catalogDefault = (config: Config): QueueInfo => ({
  name: DEFAULT_QUEUE,
  shards: 1,
  databases: [config.database],
  locationHint: config.locationHint,
  createdAt: 0,
});

const turns = new Map<string, number>();

/**
 * Where the claims of a sharded queue built for one request start: one shard further each time in
 * this isolate, so that no shard is always asked first (a ShardedQueue is built per request).
 */
export function nextTurn(name: string): number {
  const turn = turns.get(name) ?? 0;
  if (turns.size > 1000) turns.clear();
  turns.set(name, turn + 1);
  return turn;
}
