/**
 * The queue's HTTP API as a Hono app, built from a transport factory so that the Worker entry (or a
 * test, or your own Worker) decides how the database is reached. Handlers stay thin: validate the
 * input (naming the field), call the library, shape the answer.
 */
import { Hono } from "hono";
import type { LibsqlTransport } from "../core/transport.js";
import { requireBearer } from "./auth.js";
import type { Bindings, Config } from "./env.js";
import { errorBody, handleError } from "./errors.js";
import { Gate } from "./gate.js";
import { claims } from "./routes/claims.js";
import { deadLetters } from "./routes/dead-letters.js";
import { leases } from "./routes/leases.js";
import { messages } from "./routes/messages.js";
import { stats } from "./routes/stats.js";

/** Returns the transport for a configuration; expected to build it once and cache it. */
export type TransportFactory = (config: Config) => Promise<LibsqlTransport>;

export interface AppEnv {
  Bindings: Bindings;
  Variables: {
    config: Config;
    /** The transport, fetched only once the input has been validated. */
    queue: () => Promise<LibsqlTransport>;
  };
}

export interface AppOptions {
  /** Requests of this app (one per isolate) that may talk to the database at once (default 1: writers serialize in the database anyway, and concurrent write transactions only wait on each other). */
  dbConcurrency?: number;
  /** Longest a request waits for one of those slots before a 503 BUSY, in ms (default 30 000). */
  dbWaitMs?: number;
}

export function createApp(factory: TransportFactory, options: AppOptions = {}): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const gate = new Gate(options.dbConcurrency ?? 1, options.dbWaitMs ?? 30_000);

  app.get("/healthz", (c) => c.json({ status: "ok" }));

  app.use("/v1/*", requireBearer, async (c, next) => {
    const config = c.get("config");
    let held = false;
    c.set("queue", async () => {
      if (!held) {
        await gate.acquire();
        held = true;
      }
      return factory(config);
    });
    try {
      await next();
    } finally {
      if (held) gate.release();
    }
  });

  app.route("/v1", messages);
  app.route("/v1", claims);
  app.route("/v1", leases);
  app.route("/v1", stats);
  app.route("/v1", deadLetters);

  app.notFound((c) => c.json(errorBody("NOT_FOUND", `no route ${c.req.method} ${new URL(c.req.url).pathname}`), 404));
  app.onError(handleError);
  return app;
}
