/**
 * The queue's HTTP API as a Hono app, built from a transport factory so that the Worker entry (or a
 * test, or your own Worker) decides how the database is reached. Routes are declared with their
 * schemas (src/app/route.ts, src/contract/schemas.ts); handlers stay thin: take the validated input,
 * call the library, shape the answer (src/app/answers.ts).
 */
import { Hono, type MiddlewareHandler } from "hono";
import { methodNotAllowed } from "hono/method-not-allowed";
import { sleepOrReturn } from "../core/backoff.js";
import type { Database } from "../core/databases.js";
import type { QueueInfo } from "../core/queues.js";
import type { LibsqlTransport } from "../core/transport.js";
import { DEFAULT_QUEUE } from "../rules.js";
import { requireBearer, trustForwarded } from "./auth.js";
import type { AppEnv, ShardOf, TransportFactory } from "./context.js";
import type { Config } from "./env.js";
import { errorBody, HttpError, handleError } from "./errors.js";
import { Gate } from "./gate.js";
import { catalogOf } from "./queues.js";
import { claims } from "./routes/claims.js";
import { deadLetters } from "./routes/dead-letters.js";
import { groupMessages } from "./routes/groups.js";
import { leases } from "./routes/leases.js";
import { messages } from "./routes/messages.js";
import { service } from "./routes/metrics.js";
import { pages } from "./routes/pages.js";
import { queues } from "./routes/queues.js";
import { schedules } from "./routes/schedules.js";
import { settings } from "./routes/settings.js";
import { inspect } from "./routes/stats.js";
import { subscriptions } from "./routes/subscriptions.js";
import type { MeterReading } from "./writer/meter.js";

export type { AppEnv, TransportFactory } from "./context.js";
export { API_ROUTES } from "./routes/index.js";
export { PAGE_ROUTES } from "./routes/pages.js";

export interface AppOptions {
  /**
   * Requests of this app (one per isolate) that may talk to the database at once (default 1:
   * writers serialize in the database anyway, and concurrent write transactions only wait on each
   * other). `Infinity` when the transport is shared and limits its own writes (the Durable Object).
   */
  dbConcurrency?: number;
  /** Longest a request waits for one of those slots before a 503 BUSY, in ms (default 30 000). */
  dbWaitMs?: number;
  /**
   * How a claim's `wait` (long poll) is served: "dispatch" when the transport is shared and sees
   * every write (the QueueWriter), re-checking every QUEUE_RECHECK_SECONDS for writers that bypass it;
   * "native" when the queue waits itself (a sharded queue over its shards' writers, at the edge);
   * otherwise (default) by polling with growing pauses inside the request.
   */
  waits?: "dispatch" | "native" | "poll";
  /**
   * "bearer" (default): every `/v1` request must carry `Authorization: Bearer <QUEUE_TOKEN>`.
   * "forwarded": requests come only from `createEdgeApp`, which checked it (the QueueWriter), and
   * which names the database a request is for (`DATABASE_HEADER`).
   */
  auth?: "bearer" | "forwarded";
  /** After a queue's deletion through this app: let go of what served it (default: nothing). */
  queueDeleted?: (config: Config, queue: QueueInfo) => Promise<void>;
  /** The counters kept by a queue's writers (`/metrics`); default: none kept. */
  meters?: (config: Config, queue: QueueInfo) => Promise<MeterReading[]>;
}

/**
 * The database a request forwarded by the edge is for (JSON: `{url, namespace?}`, no token): the
 * QueueWriter serves the database it is named by. Trusted only from the edge (`auth: "forwarded"`);
 * the edge never passes on a client's.
 */
export const DATABASE_HEADER = "x-tq-database";

/**
 * What both apps answer the same way: the pages (no auth, no database), 405 for a known path asked
 * with another method, 404 for the rest, and one error handler.
 */
export function baseApp(): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.use(
    methodNotAllowed({
      app,
      onMethodNotAllowed: (c, allowed) =>
        handleError(
          new HttpError(405, "METHOD_NOT_ALLOWED", `${c.req.method} is not allowed here (use ${allowed.join(", ")})`, {
            Allow: allowed.join(", "),
          }),
          c,
        ),
    }),
  );
  app.route("/", pages);
  app.notFound((c) => c.json(errorBody("NOT_FOUND", `no route ${c.req.method} ${new URL(c.req.url).pathname}`), 404));
  app.onError(handleError);
  return app;
}

export function createApp(factory: TransportFactory, options: AppOptions = {}): Hono<AppEnv> {
  const app = baseApp();
  const limit = options.dbConcurrency ?? 1;
  const gate = Number.isFinite(limit) ? new Gate(limit, options.dbWaitMs ?? 30_000) : undefined;
  const forwarded = options.auth === "forwarded";
  const waits = options.waits ?? "poll";

  const setup: MiddlewareHandler<AppEnv> = async (c, next) => {
    const config = c.get("config");
    const header = forwarded ? c.req.header(DATABASE_HEADER) : undefined;
    const named = header === undefined ? undefined : (JSON.parse(header) as Database & { shard?: ShardOf });
    const database = named && { url: named.url, ...(named.namespace ? { namespace: named.namespace } : {}) };
    let held = false;
    c.set("queueName", DEFAULT_QUEUE);
    c.set("queue", async () => {
      if (!held && gate) {
        await gate.acquire();
        held = true;
      }
      return factory(config, { name: c.get("queueName"), database, shard: named?.shard }, c.env);
    });
    c.set("catalog", async () =>
      catalogOf(
        config,
        (await factory(config, { name: DEFAULT_QUEUE, database: config.database }, c.env)) as LibsqlTransport,
      ),
    );
    c.set("queueDeleted", (queue) => options.queueDeleted?.(config, queue) ?? Promise.resolve());
    c.set("meters", (queue) => options.meters?.(config, queue) ?? Promise.resolve([]));
    c.set("idle", async (ms, signal) => {
      if (held) {
        gate?.release();
        held = false;
      }
      await sleepOrReturn(ms, signal);
    });
    c.set(
      "waits",
      waits === "dispatch"
        ? { mode: "dispatch", recheckMs: config.recheckMs }
        : waits === "native"
          ? { mode: "native" }
          : { mode: "poll" },
    );
    try {
      await next();
    } finally {
      if (held) gate?.release();
    }
  };
  const auth = forwarded ? trustForwarded : requireBearer;
  app.use("/v1/*", auth, setup);
  app.use("/metrics", auth, setup);

  app.route("/", messages);
  app.route("/", claims);
  app.route("/", leases);
  app.route("/", inspect);
  app.route("/", groupMessages);
  app.route("/", deadLetters);
  app.route("/", subscriptions);
  app.route("/", settings);
  app.route("/", schedules);
  app.route("/", queues);
  app.route("/", service);
  return app;
}
