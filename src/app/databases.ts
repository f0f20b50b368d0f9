/** How the Worker reaches one database: Hrana 3 over HTTP (src/core/hrana.ts), reads and writes alike. */
import type { Client } from "@libsql/client";
import { DEFAULT_REQUEST_TIMEOUT_MS, inNamespace } from "../core/connect.js";
import type { Database } from "../core/databases.js";
import { HttpClient, httpUrlOf } from "../core/hrana.js";
import { LibsqlTransport } from "../core/transport.js";
import type { Config } from "./env.js";

/** One writer, one transport, one cache entry per database: its URL and namespace. */
export const databaseKey = (db: Database): string => (db.namespace ? `${db.url}#${db.namespace}` : db.url);

/**
 * A transport over `db` (its token, or the Worker's TURSO_AUTH_TOKEN: a Turso group token reaches
 * every database of its group), and a function that closes its client (resolved once the server
 * closed its write stream too). `keepStream`: its writes may
 * keep their stream between batches (src/core/hrana.ts), for a transport that outlives a request.
 */
export async function openDatabase(
  db: Database,
  config: Config,
  options: { ensureSchema?: boolean; holdMs?: number; rideMs?: number; keepStream?: boolean } = {},
): Promise<{ transport: LibsqlTransport; close(): Promise<void> }> {
  const url = httpUrlOf(db.url);
  if (url === undefined) throw new TypeError(`a database of the Worker is reached over HTTP, not ${db.url}`);
  // The global fetch, looked up per call: a Worker's fetch belongs to its request.
  const fetchIn = inNamespace((input: RequestInfo | URL, init?: RequestInit) => fetch(input, init), db.namespace);
  const client = new HttpClient(
    { url, authToken: tokenFor(config, db), fetch: fetchIn, keepStream: options.keepStream },
    DEFAULT_REQUEST_TIMEOUT_MS,
  );
  try {
    const transport = await LibsqlTransport.fromClient(client as unknown as Client, {
      ensureSchema: options.ensureSchema ?? true,
      ...(options.holdMs === undefined ? {} : { holdMs: options.holdMs }),
      ...(options.rideMs === undefined ? {} : { rideMs: options.rideMs }),
    });
    return { transport, close: () => client.shut() };
  } catch (e) {
    client.close();
    throw e;
  }
}

/**
 * The token for a database: its own (a database of the static map may have one), or the Worker's
 * TURSO_AUTH_TOKEN (a Turso group token reaches every database of its group). The catalog and the
 * edge's messages to the writers carry none.
 */
export function tokenFor(config: Config, db: Database): string | undefined {
  if (db.authToken !== undefined) return db.authToken;
  const d = config.databases;
  if (d.kind === "static") {
    const same = Object.values(d.map).find((m) => m.url === db.url && m.namespace === db.namespace);
    if (same?.authToken !== undefined) return same.authToken;
  }
  return config.databaseAuthToken;
}
