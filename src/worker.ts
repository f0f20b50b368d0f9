/**
 * The Worker entry: the queue's HTTP API (src/app) over the Turso/libSQL database named by the
 * bindings (parsed once per isolate, see src/app/env.ts).
 *
 * With the QUEUE_WRITER Durable Object bound (wrangler.toml binds it), the Worker answers
 * `/healthz` and the bearer check at the edge and forwards every authorized `/v1` request to one
 * QueueWriter per database. That object runs the same API over one long-lived transport, so that
 * requests from every isolate share one write path: concurrent claims, acks and publishes ride one
 * `batch(…, "write")`, with one batch in flight to the database (sqld and a Turso primary have one
 * writer; many batches waiting only slow each other down). A Worker cannot do that by itself:
 * workerd does not let one request wait on I/O another request started.
 *
 * Without the binding the Worker serves the API itself, with a transport per request and at most
 * one request per isolate at the database (src/app/gate.ts).
 */
import { DurableObject } from "cloudflare:workers";
import { createApp, createEdgeApp } from "./app/app.js";
import { type ClaimInput, claimWithAcks } from "./app/claiming.js";
import { type Bindings, type Config, parseEnv } from "./app/env.js";
import { perRequestTransports, sharedTransports } from "./app/transports.js";
import { type Outcome, outcome, type WriterPort } from "./app/writer/port.js";
import { Pusher } from "./app/writer/pusher.js";
import type { LibsqlTransport } from "./core/transport.js";

/**
 * What the Worker reads from its bindings: the vars and secrets (src/app/env.ts) and the QueueWriter
 * namespace as `npm run types` (wrangler types) declares it in `Env`. All may be missing: the Worker
 * checks them at run time and says what to set (503 NOT_CONFIGURED), or serves without the writer.
 */
export type WorkerBindings = Bindings & { QUEUE_WRITER?: Env["QUEUE_WRITER"] };

/**
 * The database's single writer: the whole API over one shared transport, and the push deliveries
 * of its subscriptions (src/app/writer/pusher.ts), woken by this object's alarm so that they resume
 * after an eviction with no request arriving.
 */
export class QueueWriter extends DurableObject<WorkerBindings> implements WriterPort {
  readonly #transports = sharedTransports();
  #pusher: Pusher | undefined;
  readonly #app = createApp((config) => this.#queue(config), {
    dbConcurrency: Number.POSITIVE_INFINITY,
    waits: "dispatch",
    // Reachable only through the namespace binding, from the edge app, which checked the token.
    auth: "forwarded",
  });

  override fetch(request: Request): Promise<Response> {
    return Promise.resolve(this.#app.fetch(request, this.env));
  }

  /** The edge's lean path (src/app/writer/port.ts): a claim that does not wait. */
  claim(input: ClaimInput): ReturnType<WriterPort["claim"]> {
    return outcome(async () => {
      const config = this.#config();
      const queue = await this.#queue(config);
      return claimWithAcks(input, {
        queue: async () => queue,
        idle: async () => {},
        waits: { mode: "dispatch", recheckMs: config.recheckMs },
      });
    });
  }

  /** The edge's lean path: an ack. */
  ack(leaseId: string): Promise<Outcome<null>> {
    return outcome(async () => {
      await (await this.#queue(this.#config())).ack(leaseId);
      return null;
    });
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
    if (!parsed.ok) return;
    await this.#queue(parsed.config);
    await this.#pusher?.wake();
  }

  async #queue(config: Config): Promise<LibsqlTransport> {
    const queue = await this.#transports(config);
    if (this.#pusher === undefined) {
      this.#pusher = new Pusher(queue, {
        recheckMs: config.recheckMs,
        maxConnections: config.pushConnections,
        wakeAt: (at) => this.ctx.storage.setAlarm(at),
      });
      void this.#pusher.wake();
    }
    return queue;
  }
}

/**
 * The writer's id, derived once per isolate (a hash each time otherwise). Ids are plain values;
 * stubs are not kept: a stub belongs to the request that made it.
 */
const writerIds = new WeakMap<object, Map<string, DurableObjectId>>();
const writerStub = (config: Config, env: Bindings) => {
  const ns = (env as WorkerBindings).QUEUE_WRITER as Env["QUEUE_WRITER"];
  let ids = writerIds.get(ns);
  if (!ids) {
    ids = new Map();
    writerIds.set(ns, ids);
  }
  let id = ids.get(config.databaseUrl);
  if (!id) {
    id = ns.idFromName(config.databaseUrl);
    ids.set(config.databaseUrl, id);
  }
  return ns.get(id);
};

const writerOf = (config: Config, env: Bindings): WriterPort => writerStub(config, env) as unknown as WriterPort;

// Built on first use, not at startup: an isolate needs only one of them.
let alone: ReturnType<typeof createApp> | undefined;
let edge: ReturnType<typeof createEdgeApp> | undefined;

// One writer per database: the name is the database URL.
const forwardToWriter = (request: Request, config: Config, env: Bindings) => writerStub(config, env).fetch(request);

export default {
  fetch(request: Request, env: WorkerBindings, ctx?: ExecutionContext) {
    // Without the binding (the wrangler.toml block removed) every request is served here.
    if (env.QUEUE_WRITER === undefined) {
      alone ??= createApp(perRequestTransports());
      return alone.fetch(request, env, ctx);
    }
    edge ??= createEdgeApp(forwardToWriter, writerOf);
    return edge.fetch(request, env, ctx);
  },

  /** The cron trigger (wrangler.toml): wakes the writer, in case its alarm was lost. */
  async scheduled(_controller: ScheduledController, env: WorkerBindings) {
    const parsed = parseEnv(env);
    if (env.QUEUE_WRITER === undefined || !parsed.ok) return;
    const ns = env.QUEUE_WRITER;
    await ns.get(ns.idFromName(parsed.config.databaseUrl)).wake();
  },
} satisfies ExportedHandler<WorkerBindings>;
