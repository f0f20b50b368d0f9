/**
 * The Worker entry: the queue's HTTP API (src/app) over the Turso/libSQL databases named by the
 * bindings (parsed once per isolate, see src/app/env.ts): the default queue's, and those of the
 * named queues in its catalog.
 *
 * With the QUEUE_WRITER Durable Object bound (wrangler.toml binds it), the Worker runs the API at
 * the edge and reaches each database through its QueueWriter (src/app/edge.ts): one per database,
 * asked to run next to its primary (a location hint). A writer holds one long-lived transport, so
 * that requests from every isolate share one write path: concurrent claims, acks and publishes ride
 * one `batch(…, "write")`, with one batch in flight to the database (sqld and a Turso primary have
 * one writer; many batches waiting only slow each other down). A Worker cannot do that by itself:
 * workerd does not let one request wait on I/O another request started.
 *
 * Without the binding the Worker serves the API itself, with a transport per request and at most
 * one request per isolate at the database (src/app/gate.ts).
 */
import { DurableObject } from "cloudflare:workers";
import { createApp } from "./app/app.js";
import type { DatabaseAccess } from "./app/context.js";
import { databaseKey } from "./app/databases.js";
import { type WriterOf, writersAt } from "./app/edge.js";
import { type Bindings, type Config, parseEnv } from "./app/env.js";
import { type KeyCall, runKeyCall } from "./app/key-port.js";
import { catalogOver } from "./app/queues.js";
import { perRequestTransports, sharedTransports } from "./app/transports.js";
import { type Call, databaseRef, type Outcome, outcome, runCalls, type WriterTarget } from "./app/writer/calls.js";
import { dispatcherFor } from "./app/writer/dispatcher.js";
import { attachMeter, Meter, type MeterReading, type MeterSnapshot } from "./app/writer/meter.js";
import { Pusher } from "./app/writer/pusher.js";
import {
  type CatalogCall,
  type ManageCall,
  WAIT_PATH,
  type WaitAnswer,
  type WaitBody,
  type Writer,
} from "./app/writer/remote.js";
import { ScheduleClock } from "./app/writer/schedules.js";
import type { Database } from "./core/databases.js";
import { keyRingOf } from "./core/keys.js";
import { catalogStoreOf, type QueueCatalog, queueGone } from "./core/queues.js";
import { placeShard, type ShardOf, shardLease } from "./core/shard.js";
import type { LibsqlTransport } from "./core/transport.js";
import type { Lease } from "./core/types.js";
import { MAX_CLAIM_WAIT } from "./rules.js";

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
/** Set while its queue is deleted (until the queue is made again): it serves nothing. */
const RETIRED_KEY = "retired";

/**
 * A database's single writer: the queue operations the edge asks of its database (src/app/writer/calls.ts),
 * its long polls (src/app/writer/dispatcher.ts) and the push deliveries of its subscriptions
 * (src/app/writer/pusher.ts), woken by this object's alarm so that they resume after an eviction with
 * no request arriving. The default queue's writer also keeps the catalog's rows.
 */
export class QueueWriter extends DurableObject<WorkerBindings> implements Writer {
  readonly #transports = sharedTransports();
  #pusher: Pusher | undefined;
  /** Fires its database's schedules on the alarm (shared with the pusher). */
  #clock: ScheduleClock | undefined;
  /** The database this writer serves, and which shard of its queue it is: named by the edge, kept in storage for its alarm. */
  #target: WriterTarget | undefined;
  /** Whether its queue was deleted (kept in storage: undefined until read). */
  #retired: boolean | undefined;
  /** Long polls under way, by id: the edge may end one early (another shard answered first). */
  readonly #waits = new Map<string, AbortController>();
  /** Long polls ended before they arrived (a cancel may overtake its wait), by id, with when. */
  readonly #cancelled = new Map<string, number>();
  /** This writer's counters and samples (`/metrics`, the dashboard's charts), kept in its storage. */
  #meter: Meter | undefined;
  /** On the default queue's writer: the catalog that makes and deletes queues, one at a time per name. */
  #queues: { config: Config; catalog: QueueCatalog } | undefined;

  /** The edge's calls on this writer's database, started together (their writes ride one batch). */
  async run(target: WriterTarget, calls: Call[]): Promise<Outcome<unknown>[]> {
    const opened = await outcome(() => this.#serve(target));
    if ("error" in opened) return calls.map(() => opened);
    return runCalls(opened.ok, calls);
  }

  /** On the default queue's writer: the catalog's rows. */
  catalog([op, args]: CatalogCall): Promise<Outcome<unknown>> {
    return outcome(async () => {
      const config = this.#config();
      const store = catalogStoreOf(await this.#home(config));
      return (store[op] as (...a: unknown[]) => Promise<unknown>)(...args);
    });
  }

  /** On the default queue's writer: makes or deletes a queue, one at a time per name, whole even if the caller leaves. */
  manage([op, args]: ManageCall): Promise<Outcome<unknown>> {
    return outcome(async () => {
      const catalog = this.#catalog(this.#config());
      return op === "put" ? catalog.put(...args) : catalog.delete(...args);
    });
  }

  /** A long poll: its calls first, then the wait (over HTTP: a client who hangs up ends it). */
  override async fetch(request: Request): Promise<Response> {
    if (new URL(request.url).pathname !== WAIT_PATH || request.method !== "POST")
      return new Response(null, { status: 404 });
    const body = (await request.json()) as WaitBody;
    const ended = new AbortController();
    this.#waits.set(body.id, ended);
    if (this.#cancelled.delete(body.id)) ended.abort();
    try {
      const config = this.#config();
      const opened = await outcome(() => this.#serve(body.target));
      if ("error" in opened)
        return Response.json({ outcomes: body.calls.map(() => opened), leases: opened } satisfies WaitAnswer);
      const transport = opened.ok;
      const outcomes = runCalls(transport, body.calls);
      const leases = await outcome(() =>
        dispatcherFor(transport, config.recheckMs).wait({
          workerId: body.workerId,
          visibility: body.visibility,
          n: body.n,
          minPriority: body.minPriority,
          waitMs: body.waitMs,
          signal: request.signal,
          end: ended.signal,
          since: body.since,
        }),
      );
      return Response.json({ outcomes: await outcomes, leases } satisfies WaitAnswer);
    } finally {
      this.#waits.delete(body.id);
    }
  }

  async cancelWait(id: string): Promise<void> {
    const wait = this.#waits.get(id);
    if (wait !== undefined) {
      wait.abort();
      return;
    }
    // Not arrived yet, or over: kept as long as a wait may last, so that it ends as it arrives.
    const now = Date.now();
    for (const [old, at] of this.#cancelled) {
      if (now - at <= MAX_CLAIM_WAIT * 1000) break;
      this.#cancelled.delete(old);
    }
    this.#cancelled.set(id, now);
  }

  /**
   * The edge's key store (src/app/key-port.ts), kept in the default queue's database: every change of
   * keys goes through this (the default queue's) writer, so it answers the edges' syncs from what it
   * read, re-reading at most once a minute (for a change made behind the API's back).
   */
  keys(call: KeyCall): Promise<Outcome<unknown>> {
    return outcome(async () => {
      const config = this.#config();
      return runKeyCall(keyRingOf(await this.#home(config), 60_000), call);
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

  /**
   * Its queue was deleted: its long polls end (QUEUE_NOT_FOUND), no more pushes, no more wakes, its
   * connection let go, nothing kept but that: it answers QUEUE_NOT_FOUND until its queue is made again.
   */
  async retire(): Promise<void> {
    this.#retired = true;
    this.#pusher?.stop();
    this.#pusher = undefined;
    this.#clock?.stop();
    this.#clock = undefined;
    await this.#meter?.stop();
    this.#meter = undefined;
    // Its database is going: a queue made again under the name gets a new one, with its schema.
    const target = this.#target;
    this.#target = undefined;
    const parsed = parseEnv(this.env);
    if (target !== undefined && parsed.ok) await this.#transports(parsed.config, this.env).retire?.([target.database]);
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
    await this.ctx.storage.put(RETIRED_KEY, true);
  }

  /** Its queue was made (again): it serves `target`, with its schema in place. */
  prepare(target: WriterTarget): Promise<Outcome<void>> {
    return outcome(async () => {
      if (this.#retired !== false) {
        this.#retired = false;
        await this.ctx.storage.delete(RETIRED_KEY);
      }
      await this.#serve(target);
    });
  }

  /**
   * On the default queue's writer: the catalog as it makes and deletes queues. Its rows are here;
   * the queues' databases are made ready, counted and retired through their own writers.
   */
  #catalog(config: Config): QueueCatalog {
    if (this.#queues?.config !== config) {
      const edge = writersAt(writerOf)(config, this.env);
      const access: DatabaseAccess = {
        open: edge.open,
        prepare: edge.prepare,
        retire: edge.retire,
        keys: edge.keys,
        waits: edge.waits,
        catalogStore: async () => catalogStoreOf(await this.#home(config)),
      };
      this.#queues = { config, catalog: catalogOver(config, () => access, false) };
    }
    return this.#queues.catalog;
  }

  /** Whether its queue was deleted (read from storage once). */
  async #isRetired(): Promise<boolean> {
    this.#retired ??= (await this.ctx.storage.get<boolean>(RETIRED_KEY)) === true;
    return this.#retired;
  }

  /** The default queue's database: on its writer, the catalog's rows and the keys. */
  #home(config: Config): Promise<LibsqlTransport> {
    return this.#serve({ database: databaseRef(config.database), shard: { index: 0, count: 1 } });
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
    if (!parsed.ok || (await this.#isRetired())) return;
    const kept = this.#target ?? (await this.ctx.storage.get<Partial<WriterTarget>>(DATABASE_KEY));
    await this.#serve({
      database: kept?.database ?? databaseRef(parsed.config.database),
      shard: kept?.shard ?? { index: 0, count: 1 },
    });
    await Promise.all([this.#pusher?.wake(), this.#clock?.tick()]);
  }

  /** The transport of the database the edge names (the one this writer is named after), with its pusher and meter. */
  async #serve(target: WriterTarget): Promise<LibsqlTransport> {
    // An edge that has not heard of the delete yet (its catalog's cache) still routes here.
    if (this.#retired !== false && (await this.#isRetired())) throw queueGone();
    const config = this.#config();
    if (this.#target === undefined) {
      this.#target = target;
      if (databaseKey(target.database) !== databaseKey(config.database)) {
        await this.ctx.storage.put(DATABASE_KEY, target);
      }
    }
    const db: Database = this.#target.database;
    const access = this.#transports(config, this.env);
    const queue = (await access.open(db, { hint: undefined, shard: this.#target.shard })) as LibsqlTransport;
    // A database serves as one shard of one queue: asked as another, it refuses (SHARD_MISMATCH).
    await placeShard(queue, target.shard);
    if (this.#meter === undefined) {
      this.#meter = new Meter(queue, {
        store: {
          load: () => this.ctx.storage.get<MeterSnapshot>(METER_KEY),
          save: (snapshot) => this.ctx.storage.put(METER_KEY, snapshot),
        },
        sampleMs: config.sampleMs,
      });
      attachMeter(queue, this.#meter);
    }
    if (this.#pusher === undefined) {
      this.#clock = new ScheduleClock(queue, this.ctx.storage);
      void this.#clock.tick();
      const shard: ShardOf = this.#target.shard;
      this.#pusher = new Pusher(queue, {
        recheckMs: config.recheckMs,
        // A shard's deliveries name their shard, as the queue's API names its leases.
        ...(shard.count > 1 ? { leaseOut: (l: Lease) => shardLease(l, shard) } : {}),
        maxConnections: config.pushConnections,
        delivered: (ok) => this.#meter?.pushed(ok),
        wakeAt: (this.#clock as ScheduleClock).wakeAt,
      });
      void this.#pusher.wake();
    }
    return queue;
  }
}

/**
 * A database's writer: one Durable Object per database (named by its URL, and namespace if any),
 * its id derived once per isolate (a hash each time otherwise). Ids are plain values; stubs are not
 * kept: a stub belongs to the request that made it.
 */
const writerIds = new WeakMap<object, Map<string, DurableObjectId>>();
const writerOf: WriterOf = (config, env, db, hint) => {
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
let edge: ReturnType<typeof createApp> | undefined;

export default {
  fetch(request: Request, env: WorkerBindings, ctx?: ExecutionContext) {
    // Without the binding (the wrangler.toml block removed) every request is served here.
    if (env.QUEUE_WRITER === undefined) {
      standalone ??= createApp(perRequestTransports());
      return standalone.fetch(request, env, ctx);
    }
    edge ??= createApp(writersAt(writerOf), { dbConcurrency: Number.POSITIVE_INFINITY });
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
