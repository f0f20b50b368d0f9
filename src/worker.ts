/**
 * The Worker entry: the queue's HTTP API (src/app) over the Turso/libSQL databases named by the
 * bindings (parsed once per isolate, see src/app/env.ts): the default queue's, and those of the
 * named queues in its catalog.
 *
 * With the QUEUE_WRITER Durable Object bound (wrangler.toml binds it), the Worker answers the pages
 * and the bearer check at the edge (src/app/edge.ts) and sends every authorized `/v1` request to
 * the QueueWriter of its queue's database: one per database, asked to run next to its primary (a
 * location hint). That object runs the same API over one long-lived transport, so that requests
 * from every isolate share one write path: concurrent claims, acks and publishes ride one
 * `batch(…, "write")`, with one batch in flight to the database (sqld and a Turso primary have one
 * writer; many batches waiting only slow each other down). A Worker cannot do that by itself:
 * workerd does not let one request wait on I/O another request started.
 *
 * Without the binding the Worker serves the API itself, with a transport per request and at most
 * one request per isolate at the database (src/app/gate.ts).
 */
import { DurableObject } from "cloudflare:workers";
import { createApp } from "./app/app.js";
import { type ClaimInput, claimWithAcks } from "./app/claiming.js";
import type { ShardOf } from "./app/context.js";
import { databaseKey } from "./app/databases.js";
import { createEdgeApp, type Writer } from "./app/edge.js";
import { type Bindings, type Config, parseEnv } from "./app/env.js";
import { catalogOf } from "./app/queues.js";
import { perRequestTransports, sharedTransports } from "./app/transports.js";
import { attachMeter, Meter, type MeterReading, type MeterSnapshot } from "./app/writer/meter.js";
import { databaseRef, type Outcome, outcome, unwrap, type WriterPort } from "./app/writer/port.js";
import { Pusher } from "./app/writer/pusher.js";
import { ScheduleClock } from "./app/writer/schedules.js";
import type { Database } from "./core/databases.js";
import type { QueueInfo } from "./core/queues.js";
import { shardLease } from "./core/shard.js";
import type { LibsqlTransport } from "./core/transport.js";
import type { Lease } from "./core/types.js";
import { DEFAULT_QUEUE } from "./rules.js";

/**
 * What the Worker reads from its bindings: the vars and secrets (src/app/env.ts) and the QueueWriter
 * namespace as `npm run types` (wrangler types) declares it in `Env`. All may be missing: the Worker
 * checks them at run time and says what to set (503 NOT_CONFIGURED), or serves without the writer.
 */
export type WorkerBindings = Bindings & { QUEUE_WRITER?: Env["QUEUE_WRITER"] };

/** Where a writer keeps the database it serves, for the wakes that come with no request (its alarm). */
const DATABASE_KEY = "database";
/** Where it keeps its counters and samples. */
const METER_KEY = "meter";

/**
 * A database's single writer: the whole API over one shared transport, and the push deliveries of
 * its subscriptions (src/app/writer/pusher.ts), woken by this object's alarm so that they resume
 * after an eviction with no request arriving. The default queue's writer also keeps the catalog of
 * named queues.
 */
export class QueueWriter extends DurableObject<WorkerBindings> implements WriterPort {
  readonly #transports = sharedTransports();
  #pusher: Pusher | undefined;
  /** Fires its database's schedules on the alarm (shared with the pusher). */
  #clock: ScheduleClock | undefined;
  /** The database this writer serves, and which shard of its queue it is: named by the edge, kept in storage for its alarm. */
  #database: Database | undefined;
  #shard: ShardOf | undefined;
  #retired = false;
  readonly #app = createApp((config, target) => this.#queue(config, target.database, target.shard), {
    dbConcurrency: Number.POSITIVE_INFINITY,
    waits: "dispatch",
    // Reachable only through the namespace binding, from the edge app, which checked the token.
    auth: "forwarded",
    queueDeleted: (config, queue) => this.#retireWriters(config, queue),
    meters: (config, queue) => this.#meters(config, queue),
  });
  /** This writer's counters and samples (`/metrics`, the dashboard's charts), kept in its storage. */
  #meter: Meter | undefined;

  override fetch(request: Request): Promise<Response> {
    this.#unretire();
    return Promise.resolve(this.#app.fetch(request, this.env));
  }

  /** A request came: the edge routes here only for a queue in the catalog (made again after a delete). */
  #unretire(): void {
    this.#retired = false;
  }

  /** The edge's lean path (src/app/writer/port.ts): a claim that does not wait. */
  claim(input: ClaimInput, database: Database): ReturnType<WriterPort["claim"]> {
    this.#unretire();
    return outcome(async () => {
      const config = this.#config();
      const queue = await this.#queue(config, database);
      return claimWithAcks(input, {
        queue: async () => queue,
        idle: async () => {},
        waits: { mode: "dispatch", recheckMs: config.recheckMs },
      });
    });
  }

  /** The edge's lean path: an ack. */
  ack(leaseId: string, database: Database): Promise<Outcome<null>> {
    this.#unretire();
    return outcome(async () => {
      await (await this.#queue(this.#config(), database)).ack(leaseId);
      return null;
    });
  }

  /**
   * A named queue, as this (the default queue's) writer's catalog says: read each time (the edge
   * caches; an edge and a writer may share an isolate, and so lookupQueue's cache).
   */
  lookup(name: string): Promise<Outcome<QueueInfo | null>> {
    return outcome(async () => {
      const config = this.#config();
      return (await catalogOf(config, await this.#queue(config, config.database)).get(name)) ?? null;
    });
  }

  /** Its counters, once stored (null when it never counted anything). */
  meter(): Promise<Outcome<MeterReading | null>> {
    return outcome(async () => {
      if (this.#meter !== undefined) return this.#meter.reading();
      const kept = await this.ctx.storage.get<MeterSnapshot>(METER_KEY);
      return kept === undefined ? null : { counters: kept.counters, held: kept.held };
    });
  }

  /** Its queue was deleted: no more pushes, no more wakes, nothing kept. */
  async retire(): Promise<void> {
    this.#retired = true;
    this.#pusher?.stop();
    this.#pusher = undefined;
    this.#clock?.stop();
    this.#clock = undefined;
    await this.#meter?.stop();
    this.#meter = undefined;
    // Its database went away: a queue made again under the name gets a new one, named afresh.
    this.#database = undefined;
    this.#shard = undefined;
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
  }

  #config(): Config {
    const parsed = parseEnv(this.env);
    if (!parsed.ok) throw parsed.error;
    return parsed.config;
  }

  /** The alarm the pusher asked for (the next thing due, or its safety re-check). */
  override async alarm(): Promise<void> {
    await this.wake();
  }

  /** Reads the subscriptions and delivers what is due (the alarm, and the Worker's cron as a safety net). */
  async wake(): Promise<void> {
    const parsed = parseEnv(this.env);
    if (!parsed.ok || this.#retired) return;
    if (this.#database === undefined) {
      const kept = await this.ctx.storage.get<{ database: Database; shard?: ShardOf }>(DATABASE_KEY);
      this.#database = kept?.database ?? parsed.config.database;
      this.#shard = kept?.shard;
    }
    await this.#queue(parsed.config, this.#database, this.#shard);
    await Promise.all([this.#pusher?.wake(), this.#clock?.tick()]);
  }

  async #queue(config: Config, database: Database | undefined, shard?: ShardOf): Promise<LibsqlTransport> {
    const db = database ?? this.#database ?? config.database;
    if (this.#database === undefined || (shard !== undefined && this.#shard === undefined)) {
      this.#database = db;
      this.#shard = shard;
      if (databaseKey(db) !== databaseKey(config.database)) {
        await this.ctx.storage.put(DATABASE_KEY, { database: databaseRef(db), ...(shard ? { shard } : {}) });
      }
    }
    // Named by its database: a transport (never a sharded queue).
    const queue = (await this.#transports(config, {
      name: DEFAULT_QUEUE,
      database: this.#database,
    })) as LibsqlTransport;
    if (this.#meter === undefined && !this.#retired) {
      this.#meter = new Meter(queue, {
        store: {
          load: () => this.ctx.storage.get<MeterSnapshot>(METER_KEY),
          save: (snapshot) => this.ctx.storage.put(METER_KEY, snapshot),
        },
        sampleMs: config.sampleMs,
      });
      attachMeter(queue, this.#meter);
    }
    if (this.#pusher === undefined && !this.#retired) {
      this.#clock = new ScheduleClock(queue, this.ctx.storage);
      void this.#clock.tick();
      const shardOf = this.#shard;
      this.#pusher = new Pusher(queue, {
        recheckMs: config.recheckMs,
        // A shard's deliveries name their shard, as the queue's API names its leases.
        ...(shardOf && shardOf.count > 1 ? { leaseOut: (l: Lease) => shardLease(l, shardOf) } : {}),
        maxConnections: config.pushConnections,
        delivered: (ok) => this.#meter?.pushed(ok),
        wakeAt: (this.#clock as ScheduleClock).wakeAt,
      });
      void this.#pusher.wake();
    }
    return queue;
  }

  /** The counters of a queue's writers: this one's own, the others' by RPC. */
  async #meters(config: Config, queue: QueueInfo): Promise<MeterReading[]> {
    const own = this.#database === undefined ? undefined : databaseKey(this.#database);
    const readings = await Promise.all(
      queue.databases.map(async (db) => {
        if (databaseKey(db) === own) return this.#meter?.reading();
        const w = writerOf(config, this.env, db, queue.locationHint ?? config.locationHint) as unknown as WriterPort;
        return unwrap(await w.meter());
      }),
    );
    return readings.filter((r): r is MeterReading => r != null);
  }

  /** The writers of a deleted queue's databases let go (their databases are gone). */
  async #retireWriters(config: Config, queue: QueueInfo): Promise<void> {
    await Promise.allSettled(
      queue.databases.map((db) => (writerOf(config, this.env, db, undefined) as unknown as WriterPort).retire()),
    );
  }
}

/**
 * A database's writer: one Durable Object per database (named by its URL, and namespace if any),
 * its id derived once per isolate (a hash each time otherwise). Ids are plain values; stubs are not
 * kept: a stub belongs to the request that made it.
 */
const writerIds = new WeakMap<object, Map<string, DurableObjectId>>();
const writerOf = (config: Config, env: Bindings, db: Database, hint: string | undefined): Writer => {
  const ns = (env as WorkerBindings).QUEUE_WRITER as Env["QUEUE_WRITER"];
  let ids = writerIds.get(ns);
  if (!ids) {
    ids = new Map();
    writerIds.set(ns, ids);
  }
  const key = databaseKey(db);
  let id = ids.get(key);
  if (!id) {
    id = ns.idFromName(key);
    ids.set(key, id);
  }
  const locationHint = (hint ?? config.locationHint) as DurableObjectLocationHint | undefined;
  return ns.get(id, locationHint === undefined ? undefined : { locationHint }) as unknown as Writer;
};

// Built on first use, not at startup: an isolate needs only one of them.
let standalone: ReturnType<typeof createApp> | undefined;
let edge: ReturnType<typeof createEdgeApp> | undefined;

export default {
  fetch(request: Request, env: WorkerBindings, ctx?: ExecutionContext) {
    // Without the binding (the wrangler.toml block removed) every request is served here.
    if (env.QUEUE_WRITER === undefined) {
      standalone ??= createApp(perRequestTransports());
      return standalone.fetch(request, env, ctx);
    }
    edge ??= createEdgeApp(writerOf);
    return edge.fetch(request, env, ctx);
  },

  /** The cron trigger (wrangler.toml): wakes the default queue's writer, in case its alarm was lost. */
  async scheduled(_controller: ScheduledController, env: WorkerBindings) {
    const parsed = parseEnv(env);
    if (env.QUEUE_WRITER === undefined || !parsed.ok) return;
    const config = parsed.config;
    await (writerOf(config, env, config.database, config.locationHint) as unknown as QueueWriter).wake();
  },
} satisfies ExportedHandler<WorkerBindings>;
