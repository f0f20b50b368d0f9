/**
 * The two ways the Worker gets a transport (a `@libsql/client/web` HTTP client plus the library's
 * write path). Neither touches the network until a request needs the database.
 */
import { createClient } from "@libsql/client/web";
import { LibsqlTransport } from "../core/transport.js";
import type { Config } from "./env.js";

/**
 * One transport per database, kept for the life of its owner (the QueueWriter Durable Object).
 * Every request of a Durable Object may use I/O another one started, so concurrent requests share
 * this transport's write path: their writes ride one batch (group commit), one batch in flight.
 * A transport whose schema check failed is dropped, so that the next request tries again.
 */
export function sharedTransports(): (config: Config) => Promise<LibsqlTransport> {
  const byUrl = new Map<string, Promise<LibsqlTransport>>();
  return (config) => {
    let t = byUrl.get(config.databaseUrl);
    if (t === undefined) {
      const client = createClient({ url: config.databaseUrl, authToken: config.databaseAuthToken });
      const http = { url: config.databaseUrl, authToken: config.databaseAuthToken };
      // Its callers answer over HTTP and come back with their next write (an ack, the next claim) a
      // moment later: the next batch waits for them (QUEUE_HOLD_MS; BENCHMARKS.md, "What bounds the targets").
      t = LibsqlTransport.fromClient(client, { http, holdMs: config.holdMs });
      byUrl.set(config.databaseUrl, t);
      t.catch(() => byUrl.delete(config.databaseUrl));
    }
    return t;
  };
}

/**
 * A fresh transport per request, for a Worker without the Durable Object: workerd does not let
 * one request wait on I/O started by another (a batch sent from a request that then finished
 * hangs the requests whose writes rode in it), so nothing is shared but the knowledge that the
 * schema is in place (a flag, not a promise), which saves every later request that read.
 */
export function perRequestTransports(): (config: Config) => Promise<LibsqlTransport> {
  const schemaReady = new Set<string>();
  return async (config) => {
    const client = createClient({ url: config.databaseUrl, authToken: config.databaseAuthToken });
    const transport = await LibsqlTransport.fromClient(client, {
      ensureSchema: !schemaReady.has(config.databaseUrl),
      http: { url: config.databaseUrl, authToken: config.databaseAuthToken },
    });
    schemaReady.add(config.databaseUrl);
    return transport;
  };
}
