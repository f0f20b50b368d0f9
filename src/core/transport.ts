/**
 * LibsqlTransport: the queue of the spec (`messages` + `groups`, leases, round-robin, priority floor)
 * over `@libsql/client`, so that it runs the same over a local file, an HTTP primary (sqld, Turso) or
 * an embedded replica, in Node or in a Worker. Every operation is one write batch: one HTTP request.
 */
import type { Client, Config, InStatement, ResultSet, Row } from "@libsql/client";
import { backoff, Committer, withTimeout } from "./committer.js";
import { invalid, QueueError, toQueueError } from "./errors.js";
import { nodeFetch } from "./node-fetch.js";
import * as sql from "./sql.js";
import {
  checkCount,
  checkDelay,
  checkId,
  checkPositiveSeconds,
  checkPriority,
  checkWorkerId,
  encodeEvent,
} from "./validate.js";

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
   * only setting that never wedged it here (see BENCHMARKS.md).
   */
  maxInFlight?: number;
  /** Most statements coalesced into one batch (default 800). */
  maxBatchStatements?: number;
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
   * Local files only: `"full"` (default) syncs every commit to disk; `"normal"` (WAL + NORMAL, what
   * plainjob and many SQLite queues use) survives a crash of the process but may lose the last
   * commits if the machine itself goes down.
   */
  synchronous?: "full" | "normal";
}

export interface Lease<E = unknown> {
  /** Opaque handle for ack/nack/extend: `"<seq>.<token>"`; the token fences off stale holders. */
  id: string;
  seq: number;
  groupId: string;
  event: E;
  workerId: string;
  /** Lease deadline, epoch seconds on the database's clock. */
  expiresAt: number;
  /** Deliveries of this message so far, this one included. */
  attempts: number;
}

export interface PublishInput {
  groupId: string;
  event: unknown;
  priority?: number;
}

export interface PublishOptions {
  /** Retrying a publish with the same key returns the first answer instead of enqueuing again. */
  idempotencyKey?: string;
}

export interface NackResult {
  /** True when the message had used its attempts and moved to the dead letters. */
  deadLettered: boolean;
}

export interface QueueStats {
  /**
   * Messages nothing holds back: not leased, not parked (lapsed leases count here), in a group with
   * nothing in flight. Each such group's oldest is deliverable now; the rest follow it in order.
   */
  ready: number;
  /** Messages not leased or parked themselves, held back behind a live lease or park in their group. */
  waiting: number;
  /** Live leases. */
  inFlight: number;
  /** Live parks (nacked with a delay). */
  parked: number;
  groups: number;
  deadLetters: number;
  /** The database's clock, epoch seconds. */
  now: number;
}

export interface DeadLetter<E = unknown> {
  seq: number;
  groupId: string;
  event: E;
  priority: number;
  attempts: number;
  reason: string;
  deadAt: number;
}

/** Most messages in one publishMany (and one HTTP batch publish). */
export const MAX_PUBLISH_BATCH = 1000;
/** Most leases one claimMany asks for. */
export const MAX_CLAIM_BATCH = 100;

const DEFAULTS = {
  maxInFlight: 1,
  maxBatchStatements: 800,
  requestTimeoutMs: 10_000,
  timeoutMs: 30_000,
  maxAttempts: 5,
  idempotencyWindow: 86_400,
};
/** Keys the library adds by itself to make its own retries safe only need to outlive those retries. */
const AUTO_KEY_TTL = 600;

type Resolved = typeof DEFAULTS & { autoKeys: boolean };

export class LibsqlTransport {
  readonly client: Client;
  readonly #committer: Committer;
  readonly #opts: Resolved;
  readonly #ownsClient: boolean;

  private constructor(client: Client, opts: Resolved, ownsClient: boolean) {
    this.client = client;
    this.#opts = opts;
    this.#ownsClient = ownsClient;
    this.#committer = new Committer(client, opts);
  }

  /**
   * Opens `database`: a `file:` path (or a bare path), `:memory:`, an `http(s)://` or `libsql://` URL.
   * With `syncUrl` the file is an embedded replica of that primary. Ensures the schema.
   */
  static async create(database: string, options: TransportOptions = {}): Promise<LibsqlTransport> {
    const opts = resolveOptions(options);
    const config = clientConfig(database, options, opts);
    const local = config.url === ":memory:" || (/^file:/i.test(config.url) && !options.syncUrl);
    let client: Client;
    try {
      if (local) {
        // Node only: a plain local file goes through the driver directly, with cached statements.
        const { openLocal } = await import("./local.js");
        client = await openLocal(
          config.url === ":memory:" ? ":memory:" : config.url.replace(/^file:(\/\/)?/i, "").replace(/\?.*$/, ""),
        );
      } else {
        const { createClient } = await import("@libsql/client");
        client = createClient(config);
      }
    } catch (e) {
      throw invalid("database", toQueueError(e).message);
    }
    const t = new LibsqlTransport(client, { ...opts, autoKeys: !local }, true);
    try {
      if (options.syncUrl) await t.sync();
      if (local && config.url !== ":memory:") {
        // WAL lets readers and the single writer overlap; the Python transports open it the same way.
        await client.execute("PRAGMA journal_mode=WAL");
        // FULL (the default) syncs every commit; NORMAL survives a crash of the process, not of the OS.
        await client.execute(`PRAGMA synchronous=${options.synchronous === "normal" ? "NORMAL" : "FULL"}`);
      }
      await t.#ensureSchema();
    } catch (e) {
      client.close();
      throw toQueueError(e);
    }
    return t;
  }

  /**
   * Wraps an existing client (for instance one from `@libsql/client/web` inside a Worker).
   * `ensureSchema: false` skips the schema check (one read) when the caller already made sure of
   * it: a Worker builds a transport per request (workerd forbids sharing in-flight I/O between
   * requests) but checks the schema once per isolate.
   */
  static async fromClient(
    client: Client,
    options: Omit<TransportOptions, "authToken" | "syncUrl" | "syncInterval" | "fetch"> & {
      ensureSchema?: boolean;
    } = {},
  ): Promise<LibsqlTransport> {
    const { ensureSchema = true, ...rest } = options;
    const opts = resolveOptions(rest);
    const t = new LibsqlTransport(client, { ...opts, autoKeys: client.protocol !== "file" }, false);
    if (ensureSchema) await t.#ensureSchema();
    return t;
  }

  /** Counters of the write path: batches sent, writes carried, retries, BUSY answers. */
  get writeStats(): Readonly<Committer["stats"]> {
    return this.#committer.stats;
  }

  // -------------------------------------------------------------------------------------------
  // publish

  /** Appends `event` to `groupId`; returns its seq. The first publish of a group sets its priority. */
  async publish(groupId: string, event: unknown, priority = 0, options: PublishOptions = {}): Promise<number> {
    const row = {
      groupId: checkId("groupId", groupId),
      event: encodeEvent("event", event),
      priority: checkPriority("priority", priority),
    };
    const [seq] = await this.#publishRows([row], options);
    return seq as number;
  }

  /** Publishes all of `messages` in one batch, all or nothing; returns their seqs in order. */
  async publishMany(messages: PublishInput[], options: PublishOptions = {}): Promise<number[]> {
    if (!Array.isArray(messages)) throw invalid("messages", "must be an array");
    checkCount("messages.length", messages.length, MAX_PUBLISH_BATCH);
    const rows = messages.map((m, i) => {
      if (typeof m !== "object" || m === null) throw invalid(`messages[${i}]`, "must be an object");
      return {
        groupId: checkId(`messages[${i}].groupId`, m.groupId),
        event: encodeEvent(`messages[${i}].event`, m.event),
        priority: checkPriority(`messages[${i}].priority`, m.priority ?? 0),
      };
    });
    return this.#publishRows(rows, options);
  }

  async #publishRows(rows: sql.PublishRow[], options: PublishOptions): Promise<number[]> {
    if (typeof options !== "object" || options === null) throw invalid("options", "must be an object");
    const userKey =
      options.idempotencyKey === undefined ? undefined : checkId("idempotencyKey", options.idempotencyKey);
    let idem: sql.IdempotencyArgs | undefined;
    if (userKey !== undefined) {
      idem = {
        key: userKey,
        token: randomToken(),
        fingerprint: await fingerprint(rows),
        ttl: this.#opts.idempotencyWindow,
      };
    } else if (this.#opts.autoKeys) {
      idem = { key: `auto:${randomToken()}`, token: randomToken(), fingerprint: null, ttl: AUTO_KEY_TTL };
    }
    const stmts = sql.publishStatements(rows, idem);
    return this.#committer.submit({
      stmts,
      idempotent: idem !== undefined,
      finish: (rs) => {
        if (!idem) return seqsOf(rs[0]);
        const state = rs[5]?.rows[0];
        // Our batch claimed the key; on a resend of it (lost answer) the seqs come from first_seq below.
        if (state && state.token === idem.token && (rs[2]?.rows.length ?? 0) > 0) return seqsOf(rs[2]);
        if (!state || state.first_seq === null) throw new QueueError("DATABASE", "idempotency record missing");
        if (
          (idem.fingerprint !== null && state.fingerprint !== idem.fingerprint) ||
          Number(state.count) !== rows.length
        ) {
          throw new QueueError(
            "IDEMPOTENCY_CONFLICT",
            "idempotencyKey: this key was already used for a different request",
            { field: "idempotencyKey" },
          );
        }
        const first = Number(state.first_seq);
        return Array.from({ length: rows.length }, (_, i) => first + i);
      },
    });
  }

  // -------------------------------------------------------------------------------------------
  // claim

  /**
   * Leases the oldest message of the oldest-claimed deliverable group (never-claimed groups first),
   * skipping groups with anything in flight and groups below `minPriority`. One batch.
   */
  async claim<E = unknown>(workerId: string, visibility: number, minPriority = 0): Promise<Lease<E> | null> {
    const [lease] = await this.claimMany<E>(workerId, visibility, 1, minPriority);
    return lease ?? null;
  }

  /** Up to `n` leases in distinct groups, in the order `n` single claims would give. One batch. */
  async claimMany<E = unknown>(workerId: string, visibility: number, n: number, minPriority = 0): Promise<Lease<E>[]> {
    const worker = checkWorkerId("workerId", workerId);
    const vis = checkPositiveSeconds("visibility", visibility);
    checkCount("n", n, MAX_CLAIM_BATCH);
    const min = checkPriority("minPriority", minPriority);
    const leases: Lease<E>[] = [];
    // A message past its attempts is dead-lettered by the claim that meets it; claim again for the
    // slots it took, so that a poison message never hides the rest of the queue.
    for (let round = 0; round < 16 && leases.length < n; round++) {
      const { got, deadLettered } = await this.#claimRound<E>(worker, vis, n - leases.length, min);
      leases.push(...got);
      if (deadLettered === 0) break;
    }
    return leases;
  }

  #claimRound<E>(worker: string, vis: number, n: number, min: number) {
    const maxAttempts = Number.isFinite(this.#opts.maxAttempts) ? this.#opts.maxAttempts : sql.UNLIMITED;
    const token = randomToken();
    return this.#committer.submit({
      stmts: sql.claimStatements({ lease: token, worker, visibility: vis, n, minPriority: min, maxAttempts }),
      // A resend picks nothing new and answers with the leases of the first attempt (see sql.ts).
      idempotent: true,
      finish: (rs) => {
        const picked = rs[0]?.rows.length ?? 0;
        const leased = [...(rs[1]?.rows ?? [])].sort((a, b) => Number(a.stamp) - Number(b.stamp));
        const got = leased.map((row) => toLease<E>(row, token, worker));
        return { got, deadLettered: Math.max(0, picked - got.length) };
      },
    });
  }

  // -------------------------------------------------------------------------------------------
  // ack / nack / extend

  /** Deletes the message of a lease that is still yours (live, or lapsed and not re-claimed). */
  async ack(lease: Lease | string): Promise<void> {
    const ref = leaseRef(lease);
    await this.#committer.submit({
      stmts: sql.ackStatements(ref),
      idempotent: true,
      finish: (rs, retried) => {
        if (rs[0]?.rows.length) return;
        const present = Number(rs[1]?.rows[0]?.present) === 1;
        // Gone after a retry: our first attempt applied and only its answer was lost.
        if (!present && retried) return;
        throw leaseError(present, ref);
      },
    });
  }

  /** Gives a lease back: `delay` 0 frees it now; `delay` > 0 parks it (and blocks its group) that long. */
  async nack(lease: Lease | string, delay = 0): Promise<NackResult> {
    const ref = leaseRef(lease);
    const d = checkDelay("delay", delay);
    const maxAttempts = Number.isFinite(this.#opts.maxAttempts) ? this.#opts.maxAttempts : sql.UNLIMITED;
    return this.#committer.submit({
      stmts: sql.nackStatements(ref, d, maxAttempts),
      idempotent: true,
      finish: (rs, retried) => {
        if (rs[1]?.rows.length) return { deadLettered: true };
        if (rs[2]?.rows.length) return { deadLettered: false };
        const state = rs[3]?.rows[0];
        const present = Number(state?.present) === 1;
        if (retried && Number(state?.dead) === 1) return { deadLettered: true };
        if (retried && present && Number(state?.ours) === 1) return { deadLettered: false };
        throw leaseError(present, ref);
      },
    });
  }

  /** Heartbeat: moves a lease that is still yours to expire `visibility` seconds from now. */
  async extend<E>(lease: Lease<E>, visibility: number): Promise<Lease<E>> {
    const ref = leaseRef(lease);
    const vis = checkPositiveSeconds("visibility", visibility);
    const expiresAt = await this.#committer.submit({
      stmts: sql.extendStatements(ref, vis),
      idempotent: true,
      finish: (rs) => {
        const row = rs[0]?.rows[0];
        if (row) return Number(row.lock_expiry);
        throw leaseError(Number(rs[1]?.rows[0]?.present) === 1, ref);
      },
    });
    return { ...lease, expiresAt };
  }

  // -------------------------------------------------------------------------------------------
  // dead letters, stats, lifecycle

  async deadLetters<E = unknown>(
    options: { groupId?: string; afterSeq?: number; limit?: number } = {},
  ): Promise<DeadLetter<E>[]> {
    const groupId = options.groupId === undefined ? null : checkId("groupId", options.groupId);
    const after = options.afterSeq ?? 0;
    if (!Number.isSafeInteger(after) || after < 0) throw invalid("afterSeq", "must be an integer >= 0");
    const limit = checkCount("limit", options.limit ?? 100, 1000);
    const rs = await this.#read(sql.listDeadLettersStatement(groupId, after, limit));
    return rs.rows.map((r) => ({
      seq: Number(r.seq),
      groupId: String(r.group_id),
      event: JSON.parse(String(r.event)) as E,
      priority: Number(r.priority),
      attempts: Number(r.attempts),
      reason: String(r.reason),
      deadAt: Number(r.dead_at),
    }));
  }

  /** Puts a dead letter back at the tail of its group, with a fresh attempt count; returns its new seq. */
  async redrive(seq: number): Promise<number> {
    const s = checkSeq("seq", seq);
    return this.#committer.submit({
      stmts: sql.redriveStatements(s),
      idempotent: false,
      finish: (rs) => {
        const row = rs[0]?.rows[0];
        if (!row) throw new QueueError("LEASE_NOT_FOUND", `seq: no dead letter ${s}`, { field: "seq" });
        return Number(row.seq);
      },
    });
  }

  /** Drops a dead letter for good; false when there was none. */
  async deleteDeadLetter(seq: number): Promise<boolean> {
    const s = checkSeq("seq", seq);
    return this.#committer.submit({
      stmts: [sql.deleteDeadLetterStatement(s)],
      idempotent: true,
      finish: (rs) => (rs[0]?.rows.length ?? 0) > 0,
    });
  }

  async stats(): Promise<QueueStats> {
    const r = (await this.#read(sql.STATS)).rows[0] as Row;
    const total = Number(r.total);
    const inFlight = Number(r.in_flight);
    const parked = Number(r.parked);
    const waiting = Number(r.waiting);
    return {
      ready: total - inFlight - parked - waiting,
      waiting,
      inFlight,
      parked,
      groups: Number(r.groups),
      deadLetters: Number(r.dead_letters),
      now: Number(r.now),
    };
  }

  /** Pulls the primary's latest frames into an embedded replica (no-op otherwise). */
  async sync(): Promise<void> {
    try {
      await this.client.sync();
    } catch (e) {
      throw toQueueError(e);
    }
  }

  close(): void {
    this.#committer.close();
    if (this.#ownsClient) this.client.close();
  }

  async #ensureSchema(): Promise<void> {
    try {
      const rs = await this.#read(sql.READ_SCHEMA_VERSION);
      if (Number(rs.rows[0]?.value) >= sql.SCHEMA_VERSION) return;
    } catch (e) {
      if (!(e instanceof QueueError) || e.code !== "DATABASE") throw e;
      // No tq_meta yet: a new database, or one made by the Python transports.
    }
    await this.#committer.submit({
      stmts: sql.SCHEMA.map((s) => ({ sql: s, args: [] })),
      idempotent: true,
      finish: () => undefined,
    });
  }

  /** A read, retried while the database is busy or unreachable, bounded like writes. */
  async #read(stmt: InStatement): Promise<ResultSet> {
    const deadline = Date.now() + this.#opts.timeoutMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await withTimeout(this.client.execute(stmt), this.#opts.requestTimeoutMs);
      } catch (e) {
        const err = toQueueError(e);
        const retryable = err.code === "BUSY" || err.code === "UNAVAILABLE" || err.code === "TIMEOUT";
        if (!retryable || Date.now() + 10 >= deadline) throw err;
        await new Promise((r) => setTimeout(r, backoff(attempt)));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// helpers

function resolveOptions(o: TransportOptions): typeof DEFAULTS {
  if (typeof o !== "object" || o === null) throw invalid("options", "must be an object");
  const int = (field: keyof TransportOptions, v: number | undefined, d: number, max: number) =>
    v === undefined ? d : checkCount(`options.${field}`, v, max);
  const maxAttempts =
    o.maxAttempts === undefined || o.maxAttempts === Number.POSITIVE_INFINITY
      ? (o.maxAttempts ?? DEFAULTS.maxAttempts)
      : checkCount("options.maxAttempts", o.maxAttempts, 1_000_000);
  return {
    maxInFlight: int("maxInFlight", o.maxInFlight, DEFAULTS.maxInFlight, 64),
    maxBatchStatements: int("maxBatchStatements", o.maxBatchStatements, DEFAULTS.maxBatchStatements, 10_000),
    requestTimeoutMs: int("requestTimeoutMs", o.requestTimeoutMs, DEFAULTS.requestTimeoutMs, 3_600_000),
    timeoutMs: int("timeoutMs", o.timeoutMs, DEFAULTS.timeoutMs, 3_600_000),
    maxAttempts,
    idempotencyWindow:
      o.idempotencyWindow === undefined
        ? DEFAULTS.idempotencyWindow
        : checkPositiveSeconds("options.idempotencyWindow", o.idempotencyWindow, 30 * 86_400),
  };
}

/** Expands `database` + options into a client config, once, up front. */
function clientConfig(database: string, o: TransportOptions, opts: typeof DEFAULTS): Config {
  if (typeof database !== "string" || database.length === 0) throw invalid("database", "must be a non-empty string");
  let url = database;
  if (url === ":memory:") {
    // as is
  } else if (/^libsql:/i.test(url)) {
    // libsql:// means "pick for me"; we pick HTTP so that every operation is one request.
    url = url.replace(/^libsql:/i, /[?&]tls=0/.test(url) ? "http:" : "https:");
  } else if (!/^(file|https?|wss?):/i.test(url)) {
    url = `file:${url}`;
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
  const timeoutFetch = (input: RequestInfo | URL, init?: RequestInit) =>
    base(input, { ...init, signal: AbortSignal.timeout(opts.requestTimeoutMs) });
  return {
    url,
    authToken: o.authToken,
    syncUrl: o.syncUrl?.replace(/^libsql:/i, "https:"),
    syncInterval: o.syncInterval,
    fetch: timeoutFetch,
    concurrency: Math.max(20, opts.maxInFlight + 8),
  };
}

function toLease<E>(row: Row, token: string, workerId: string): Lease<E> {
  const seq = Number(row.seq);
  return {
    id: `${seq}.${token}`,
    seq,
    groupId: String(row.group_id),
    event: JSON.parse(String(row.event)) as E,
    workerId,
    expiresAt: Number(row.lock_expiry),
    attempts: Number(row.attempts),
  };
}

const LEASE_ID = /^([1-9][0-9]{0,15})\.([0-9a-f]{32})$/;

/** Parses a lease or lease id; refuses anything that is not one of ours. */
export function leaseRef(lease: Lease | string): sql.LeaseRef {
  const id = typeof lease === "string" ? lease : typeof lease === "object" && lease !== null ? lease.id : undefined;
  const m = typeof id === "string" ? LEASE_ID.exec(id) : null;
  if (!m) throw invalid("lease", "is not a lease id of this queue");
  const seq = Number(m[1]);
  return { seq, lease: sql.storedLeaseId(m[2] as string, seq) };
}

function leaseError(present: boolean, ref: sql.LeaseRef): QueueError {
  return present
    ? new QueueError(
        "LEASE_LOST",
        `lease: message ${ref.seq} is no longer leased by this lease (it lapsed and was claimed again, or was released)`,
        { field: "lease" },
      )
    : new QueueError("LEASE_NOT_FOUND", `lease: message ${ref.seq} no longer exists (acked or dead-lettered)`, {
        field: "lease",
      });
}

function checkSeq(field: string, v: unknown): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) throw invalid(field, "must be a positive integer");
  return v;
}

function seqsOf(rs: ResultSet | undefined): number[] {
  return (rs?.rows ?? []).map((r) => Number(r.seq)).sort((a, b) => a - b);
}

function randomToken(): string {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

async function fingerprint(rows: sql.PublishRow[]): Promise<string> {
  const text = JSON.stringify(rows.map((r) => [r.groupId, r.event, r.priority]));
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (x) => x.toString(16).padStart(2, "0")).join("");
}
