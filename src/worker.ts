/**
 * The Worker entry: the queue's HTTP API (src/app) over the Turso/libSQL database named by the
 * bindings (parsed once per isolate, see src/app/env.ts).
 *
 * The schema is ensured once per isolate (per database URL). The transport itself, an
 * `@libsql/client/web` HTTP client plus the library's write path, is cheap to build (no connection,
 * no round trip) and is built per request: workerd does not let one request wait on I/O started
 * by another (a shared write path whose batch was sent from a request that then finished hangs
 * the requests whose writes rode in it; seen with 64 concurrent claimers under `wrangler dev`).
 */
import { createClient } from "@libsql/client/web";
import { createApp } from "./app/app.js";
import type { Bindings, Config } from "./app/env.js";
import { LibsqlTransport } from "./core/transport.js";

/** Database URLs whose schema this isolate has seen in place. A flag, not a shared promise. */
const schemaReady = new Set<string>();

async function transportFor(config: Config): Promise<LibsqlTransport> {
  const client = createClient({ url: config.databaseUrl, authToken: config.databaseAuthToken });
  // Until one request of this isolate has confirmed the schema, each checks it itself (idempotent).
  const transport = await LibsqlTransport.fromClient(client, { ensureSchema: !schemaReady.has(config.databaseUrl) });
  schemaReady.add(config.databaseUrl);
  return transport;
}

const app = createApp(transportFor);

export default {
  fetch: (request: Request, env: Bindings, ctx: unknown) => app.fetch(request, env, ctx as never),
};
