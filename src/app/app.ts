/**
 * The queue's HTTP API as a Hono app, built from a transport factory so that the Worker entry (or a
 * test, or your own Worker) decides how the database is reached. Routes are declared with their
 * schemas (src/app/route.ts, src/contract/schemas.ts); handlers stay thin: take the validated input,
 * call the library, shape the answer (src/app/answers.ts).
 */
import { type Context, Hono } from "hono";
import { methodNotAllowed } from "hono/method-not-allowed";
import { pause } from "../core/backoff.js";
import { requireBearer, trustForwarded } from "./auth.js";
import { readBodyBytes } from "./body.js";
import type { AppEnv, TransportFactory } from "./context.js";
import type { Bindings, Config } from "./env.js";
import { errorBody, HttpError, handleError } from "./errors.js";
import { Gate } from "./gate.js";
import { handle } from "./route.js";
import { claimAnswer, claimInputOf, claim as claimRoute, claims } from "./routes/claims.js";
import { deadLetters } from "./routes/dead-letters.js";
import { ack as ackRoute, leases } from "./routes/leases.js";
import { messages } from "./routes/messages.js";
import { pages } from "./routes/pages.js";
import { inspect } from "./routes/stats.js";
import { subscriptions } from "./routes/subscriptions.js";
import { type Outcome, unwrap, type WriterPort } from "./writer/port.js";

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
   * otherwise (default) by polling with growing pauses inside the request.
   */
  waits?: "dispatch" | "poll";
  /**
   * "bearer" (default): every `/v1` request must carry `Authorization: Bearer <QUEUE_TOKEN>`.
   * "forwarded": requests come only from `createEdgeApp`, which checked it (the QueueWriter).
   */
  auth?: "bearer" | "forwarded";
}

/**
 * What both apps answer the same way: the pages (no auth, no database), 405 for a known path asked
 * with another method, 404 for the rest, and one error handler.
 */
function baseApp(): Hono<AppEnv> {
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
  const dispatch = options.waits === "dispatch";

  app.use("/v1/*", options.auth === "forwarded" ? trustForwarded : requireBearer, async (c, next) => {
    const config = c.get("config");
    let held = false;
    c.set("queue", async () => {
      if (!held && gate) {
        await gate.acquire();
        held = true;
      }
      return factory(config);
    });
    c.set("idle", async (ms, signal) => {
      if (held) {
        gate?.release();
        held = false;
      }
      await pause(ms, signal);
    });
    c.set("waits", dispatch ? { mode: "dispatch", recheckMs: config.recheckMs } : { mode: "poll" });
    try {
      await next();
    } finally {
      if (held) gate?.release();
    }
  });

  app.route("/", messages);
  app.route("/", claims);
  app.route("/", leases);
  app.route("/", inspect);
  app.route("/", deadLetters);
  app.route("/", subscriptions);
  return app;
}

/** Sends a request on to whatever serves the API (the QueueWriter Durable Object) and returns its answer. */
export type Forward = (request: Request, config: Config, env: Bindings) => Promise<Response>;

/** The writer's lean path (src/app/writer/port.ts), for the edge to call instead of forwarding. */
export type WriterOf = (config: Config, env: Bindings) => WriterPort;

/**
 * The API's front door when another worker serves it: the pages and the bearer check are answered
 * here, so that a refused request never reaches the database's single writer. With `writer`, a
 * claim that does not wait and an ack are validated here and sent to the writer by RPC; every other
 * authorized `/v1` request goes on with its body (read here, within the size limit). A forward that
 * fails is a 503 whose outcome is unknown: the request may have been applied before the answer was lost.
 */
export function createEdgeApp(forward: Forward, writer?: WriterOf): Hono<AppEnv> {
  const app = baseApp();
  const send = async (request: Request, c: Context<AppEnv>) => {
    try {
      return await forward(request, c.get("config"), c.env);
    } catch (e) {
      console.error("forward failed", e);
      throw writerGone();
    }
  };
  app.use("/v1/*", requireBearer);
  if (writer) {
    handle(app, claimRoute, async (c) => {
      const body = c.req.valid("json");
      const input = claimInputOf(body);
      if (input.wait > 0) {
        // A long poll: over HTTP, so that its client's abort reaches the writer's dispatcher.
        const headers = new Headers(c.req.raw.headers);
        headers.delete("content-length");
        const raw = c.req.raw;
        return send(
          new Request(raw.url, { method: "POST", headers, body: JSON.stringify(body), signal: raw.signal }),
          c,
        );
      }
      const got = unwrap(await rpc(() => writer(c.get("config"), c.env).claim(input)));
      return claimAnswer(c, body, got);
    });
    handle(app, ackRoute, async (c) => {
      unwrap(await rpc(() => writer(c.get("config"), c.env).ack(c.req.valid("param").lease_id)));
      return c.body(null, 204);
    });
  }
  app.all("/v1/*", async (c) => {
    // The body is read here (bounded: 413 past the limit), not streamed on: the writer may answer
    // before reading it, and a stream still being pumped after the answer fails in workerd.
    const raw = c.req.raw;
    const body = raw.method === "GET" || raw.method === "HEAD" ? undefined : await readBodyBytes(raw);
    // The client's abort goes on too: a long poll whose client left must not keep (or strand) a lease.
    return send(new Request(raw.url, { method: raw.method, headers: raw.headers, body, signal: raw.signal }), c);
  });
  return app;
}

/** An RPC that did not come back is what a failed forward is: a 503 whose outcome is unknown. */
async function rpc<T>(call: () => Promise<Outcome<T>>): Promise<Outcome<T>> {
  try {
    return await call();
  } catch (e) {
    console.error("writer call failed", e);
    throw writerGone();
  }
}

const writerGone = () =>
  new HttpError(
    503,
    "UNAVAILABLE",
    "the queue's writer did not answer; the request may have been applied (a publish is safe to retry with the same Idempotency-Key)",
    { "Retry-After": "1" },
  );
