/**
 * The queue's HTTP API as a Hono app, built from a transport factory so that the Worker entry (or a
 * test, or your own Worker) decides how the database is reached. Routes are declared with their
 * schemas (src/app/route.ts, src/contract/schemas.ts); handlers stay thin: take the validated input,
 * call the library, shape the answer (src/app/answers.ts).
 */
import { type Context, Hono, type MiddlewareHandler } from "hono";
import { methodNotAllowed } from "hono/method-not-allowed";
import { sleepOrReturn } from "../core/backoff.js";
import type { KeyStore } from "../core/keys.js";
import { DEFAULT_QUEUE } from "../rules.js";
import { requireKey } from "./auth.js";
import type { AppEnv, DatabaseAccess, TransportFactory } from "./context.js";
import type { Config } from "./env.js";
import { errorBody, HttpError, handleError } from "./errors.js";
import { Gate } from "./gate.js";
import { catalogFor, placementOf, serve } from "./queues.js";
import { claims } from "./routes/claims.js";
import { deadLetters } from "./routes/dead-letters.js";
import { groupMessages } from "./routes/groups.js";
import { keys } from "./routes/keys.js";
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
   * other). `Infinity` where what reaches the databases limits its own writes (the QueueWriters, a
   * shared transport).
   */
  dbConcurrency?: number;
  /** Longest a request waits for one of those slots before a 503 BUSY, in ms (default 30 000). */
  dbWaitMs?: number;
}

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

/**
 * The API over databases reached as `factory` says (src/app/transports.ts, or the QueueWriters at the
 * Worker's edge): every `/v1` request needs a key with its route's scope; its queue is resolved by
 * the catalog.
 */
export function createApp(factory: TransportFactory, options: AppOptions = {}): Hono<AppEnv> {
  const app = baseApp();
  const limit = options.dbConcurrency ?? 1;
  const gate = Number.isFinite(limit) ? new Gate(limit, options.dbWaitMs ?? 30_000) : undefined;

  /** The request's way to its databases, built once per request. */
  const accesses = new WeakMap<Request, DatabaseAccess>();
  const accessOf = (c: Context<AppEnv>, config: Config): DatabaseAccess => {
    let access = accesses.get(c.req.raw);
    if (access === undefined) {
      access = factory(config, c.env, c.req.raw);
      accesses.set(c.req.raw, access);
    }
    return access;
  };

  const setup: MiddlewareHandler<AppEnv> = async (c, next) => {
    const config = c.get("config");
    const access = accessOf(c, config);
    const catalog = catalogFor(config, access);
    let held = false;
    c.set("queueName", DEFAULT_QUEUE);
    c.set("catalog", catalog);
    c.set("queue", async () => {
      if (!held && gate) {
        await gate.acquire();
        held = true;
      }
      return serve(config, access, await catalog.resolve(c.get("queueName")));
    });
    c.set("meters", async (queue) => {
      const { meter } = access;
      if (meter === undefined) return [];
      const all = await Promise.all(queue.databases.map((db, i) => meter(db, placementOf(queue, i, config))));
      return all.filter((r): r is MeterReading => r != null);
    });
    c.set("keys", () => access.keys());
    c.set("idle", async (ms, signal) => {
      if (held) {
        gate?.release();
        held = false;
      }
      await sleepOrReturn(ms, signal);
    });
    c.set("waits", access.waits);
    try {
      await next();
    } finally {
      if (held) gate?.release();
    }
  };
  // Who may do what: checked before anything reads a body or a database.
  const auth = requireKey((c, config): KeyStore => accessOf(c, config).keys());
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
  app.route("/", keys);
  app.route("/", service);
  return app;
}
