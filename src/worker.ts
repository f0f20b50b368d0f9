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
import type { Bindings } from "./app/env.js";
import { perRequestTransports, sharedTransports } from "./app/transports.js";

export interface WorkerBindings extends Bindings {
  /** The QueueWriter namespace (wrangler.toml [[durable_objects.bindings]]). */
  QUEUE_WRITER?: DurableObjectNamespace<QueueWriter>;
}

/** The database's single writer: the whole API over one shared transport. */
export class QueueWriter extends DurableObject<WorkerBindings> {
  readonly #app = createApp(sharedTransports(), { dbConcurrency: Number.POSITIVE_INFINITY });

  override fetch(request: Request): Promise<Response> {
    return Promise.resolve(this.#app.fetch(request, this.env));
  }
}

const alone = createApp(perRequestTransports());

const edge = createEdgeApp((request, config, env) => {
  const ns = (env as WorkerBindings).QUEUE_WRITER as DurableObjectNamespace<QueueWriter>;
  // One writer per database: the name is the database URL.
  return ns.get(ns.idFromName(config.databaseUrl)).fetch(request);
});

export default {
  fetch(request: Request, env: WorkerBindings, ctx: unknown): Response | Promise<Response> {
    const app = env.QUEUE_WRITER === undefined ? alone : edge;
    return app.fetch(request, env, ctx as never);
  },
};
