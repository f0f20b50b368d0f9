/**
 * From a queue's name to what serves it, the same way wherever the app runs: the catalog resolves
 * the name (src/core/queues.ts: its databases from QUEUE_DATABASES and the URLs configured today),
 * and the deployment's DatabaseAccess opens each database (its writer at the Worker's edge, a
 * transport elsewhere). A queue of several databases is a ShardedQueue over them.
 */
import { type DatabaseProvider, sqldNamespaces, staticDatabases, tursoDatabases } from "../core/databases.js";
import { QueueError, type QueueErrorCode } from "../core/errors.js";
import { QueueCatalog, type QueueInfo, type QueueManager, type ResolvedQueue } from "../core/queues.js";
import { ShardedQueue, ShardOutages } from "../core/sharded.js";
import type { DatabaseAccess, Placement, ServedQueue } from "./context.js";
import type { Config } from "./env.js";

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
    case "none": {
      const none = (name: string) =>
        new QueueError(
          "INVALID_ARGUMENT",
          `queue: this Worker has no databases for named queues (set QUEUE_DATABASES: namespaces, turso, or a map; asked for ${name})`,
          { field: "queue" },
        );
      return {
        create: async (name) => {
          throw none(name);
        },
        locate: async (name) => {
          throw none(name);
        },
        drop: async () => false,
      };
    }
  }
}

/** Where the `index`-th database of `queue` is served from. */
export const placementOf = (queue: QueueInfo, index: number, config: Config): Placement => ({
  hint: queue.locationHint ?? config.locationHint,
  shard: { index, count: queue.shards, queue: queue.name },
});

/**
 * The catalog for a configuration and a way of reaching databases, built once per configuration (an
 * isolate's): its cache of resolved queues lives as long as the isolate.
 */
const catalogs = new WeakMap<Config, { access: DatabaseAccess; catalog: QueueCatalog }>();

export function catalogFor(config: Config, access: DatabaseAccess): QueueCatalog {
  const kept = catalogs.get(config);
  // The access is built per request; the catalog reaches databases through the latest one.
  if (kept !== undefined) {
    kept.access = access;
    return kept.catalog;
  }
  const entry: { access: DatabaseAccess; catalog: QueueCatalog } = {
    access,
    catalog: catalogOver(config, () => entry.access, access.manage !== undefined),
  };
  catalogs.set(config, entry);
  return entry.catalog;
}

/**
 * A catalog that reaches databases through `access()` (called at each use). With `managed`, queues
 * are made and deleted where the access says (`manage`: the Worker's edge asks its default queue's
 * writer).
 */
export function catalogOver(config: Config, access: () => DatabaseAccess, managed: boolean): QueueCatalog {
  const manager = (): QueueManager => {
    const m = access().manage;
    if (m === undefined) throw new QueueError("DATABASE", "this deployment has no place to make or delete queues");
    return m;
  };
  return new QueueCatalog({
    home: {
      get: async (name): Promise<QueueInfo | undefined> => (await access().catalogStore()).get(name),
      list: async (limit) => (await access().catalogStore()).list(limit),
      add: async (q) => (await access().catalogStore()).add(q),
      setLocationHint: async (name, hint) => (await access().catalogStore()).setLocationHint(name, hint),
      remove: async (name) => (await access().catalogStore()).remove(name),
    },
    defaultDatabase: config.database,
    provider: providerOf(config),
    defaultLocationHint: config.locationHint,
    open: async (db, { queue, index }) => {
      const at = placementOf(queue, index, config);
      const q = await access().open(db, at);
      const outages = outagesOf(queue.name);
      return {
        // A shard found down is listed as such at once, not waited for (its calls will find it back).
        stats: () => {
          const down = outages.down(index);
          if (down === undefined) return outages.track(index, () => q.stats());
          return Promise.reject(new QueueError(down.code as QueueErrorCode, `shard ${index} is down`));
        },
        ready: () => access().prepare(db, at),
      };
    },
    retire: async (queue) => {
      await access().retire?.(queue.databases);
    },
    ...(managed
      ? {
          manage: {
            put: (name, settings) => manager().put(name, settings),
            delete: (name, options) => manager().delete(name, options),
          },
        }
      : {}),
  });
}

/** What serves `queue`: its database, or a ShardedQueue over its databases. */
export async function serve(config: Config, access: DatabaseAccess, queue: ResolvedQueue): Promise<ServedQueue> {
  const shards = await Promise.all(queue.databases.map((db, i) => access.open(db, placementOf(queue, i, config))));
  if (shards.length === 1) return shards[0] as ServedQueue;
  return new ShardedQueue(shards, { turn: nextTurn(queue.name), outages: outagesOf(queue.name), queue: queue.name });
}

const turns = new Map<string, number>();
const outages = new Map<string, ShardOutages>();

/**
 * Which shards of a sharded queue this isolate found down, kept across its requests (a ShardedQueue
 * is built per request), so that a shard down holds back none of the next requests either.
 */
function outagesOf(name: string): ShardOutages {
  let kept = outages.get(name);
  if (kept === undefined) {
    if (outages.size > 1000) outages.clear();
    kept = new ShardOutages();
    outages.set(name, kept);
  }
  return kept;
}

/**
 * Where the claims of a sharded queue built for one request start: one shard further each time in
 * this isolate, so that no shard is always asked first (a ShardedQueue is built per request).
 */
function nextTurn(name: string): number {
  const turn = turns.get(name) ?? 0;
  if (turns.size > 1000) turns.clear();
  turns.set(name, turn + 1);
  return turn;
}
