/**
 * LibsqlTransport: the queue of the spec (`messages` + `groups`, leases, round-robin, priority floor)
 * over `@libsql/client`, so that it runs the same over a local file, an HTTP primary (sqld, Turso) or
 * an embedded replica, in Node or in a Worker. Every operation is one write batch: one HTTP request.
 */
import type { Client, Config, InStatement, ResultSet } from "@libsql/client";
import { backoff, Committer, type WriteSpec, withTimeout } from "./committer.js";
import { invalid, QueueError, toQueueError } from "./errors.js";
import { type HttpTarget, httpUrlOf, httpWriter } from "./hrana.js";
import { LocalWrites, localOf } from "./local.js";
import { nodeFetch } from "./node-fetch.js";
import { migrationSteps, READ_SCHEMA_VERSION, SCHEMA_VERSION } from "./schema.js";
import * as sql from "./sql.js";
import * as subs from "./subscriptions.js";
import type {
  Change,
  DeadLetter,
  GroupInfo,
  Lease,
  NackResult,
  PublishInput,
  PublishOptions,
  QueueStats,
} from "./types.js";
import {
  checkCount,
  checkDelay,
  checkId,
  checkPositiveSeconds,
  checkPriority,
  checkWorkerId,
  describe,
  encodeEvent,
} from "./validate.js";

export type {
  Change,
  DeadLetter,
  GroupInfo,
  Lease,
  NackResult,
  PublishInput,
  PublishOptions,
  QueueStats,
} from "./types.js";

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
  /**
   * Most ms a write batch waits, after the previous one is answered, for its callers to come back
   * with their next writes, so that they ride one batch instead of taking turns in two (default 0:
   * never). For a transport whose callers answer over a network, such as the Worker's QueueWriter
   * (4 ms); in-process callers come back at once and need none. Integer ms, 0-1000.
   */
  holdMs?: number;
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

/** Most messages in one publishMany (and one HTTP batch publish). */
export const MAX_PUBLISH_BATCH = 1000;
/** Most leases one claimMany asks for. */
export const MAX_CLAIM_BATCH = 100;

const DEFAULTS = {
  maxInFlight: 1,
  maxBatchStatements: 800,
  holdMs: 0,
  requestTimeoutMs: 10_000,
  timeoutMs: 30_000,
  maxAttempts: 5,
  idempotencyWindow: 86_400,
};

type Resolved = typeof DEFAULTS & { autoKeys: boolean };

export class LibsqlTransport {
  readonly client: Client;
  readonly #committer: Committer;
  readonly #opts: Resolved;
  readonly #ownsClient: boolean;
  /** Set for a local file: writes run in-process (local.ts), without the committer. */
  readonly #localWrites: LocalWrites | undefined;
  readonly #listeners = new Set<(change: Change, seq?: number) => void>();
  readonly #extendListeners = new Set<(leaseId: string, seq: number, expiresAt: number) => void>();
  readonly #subscriptionListeners = new Set<() => void>();

  private constructor(client: Client, opts: Resolved, ownsClient: boolean, http?: HttpTarget) {
    this.client = client;
    const local = localOf(client);
    this.#localWrites = local && new LocalWrites(local, opts.timeoutMs);
    this.#opts = opts;
    this.#ownsClient = ownsClient;
    // Over HTTP the write batch goes out through hrana.ts (the same request, less work per batch).
    this.#committer = new Committer(client, opts, http && httpWriter(http));
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
    const http = /^https?:/i.test(config.url)
      ? { url: config.url, authToken: config.authToken, fetch: config.fetch as typeof fetch }
      : undefined;
    const t = new LibsqlTransport(client, { ...opts, autoKeys: !local }, true, http);
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
      /**
       * The database `client` was made for (`libsql://` or `http(s)://`, and its token): writes
       * then go out as the same batch request without the client's machinery (hrana.ts, less CPU
       * per write); reads still use `client`.
       */
      http?: { url: string; authToken?: string | undefined };
    } = {},
  ): Promise<LibsqlTransport> {
    const { ensureSchema = true, http, ...rest } = options;
    const opts = resolveOptions(rest);
    const url = http === undefined ? undefined : httpUrlOf(typeof http.url === "string" ? http.url : "");
    if (http !== undefined && url === undefined) {
      throw invalid("options.http.url", "must be a libsql:// or http(s):// URL");
    }
    const target =
      url === undefined
        ? undefined
        : {
            url,
            authToken: http?.authToken,
            fetch: (input: RequestInfo | URL, init?: RequestInit) => fetch(input, init),
          };
    const t = new LibsqlTransport(client, { ...opts, autoKeys: client.protocol !== "file" }, false, target);
    if (ensureSchema) await t.#ensureSchema();
    return t;
  }

  /**
   * Calls `listener` after each write through this transport that may have made a message
   * deliverable (a publish, an ack or nack freeing its group, a redrive, a release), so that a
   * waiting consumer in this process can claim at once instead of polling. For an ack, nack or
   * release, `seq` is the message whose lease it settled. Writes by other processes are not seen.
   * Returns the function that removes the listener.
   */
  onChange(listener: (change: Change, seq?: number) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Calls `listener` after each extend through this transport, with the lease's id, its message and
   * its new expiry (unix seconds): the writer's pusher keeps the push slot a consumer holds after a
   * 202 for as long as the consumer keeps the lease. Returns the function that removes the listener.
   */
  onExtend(listener: (leaseId: string, seq: number, expiresAt: number) => void): () => void {
    this.#extendListeners.add(listener);
    return () => this.#extendListeners.delete(listener);
  }

  #changed(change: Change, seq?: number): void {
    tell(this.#listeners, "onChange", change, seq);
  }

  /** Counters of the write path: batches sent, writes and statements carried, retries, BUSY answers. */
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
      delay: delayOf(options, "delay"),
    };
    const [seq] = await this.#publishRows([row], options);
    this.#changed("publish");
    return seq as number;
  }

  /** Publishes all of `messages` in one batch, all or nothing; returns their seqs in order. */
  async publishMany(messages: PublishInput[], options: PublishOptions = {}): Promise<number[]> {
    if (!Array.isArray(messages)) throw invalid("messages", "must be an array");
    checkCount("messages.length", messages.length, MAX_PUBLISH_BATCH);
    // options.delay is the default for messages that give none.
    const delay = delayOf(options, "options.delay");
    const rows = messages.map((m, i) => {
      if (typeof m !== "object" || m === null) throw invalid(`messages[${i}]`, "must be an object");
      return {
        groupId: checkId(`messages[${i}].groupId`, m.groupId),
        event: encodeEvent(`messages[${i}].event`, m.event),
        priority: checkPriority(`messages[${i}].priority`, m.priority ?? 0),
        delay: m.delay === undefined ? delay : checkDelay(`messages[${i}].delay`, m.delay),
      };
    });
    const seqs = await this.#publishRows(rows, options);
    this.#changed("publish");
    return seqs;
  }

  async #publishRows(rows: sql.PublishRow[], options: PublishOptions): Promise<number[]> {
    if (typeof options !== "object" || options === null) throw invalid("options", "must be an object");
    const userKey =
      options.idempotencyKey === undefined ? undefined : checkId("idempotencyKey", options.idempotencyKey);
    if (userKey !== undefined) {
      const key = {
        kind: "user",
        key: userKey,
        token: randomToken(),
        fingerprint: await fingerprint(rows),
        ttl: this.#opts.idempotencyWindow,
      } as const;
      return this.#write(sql.publishPlan(rows, key), true);
    }
    if (!this.#opts.autoKeys) return this.#write(sql.publishPlan(rows, { kind: "none" }), false);
    // Over the network a request's answer can be lost after it applied: the publish takes a slot of
    // this process, so that sending it again cannot enqueue twice. The slot is kept while an
    // abandoned request might still land, and is otherwise free again once the call settles.
    const slot = slots.take();
    let settled = false;
    try {
      const key = { kind: "slot", slot, token: randomToken(), collect: slots.due() } as const;
      const seqs = await this.#write(sql.publishPlan(rows, key), true);
      settled = true;
      return seqs;
    } catch (e) {
      settled = !(e instanceof QueueError && e.outcomeUnknown);
      throw e;
    } finally {
      slots.give(slot, settled);
    }
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
      const got = await this.#write(
        sql.claimPlan<E>({
          token: randomToken(),
          worker,
          visibility: vis,
          n: n - leases.length,
          minPriority: min,
          maxAttempts: this.#maxAttempts,
          marker: -1 - Math.floor(Math.random() * 2 ** 52),
        }),
        // A resend answers with the leases the first request took, if it applied (see sql.ts).
        true,
        // A consumer with a lease comes back to ack it; one that found nothing waits a while.
        (got) => got.leases.length > 0,
      );
      leases.push(...got.leases);
      if (got.deadLettered === 0) break;
    }
    return leases;
  }

  // -------------------------------------------------------------------------------------------
  // ack / nack / extend

  /** Deletes the message of a lease that is still yours (live, or lapsed and not re-claimed). */
  async ack(lease: Lease | string): Promise<void> {
    const ref = leaseRef(lease);
    await this.#write(sql.ackPlan(ref), true, always);
    this.#changed("ack", ref.seq);
  }

  /** Gives a lease back: `delay` 0 frees it now; `delay` > 0 parks it (and blocks its group) that long. */
  async nack(lease: Lease | string, delay = 0): Promise<NackResult> {
    const ref = leaseRef(lease);
    const result = await this.#write(sql.nackPlan(ref, checkDelay("delay", delay), this.#maxAttempts), true, always);
    this.#changed("nack", ref.seq);
    return result;
  }

  /**
   * Gives back a lease that is still yours as if it had not been delivered: the message is
   * claimable again at once and its attempt is not counted. For a lease taken for a consumer that
   * went away before it got it (a long-poll waiter that disconnected).
   */
  async release(lease: Lease | string): Promise<void> {
    const ref = leaseRef(lease);
    await this.#write(sql.releasePlan(ref), true);
    this.#changed("release", ref.seq);
  }

  /** Heartbeat: moves a lease that is still yours to expire `visibility` seconds from now. */
  async extend<E>(lease: Lease<E>, visibility: number): Promise<Lease<E>> {
    const ref = leaseRef(lease);
    const expiresAt = await this.#write(sql.extendPlan(ref, checkPositiveSeconds("visibility", visibility)), true);
    tell(this.#extendListeners, "onExtend", sql.leaseIdOf(ref), ref.seq, expiresAt);
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
    return this.#readPlan(sql.deadLettersPlan<E>(groupId, after, limit));
  }

  /** Puts a dead letter back at the tail of its group, with a fresh attempt count; returns its new seq. */
  async redrive(seq: number): Promise<number> {
    const newSeq = await this.#write(sql.redrivePlan(checkSeq("seq", seq)), false);
    this.#changed("redrive");
    return newSeq;
  }

  /** Drops a dead letter for good; false when there was none. */
  async deleteDeadLetter(seq: number): Promise<boolean> {
    return this.#write(sql.deleteDeadLetterPlan(checkSeq("seq", seq)), true);
  }

  async stats(): Promise<QueueStats> {
    return this.#readPlan(sql.statsPlan());
  }

  /**
   * Groups worth watching: those holding a lease, a park or a delayed message (newest first), then
   * the next ones in round-robin order; each with its messages counted up to 1,000. Reads at most
   * about `limit` × 1,000 rows, whatever the depth.
   */
  async groups(options: { limit?: number } = {}): Promise<GroupInfo[]> {
    if (typeof options !== "object" || options === null) throw invalid("options", "must be an object");
    return this.#readPlan(sql.groupsPlan(checkCount("limit", options.limit ?? 20, 100)));
  }

  /**
   * The earliest moment something held by time (a lease, a park, a delayed message) may become
   * deliverable, in epoch seconds on the database's clock, or null; with the database's now.
   */
  async nextDueAt(): Promise<{ next: number | null; now: number }> {
    return this.#readPlan(sql.nextDuePlan());
  }

  // -------------------------------------------------------------------------------------------
  // push subscriptions (delivered by the QueueWriter, src/app/writer/push.ts)

  /** Creates or updates a subscription; its signing secret is drawn at creation and kept on update. */
  async putSubscription(name: string, input: subs.SubscriptionInput): Promise<subs.Subscription> {
    const checked = subs.checkSubscription(name, input);
    const s = await this.#write(subs.putSubscriptionPlan(checked, randomToken() + randomToken()), true);
    this.#subscriptionsChanged();
    return s;
  }

  /** Every subscription, by name, with its signing secret. */
  async subscriptions(): Promise<subs.Subscription[]> {
    return this.#readPlan(subs.listSubscriptionsPlan());
  }

  /** Deletes a subscription; false when there was none. */
  async deleteSubscription(name: string): Promise<boolean> {
    const removed = await this.#write(subs.deleteSubscriptionPlan(subs.checkSubscriptionName("name", name)), true);
    this.#subscriptionsChanged();
    return removed;
  }

  /** Tells `listener` after each subscription put or delete through this transport. */
  onSubscriptionsChange(listener: () => void): () => void {
    this.#subscriptionListeners.add(listener);
    return () => this.#subscriptionListeners.delete(listener);
  }

  #subscriptionsChanged(): void {
    tell(this.#subscriptionListeners, "onSubscriptionsChange");
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

  get #maxAttempts(): number {
    return Number.isFinite(this.#opts.maxAttempts) ? this.#opts.maxAttempts : sql.UNLIMITED;
  }

  /** `comesBack`: see WriteSpec (a consumer's next write follows this one's answer at once). */
  #write<T>(plan: sql.Plan<T>, idempotent: boolean, comesBack?: (answer: T) => boolean): Promise<T> {
    if (this.#localWrites) return this.#localWrites.submit(plan);
    const spec: WriteSpec<T> = { ...plan, idempotent, comesBack };
    return this.#committer.submit(spec);
  }

  async #readPlan<T>(plan: sql.Plan<T>): Promise<T> {
    const results: ResultSet[] = [];
    for (const s of plan.stmts) results.push(await this.#read(s));
    return plan.read(results, false);
  }

  async #ensureSchema(): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const version = await this.#schemaVersion();
      if (version >= SCHEMA_VERSION) return;
      try {
        await this.#write({ stmts: migrationSteps(version), read: () => undefined }, true);
        return;
      } catch (e) {
        // Another transport may have migrated meanwhile (its batch won, ours failed as a whole).
        if (attempt > 0 || !(e instanceof QueueError) || e.code !== "DATABASE") throw e;
      }
    }
  }

  async #schemaVersion(): Promise<number> {
    try {
      const rs = await this.#read(READ_SCHEMA_VERSION);
      return Number(rs.rows[0]?.value ?? 0);
    } catch (e) {
      if (!(e instanceof QueueError) || e.code !== "DATABASE") throw e;
      return 0; // No tq_meta yet: a new database, or one made by the Python transports.
    }
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
    holdMs: o.holdMs === undefined ? DEFAULTS.holdMs : checkMs("options.holdMs", o.holdMs, 1000),
    requestTimeoutMs: int("requestTimeoutMs", o.requestTimeoutMs, DEFAULTS.requestTimeoutMs, 3_600_000),
    timeoutMs: int("timeoutMs", o.timeoutMs, DEFAULTS.timeoutMs, 3_600_000),
    maxAttempts,
    idempotencyWindow:
      o.idempotencyWindow === undefined
        ? DEFAULTS.idempotencyWindow
        : checkPositiveSeconds("options.idempotencyWindow", o.idempotencyWindow, 30 * 86_400),
  };
}

/** Calls each listener; one that throws is logged and does not stop the others or the write. */
function tell<A extends unknown[]>(listeners: Set<(...args: A) => void>, name: string, ...args: A): void {
  for (const listener of listeners) {
    try {
      listener(...args);
    } catch (e) {
      console.error(`${name} listener threw`, e);
    }
  }
}

/** A consumer that acked or nacked claims its next message. */
const always = () => true;

function checkMs(field: string, v: unknown, max: number): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > max) {
    throw invalid(field, `must be an integer number of ms from 0 to ${max}, got ${describe(v)}`);
  }
  return v;
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

/** Parses a lease or lease id; refuses anything that is not one of ours. */
export function leaseRef(lease: Lease | string): sql.LeaseRef {
  const id = typeof lease === "string" ? lease : typeof lease === "object" && lease !== null ? lease.id : undefined;
  const ref = sql.parseLeaseId(id);
  if (!ref) throw invalid("lease", "is not a lease id of this queue");
  return ref;
}

/**
 * The publisher slots of this process (see sql.publishPlan): a slot per publish under way, reused
 * once its publish settled. A slot whose publish ended with its outcome unknown rests for ten
 * minutes first, in case the abandoned request still lands.
 */
const slots = (() => {
  // Drawn on first use: a Worker may not generate random values at module scope.
  let process: string | undefined;
  const free: number[] = [];
  const resting: Array<{ n: number; until: number }> = [];
  let next = 0;
  let publishes = 0;
  return {
    /** The first publish of a process, and every 1024th after, also collects slots of gone processes. */
    due: () => publishes++ % 1024 === 0,
    take(): string {
      const now = Date.now();
      while (resting.length > 0 && (resting[0] as { until: number }).until <= now) {
        free.push((resting.shift() as { n: number }).n);
      }
      process ??= randomToken().slice(0, 16);
      return `${process}:${free.pop() ?? next++}`;
    },
    give(slot: string, settled: boolean): void {
      const n = Number(slot.slice(slot.indexOf(":") + 1));
      if (settled) free.push(n);
      else resting.push({ n, until: Date.now() + 600_000 });
    },
  };
})();

function checkSeq(field: string, v: unknown): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) throw invalid(field, "must be a positive integer");
  return v;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));
/** Random bytes drawn 4 KiB at a time: a token per claim or publish should not cost a syscall. */
let pool = new Uint8Array(0);
let poolAt = 0;

/** 128 random bits as 32 hex digits. */
function randomToken(): string {
  if (poolAt + 16 > pool.length) {
    pool = crypto.getRandomValues(new Uint8Array(4096));
    poolAt = 0;
  }
  let out = "";
  for (let i = poolAt; i < poolAt + 16; i++) out += HEX[pool[i] as number];
  poolAt += 16;
  return out;
}

function delayOf(options: PublishOptions, field: string): number {
  if (typeof options !== "object" || options === null) throw invalid("options", "must be an object");
  return options.delay === undefined ? 0 : checkDelay(field, options.delay);
}

async function fingerprint(rows: sql.PublishRow[]): Promise<string> {
  // A delay is part of the request (version 1's fingerprints, without one, still match).
  const text = JSON.stringify(
    rows.map((r) => (r.delay > 0 ? [r.groupId, r.event, r.priority, r.delay] : [r.groupId, r.event, r.priority])),
  );
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (x) => x.toString(16).padStart(2, "0")).join("");
}
