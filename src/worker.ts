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
import type { Bindings, Config } from "./app/env.js";
import { perRequestTransports, sharedTransports } from "./app/transports.js";

/**
 * What the Worker reads from its bindings: the vars and secrets (src/app/env.ts) and the QueueWriter
 * namespace as `npm run types` (wrangler types) declares it in `Env`. All may be missing: the Worker
 * checks them at run time and says what to set (503 NOT_CONFIGURED), or serves without the writer.
 */
export type WorkerBindings = Bindings & { QUEUE_WRITER?: Env["QUEUE_WRITER"] };

/** The database's single writer: the whole API over one shared transport. */
export class QueueWriter extends DurableObject<WorkerBindings> {
  readonly #app = createApp(sharedTransports(), { dbConcurrency: Number.POSITIVE_INFINITY, waits: "dispatch" });

  override fetch(request: Request): Promise<Response> {
    return Promise.resolve(this.#app.fetch(request, this.env));
  }
}

// Built on first use, not at startup: an isolate needs only one of them.
let alone: ReturnType<typeof createApp> | undefined;
let edge: ReturnType<typeof createEdgeApp> | undefined;

const forwardToWriter = (request: Request, config: Config, env: Bindings) => {
  const ns = (env as WorkerBindings).QUEUE_WRITER as Env["QUEUE_WRITER"];
  // One writer per database: the name is the database URL.
  return ns.get(ns.idFromName(config.databaseUrl)).fetch(request);
};

export default {
  fetch(request: Request, env: WorkerBindings, ctx?: ExecutionContext) {
    // Without the binding (the wrangler.toml block removed) every request is served here.
    if (env.QUEUE_WRITER === undefined) {
      alone ??= createApp(perRequestTransports());
      return alone.fetch(request, env, ctx);
    }
    edge ??= createEdgeApp(forwardToWriter);
    return edge.fetch(request, env, ctx);
  },
} satisfies ExportedHandler<WorkerBindings>;
