/**
 * Connection set-up, expanded once: a transport's options checked and defaulted, the database named
 * by a URL or a path opened the right way (a local file through the `libsql` driver, anything else
 * through `@libsql/client`), the write engine that suits it, reads with bounded retries, and the
 * schema brought up to date.
 */
import type { Client, Config, InStatement, ResultSet } from "@libsql/client";
import { DEFAULT_IDEMPOTENCY_WINDOW, DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, plainNameProblem } from "../rules.js";
import { backoff, RETRY_MS, sleepOrThrow, withTimeout } from "./backoff.js";
import { Committer } from "./committer.js";
import type { WriteEngine } from "./engine.js";
import { closed, invalid, isRetryable, QueueError, toQueueError } from "./errors.js";
import { Health } from "./health.js";
import { HttpClient, httpUrlOf, httpWriter } from "./hrana.js";
import { localOf } from "./local.js";
import { nodeFetch } from "./node-fetch.js";
import { migrationSteps, READ_SCHEMA_VERSION, SCHEMA_VERSION } from "./schema.js";
import type { Plan } from "./sql/index.js";
import { checkCount, checkId, checkInteger, checkObject, checkPositiveSeconds } from "./validate.js";

export interface TransportOptions {
  /** Token for a remote primary (Turso database token, or a JWT for sqld with auth). */
  authToken?: string;
  /** Makes `database` (a `file:` path) an embedded replica of this primary. Node only. */
  syncUrl?: string;
  /** Seconds between background syncs of an embedded replica. */
  syncInterval?: number;
  /**
   * Write batches in flight at once, per transport (default 1). sqld 0.24 serializes writers and, with
   * several write batches waiting under sustained load, can stop answering writes altogether; one batch
   * in flight, with group commit carrying everything that queues meanwhile, is both the fastest and the
   * only setting that never wedged it here (BENCHMARKS.md).
   */
  maxInFlight?: number;
  /** Most statements coalesced into one batch (default 800). */
  maxBatchStatements?: number;
  /**
   * Most ms a write batch waits, after the previous one is answered, for its callers to come back
   * with their next writes, so that they ride one batch instead of taking turns in two (default 0:
   * never). For a transport whose callers answer over a network, such as the Worker's QueueWriter
   * (4 ms); in-process callers come back at once and need none. Integer ms, 0-1000.
   */
  holdMs?: number;
  /**
   * Most ms an ack, nack or release (not a list given to `settle()`) waits, when no other write is
   * queued, for one to ride its batch with (default 0: never), and never longer than the last batch
   * took. Over a long round trip this keeps a lone ack's batch from holding up the publish that
   * follows it; it delays, by as long, the next message of a group whose ack waits. For a writer far from its database serving consumers
   * and producers at once, such as the Worker's QueueWriter (100 ms). Integer ms, 0-1000.
   */
  rideMs?: number;
  /** Budget for one request to the database, in ms (default 10 000). */
  requestTimeoutMs?: number;
  /** Budget for a whole call including queueing and retries, in ms (default 30 000). */
  timeoutMs?: number;
  /** Deliveries a message gets before it moves to the dead letters (default 5; `Infinity`: never). */
  maxAttempts?: number;
  /** Seconds an idempotency key keeps its first answer (default 86 400 = 24 h). */
  idempotencyWindow?: number;
  /** A `fetch` for HTTP connections (tests count requests or cut them with it). */
  fetch?: typeof fetch;
  /**
   * The database's namespace on an sqld started with `--enable-namespaces` (every request names it
   * in the `x-namespace-bin` header): how one local sqld holds many queues' databases.
   */
  namespace?: string;
  /** The queue's name in traces and metrics (`messaging.destination.name`; default `default`). */
  name?: string;
  /**
   * Local files only: `"full"` (default) syncs every commit to disk; `"normal"` (WAL + NORMAL, what
   * plainjob and many SQLite queues use) survives a crash of the process but may lose the last
   * commits if the machine itself goes down.
   */
  synchronous?: "full" | "normal";
  /**
   * False skips the schema check (one read) when the caller already made sure of it: a Worker builds
   * a transport per request (workerd forbids sharing in-flight I/O between requests) but checks the
   * schema once per isolate.
   */
  ensureSchema?: boolean;
}

/** `LibsqlTransport.fromClient`'s options: those that do not choose the connection, and one of its own. */
export type ClientOptions = Omit<TransportOptions, "authToken" | "syncUrl" | "syncInterval" | "fetch"> & {
  /**
   * The database `client` was made for (`libsql://` or `http(s)://`, and its token): writes then go
   * out as the same batch request without the client's machinery (hrana.ts, less CPU per write);
   * reads still use `client`.
   */
  http?: { url: string; authToken?: string | undefined; namespace?: string | undefined };
};

/** The options every transport runs with, checked and defaulted. */
export interface Settings {
  /** The queue's name in traces and metrics. */
  name: string;
  maxInFlight: number;
  maxBatchStatements: number;
  holdMs: number;
  rideMs: number;
  requestTimeoutMs: number;
  timeoutMs: number;
  /** `Infinity`: never dead-letter. */
  maxAttempts: number;
  idempotencyWindow: number;
}

/** The default budget of one request to the database, in ms (`requestTimeoutMs`). */
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

const DEFAULTS: Settings = {
  name: DEFAULT_QUEUE,
  maxInFlight: 1,
  maxBatchStatements: 800,
  holdMs: 0,
  rideMs: 0,
  requestTimeoutMs: DEFAULT_REQUEST_TIMEOUT_MS,
  timeoutMs: 30_000,
  maxAttempts: DEFAULT_MAX_ATTEMPTS,
  idempotencyWindow: DEFAULT_IDEMPOTENCY_WINDOW,
};

/** What a transport runs on. */
export interface Connection {
  client: Client;
  writes: WriteEngine;
  settings: Settings;
  /** Close the client with the transport (it opened it). */
  ownsClient: boolean;
  /**
   * Over the network, a publish without a user key takes a publisher slot, so that sending it again
   * after a lost answer cannot enqueue twice (a local file has no answer to lose).
   */
  autoKeys: boolean;
  /** One statement, retried while the database is busy or unreachable, bounded like writes. */
  read(stmt: InStatement): Promise<ResultSet>;
  /** A read-only plan, its statements one after the other. */
  readPlan<T>(plan: Plan<T>): Promise<T>;
  /** What its requests found: outages, and answers after them. */
  health: Health;
  /** Closes the write path (and the client, when it opened it): every call after fails with CLOSED. */
  close(): void;
}

/** Opens `database` (a `file:` path or bare path, `:memory:`, an `http(s)://` or `libsql://` URL) and ensures the schema. */
export async function connect(database: string, options: TransportOptions): Promise<Connection> {
  const settings = settingsOf(options);
  const config = clientConfig(database, options, settings);
  const local = options.syncUrl ? undefined : localFile(database);
  let client: Client;
  try {
    if (local) {
      // Node only: a plain local file goes through the driver directly, with cached statements.
      const { openLocal } = await import("./local.js");
      client = await openLocal(local.path);
    } else {
      const { createClient } = await import("@libsql/client");
      client = createClient(config);
    }
  } catch (e) {
    // An embedded replica whose primary cannot be reached is an outage, not a bad argument.
    const err = toQueueError(e);
    throw isRetryable(err) ? err : invalid("database", err.message);
  }
  // Over HTTP the write batch goes out through hrana.ts (the same request, less work per batch).
  const http = /^https?:/i.test(config.url)
    ? { url: config.url, authToken: config.authToken, fetch: config.fetch as typeof fetch }
    : undefined;
  const conn = connection(client, settings, { ownsClient: true, autoKeys: local === undefined, http });
  try {
    if (options.syncUrl) await client.sync();
    if (local && local.path !== ":memory:" && !local.readOnly) {
      // WAL lets readers and the single writer overlap; the Python transports open it the same way.
      await client.execute("PRAGMA journal_mode=WAL");
      // FULL (the default) syncs every commit; NORMAL survives a crash of the process, not of the OS.
      await client.execute(`PRAGMA synchronous=${options.synchronous === "normal" ? "NORMAL" : "FULL"}`);
    }
    if (options.ensureSchema !== false) await ensureSchema(conn);
  } catch (e) {
    conn.close();
    throw toQueueError(e);
  }
  return conn;
}

/** A connection over a client the caller made (and closes). */
export async function wrapClient(client: Client, options: ClientOptions): Promise<Connection> {
  checkObject("options", options);
  const { ensureSchema: ensure = true, http, ...rest } = options;
  const settings = settingsOf(rest);
  const url = http === undefined ? undefined : httpUrlOf(typeof http.url === "string" ? http.url : "");
  if (http !== undefined && url === undefined) {
    throw invalid("options.http.url", "must be a libsql:// or http(s):// URL");
  }
  // The global fetch, looked up per call: a Worker's fetch belongs to its request.
  const global = (input: RequestInfo | URL, init?: RequestInit) => fetch(input, init);
  const target =
    url === undefined ? undefined : { url, authToken: http?.authToken, fetch: inNamespace(global, http?.namespace) };
  const conn = connection(client, settings, { ownsClient: false, autoKeys: client.protocol !== "file", http: target });
  if (ensure) await ensureSchema(conn);
  return conn;
}

function connection(
  client: Client,
  settings: Settings,
  o: { ownsClient: boolean; autoKeys: boolean; http: Parameters<typeof httpWriter>[0] | undefined },
): Connection {
  const health = new Health();
  const http =
    client instanceof HttpClient ? undefined : o.http && httpWriter(o.http, (stmts) => client.batch(stmts, "write"));
  // One engine: a local file's batches run in-process, others go out as one request each.
  const writes: WriteEngine = new Committer(
    client,
    { ...settings, health },
    localOf(client) ?? (client instanceof HttpClient ? client.send : http),
  );
  let isClosed = false;
  const read = async (stmt: InStatement) => {
    if (isClosed) throw closed();
    try {
      return await readWithRetries(client, stmt, settings, health);
    } catch (e) {
      // A read under way when the transport closed failed for that reason, whatever the client said.
      throw isClosed ? closed({ cause: e }) : e;
    }
  };
  return {
    client,
    writes,
    settings,
    health,
    ownsClient: o.ownsClient,
    autoKeys: o.autoKeys,
    read,
    close() {
      isClosed = true;
      writes.close();
      void http?.close();
      if (o.ownsClient) client.close();
    },
    async readPlan(plan) {
      const results: ResultSet[] = [];
      for (const s of plan.stmts) results.push(await read(s));
      return plan.read(results, false);
    },
  };
}

async function readWithRetries(client: Client, stmt: InStatement, s: Settings, health: Health): Promise<ResultSet> {
  const deadline = Date.now() + s.timeoutMs;
  for (let attempt = 1; ; attempt++) {
    try {
      const rs = await withTimeout(client.execute(stmt), s.requestTimeoutMs);
      health.answered();
      return rs;
    } catch (e) {
      const err = toQueueError(e);
      health.failed(err);
      const pause = Math.max(backoff(attempt, RETRY_MS), err.retryAfterMs ?? 0);
      if (!isRetryable(err) || Date.now() + pause >= deadline) throw err;
      await sleepOrThrow(pause);
    }
  }
}

/** Brings the database to SCHEMA_VERSION (one write batch), unless it is there already (one read). */
async function ensureSchema(conn: Connection): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const version = await schemaVersion(conn);
    if (version >= SCHEMA_VERSION) return;
    try {
      await conn.writes.submit({ stmts: migrationSteps(version), read: () => undefined, idempotent: true });
      return;
    } catch (e) {
      // Another transport may have migrated meanwhile (its batch won, ours failed as a whole).
      if (attempt > 0 || !(e instanceof QueueError) || e.code !== "DATABASE") throw e;
    }
  }
}

/** The database's own answer that it has no schema of ours (nor of an older version): no tq_meta. */
const NO_SCHEMA = /\bno such table:\s*(main\.)?tq_meta\b/i;

/**
 * The schema's version: 0 only on the database's positive answer that it has none (a new database,
 * or one made by the Python transports). Any other failure (an outage misread, a cut answer) is
 * thrown as it is: a migration batch goes out only to a database known to need it.
 */
async function schemaVersion(conn: Connection): Promise<number> {
  try {
    const rs = await conn.read(READ_SCHEMA_VERSION);
    return Number(rs.rows[0]?.value ?? 0);
  } catch (e) {
    if (e instanceof QueueError && e.code === "DATABASE" && NO_SCHEMA.test(e.message)) return 0;
    throw e;
  }
}

function settingsOf(o: TransportOptions): Settings {
  checkObject("options", o);
  const int = (field: keyof TransportOptions, v: number | undefined, d: number, max: number) =>
    v === undefined ? d : checkCount(`options.${field}`, v, max);
  return {
    name: o.name === undefined ? DEFAULTS.name : checkId("options.name", o.name),
    maxInFlight: int("maxInFlight", o.maxInFlight, DEFAULTS.maxInFlight, 64),
    maxBatchStatements: int("maxBatchStatements", o.maxBatchStatements, DEFAULTS.maxBatchStatements, 10_000),
    holdMs: o.holdMs === undefined ? DEFAULTS.holdMs : checkInteger("options.holdMs", o.holdMs, 0, 1000),
    rideMs: o.rideMs === undefined ? DEFAULTS.rideMs : checkInteger("options.rideMs", o.rideMs, 0, 1000),
    requestTimeoutMs: int("requestTimeoutMs", o.requestTimeoutMs, DEFAULTS.requestTimeoutMs, 3_600_000),
    timeoutMs: int("timeoutMs", o.timeoutMs, DEFAULTS.timeoutMs, 3_600_000),
    maxAttempts:
      o.maxAttempts === undefined || o.maxAttempts === Number.POSITIVE_INFINITY
        ? (o.maxAttempts ?? DEFAULTS.maxAttempts)
        : checkCount("options.maxAttempts", o.maxAttempts, 1_000_000),
    idempotencyWindow:
      o.idempotencyWindow === undefined
        ? DEFAULTS.idempotencyWindow
        : checkPositiveSeconds("options.idempotencyWindow", o.idempotencyWindow, 30 * 86_400),
  };
}

/** The URL schemes a database may be named by (a name without one is a path). */
const SCHEMES = /^(file|https?|wss?|libsql):/i;

/**
 * A local database as the driver opens it (SQLite's own rules): a `file:` URI as it is (its path
 * percent-decoded, `file:///p` and `file://localhost/p` alike, `?mode=ro` and SQLite's other
 * parameters honoured), a bare path as the file name it is (a `?` or `%` in it is part of the
 * name), `:memory:`. Undefined for a URL of a server.
 */
export function localFile(database: string): { path: string; readOnly: boolean } | undefined {
  if (database === ":memory:") return { path: database, readOnly: false };
  if (!/^file:/i.test(database)) return SCHEMES.test(database) ? undefined : { path: database, readOnly: false };
  const uri = `file:${database.slice(5)}`;
  const query = new URLSearchParams(uri.split("#")[0]?.split("?")[1] ?? "");
  return { path: uri, readOnly: query.get("mode") === "ro" || query.get("immutable") === "1" };
}

/** `database` and the options as a client config. */
function clientConfig(database: string, o: TransportOptions, s: Settings): Config {
  if (typeof database !== "string" || database.length === 0) throw invalid("database", "must be a non-empty string");
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(database)?.[1];
  if (scheme !== undefined && !SCHEMES.test(`${scheme}:`)) {
    throw invalid("database", `${scheme}:// is not a database URL (a path, a file: URI, http(s):// or libsql://)`);
  }
  const host = /^file:\/\/([^/?#]*)/i.exec(database)?.[1];
  if (host !== undefined && host !== "" && host.toLowerCase() !== "localhost") {
    throw invalid("database", `a file: URI names no host but localhost, got ${JSON.stringify(host)}`);
  }
  let url = database;
  if (url === ":memory:") {
    // as is
  } else if (/^libsql:/i.test(url)) {
    // libsql:// means "pick for me"; we pick HTTP so that every operation is one request.
    url = url.replace(/^libsql:/i, /[?&]tls=0/.test(url) ? "http:" : "https:");
  } else if (!SCHEMES.test(url)) {
    // A path (an embedded replica's: the client takes a file: URL).
    url = `file:${encodeURI(url).replace(/[?#]/g, encodeURIComponent)}`;
  }
  if (o.syncUrl !== undefined && !/^file:/i.test(url)) {
    throw invalid("database", "an embedded replica (syncUrl) needs a file: path");
  }
  if (o.syncInterval !== undefined) checkPositiveSeconds("options.syncInterval", o.syncInterval);
  if (o.synchronous !== undefined && o.synchronous !== "full" && o.synchronous !== "normal") {
    throw invalid("options.synchronous", `must be "full" or "normal", got ${JSON.stringify(o.synchronous)}`);
  }
  // In Node, keep-alive connections without Nagle's delay (node-fetch.ts); elsewhere the platform's fetch.
  const base = o.fetch ?? nodeFetch() ?? globalThis.fetch;
  if (o.namespace !== undefined) checkNamespace("options.namespace", o.namespace);
  return {
    url,
    authToken: o.authToken,
    syncUrl: o.syncUrl?.replace(/^libsql:/i, "https:"),
    syncInterval: o.syncInterval,
    fetch: inNamespace(withRequestTimeout(base, s.requestTimeoutMs), o.namespace),
    concurrency: Math.max(20, s.maxInFlight + 8),
  };
}

/**
 * `f`, abandoning each request after `ms` (a TimeoutError; its connection is dropped), or sooner
 * when the caller's own signal aborts: no request to the database waits forever, and none that was
 * given up on keeps holding a connection.
 */
export function withRequestTimeout<F extends (input: RequestInfo | URL, init?: RequestInit) => Promise<Response>>(
  f: F,
  ms: number,
): F {
  return ((input: RequestInfo | URL, init?: RequestInit) => {
    const timeout = AbortSignal.timeout(ms);
    const signal = init?.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
    return f(input, { ...init, signal });
  }) as F;
}

/** sqld (with `--enable-namespaces`) picks a request's database by this header: the name, in base64 without padding. */
export const NAMESPACE_HEADER = "x-namespace-bin";

export const namespaceHeaderValue = (namespace: string): string =>
  btoa(String.fromCharCode(...new TextEncoder().encode(namespace))).replace(/=+$/, "");

function checkNamespace(field: string, v: unknown): string {
  const p = plainNameProblem(v);
  if (p !== undefined) throw invalid(field, p);
  return v as string;
}

/**
 * `f`, sending every request to `namespace` (as is without one). The client hands `fetch` a Request;
 * the write path a URL and an init: both become one Request with the header set.
 */
export function inNamespace<F extends (input: RequestInfo | URL, init?: RequestInit) => Promise<Response>>(
  f: F,
  namespace: string | undefined,
): F {
  if (namespace === undefined) return f;
  const value = namespaceHeaderValue(checkNamespace("namespace", namespace));
  return ((input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    request.headers.set(NAMESPACE_HEADER, value);
    return f(request);
  }) as F;
}
