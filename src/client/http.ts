/**
 * `createClient()`: a typed client for the Worker's HTTP API, for publishers in serverless functions
 * (Vercel, Lambda, Workers, Deno, browsers) and for consumers anywhere: it is a `ConsumerQueue`, so
 * `consume(client, handler, ...)` runs over HTTP.
 *
 * Its methods are the library's (`LibsqlTransport`'s): the same arguments, the same answers
 * (camelCase `Lease`, `QueueStats`, ...), so code moves between the two unchanged. The wire shapes
 * are the contract's (src/contract/types.ts); what issue 11 adds to the API is in ./http-next.ts.
 *
 * What it does for you:
 *  - every publish carries an `Idempotency-Key` (yours, or one it makes), so that it can be sent
 *    again after a lost answer without enqueuing twice;
 *  - it retries what is safe to retry: anything the API did not apply (503 BUSY, 429, a refused
 *    connection), and after a lost answer (no answer, 503 UNAVAILABLE / TIMEOUT, a gateway's 5xx)
 *    publishes (keyed), claims (a lease nobody holds lapses), ack / nack / extend (fenced: a retry
 *    that finds its own work done says so, see `#ackAnswer` and `nack`) and reads; a redrive is not
 *    sent again once it may have applied;
 *  - it waits what a `Retry-After` says (never past the call's deadline);
 *  - every call has a deadline (`timeoutMs`, plus the wait of a long poll) and takes a `signal`;
 *  - every failure is a `QueueHttpError` (a `QueueError`) with the API's `code`, the HTTP `status`
 *    and the `field` at fault.
 *
 * One round trip per message for consume(): an ack issued in the same tick as a claim rides in
 * that claim's request (`"ack": [...]`), the HTTP counterpart of the library's group commit.
 */
import type * as T from "../contract/types.js";
import { QueueError } from "../core/errors.js";
import { nodeFetch } from "../core/node-fetch.js";
import type { DeadLetter, GroupInfo, Lease, NackResult, PublishInput, QueueStats } from "../core/types.js";
import { checkId, describe, encodeEvent } from "../core/validate.js";
import {
  type Failure,
  failureOfAnswer,
  failureOfNetwork,
  invalidArgument,
  QueueHttpError,
  withUnknownOutcome,
} from "./http-errors.js";
import {
  type AckOutcome,
  ackOutcomes,
  type BatchMessage,
  type ClaimAnswer,
  type ClaimBody,
  MAX_ACKS,
  MAX_WAIT,
  type PublishBody,
  type Subscription,
  type SubscriptionAnswer,
  type SubscriptionOptions,
  type SubscriptionRequest,
  subscriptionOf,
  unsupported,
} from "./http-next.js";

/** The part of `fetch` the client uses (the platform's `fetch` is one). */
export type FetchLike = (
  url: string,
  init: { method: string; headers: Record<string, string>; body?: string; signal: AbortSignal },
) => Promise<{ status: number; headers: { get(name: string): string | null }; text(): Promise<string> }>;

export interface ClientOptions {
  /** Where the API is served, e.g. `https://turso-queue.example.workers.dev` (a path prefix is kept: `https://example.com/queue`). */
  url: string;
  /** The API's bearer token (`QUEUE_TOKEN`). */
  token: string;
  /** Default: in Node a keep-alive `fetch` with Nagle off (as the library's); elsewhere `globalThis.fetch`. */
  fetch?: FetchLike;
  /** A call's budget in ms, retries and their pauses included (default 30,000); a long poll adds its wait. */
  timeoutMs?: number;
  /** Most times a call is sent again after a failure it is safe to retry (default 4). */
  retries?: number;
  /**
   * The longest a claim waits for a message, in seconds, when consume() long-polls with this client
   * (0 to 20, default 20; 0: consume() polls with its idle backoff instead).
   */
  maxClaimWait?: number;
}

/** Per call: `signal` aborts it (the call rejects with the signal's reason); `timeoutMs` replaces the client's. */
export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

export interface PublishCallOptions extends CallOptions {
  /** Makes a retry of the same publish return the first answer; default: one the client makes per call. */
  idempotencyKey?: string;
  /** Seconds before the message may be delivered (it keeps its place in its group). For publishMany: the default of messages that give none. */
  delay?: number;
}

export interface ClaimOptions extends CallOptions {
  /** Seconds (0-20) the API may hold the claim open until a message can be leased (long poll). */
  wait?: number;
}

export interface DeadLetterOptions extends CallOptions {
  groupId?: string;
  afterSeq?: number;
  limit?: number;
}

/** A successful answer, read whole. */
interface Answer {
  status: number;
  headers: { get(name: string): string | null };
  text: string;
}

interface Op<R> {
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** Encoded path and query, from the API's root: `/v1/stats`. */
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** A write: a failure after an answer was lost says `outcomeUnknown`. */
  write: boolean;
  /** May be sent again after an attempt whose outcome is unknown (keyed, fenced or read-only). */
  retryUnknown: boolean;
  /** Reads a 2xx answer; `retried`: an earlier attempt of this call may have applied. */
  ok(answer: Answer, retried: boolean): R;
  /** Extra ms for the deadline (a long poll's wait). */
  extraMs?: number;
}

/** An ack waiting to ride with the next claim. */
interface Rider {
  id: string;
  resolve(): void;
  reject(e: unknown): void;
}

const DEFAULTS = { timeoutMs: 30_000, retries: 4, maxClaimWait: MAX_WAIT };
const BACKOFF = { initialMs: 100, maxMs: 2_000 };
/** Idle pauses between claims when a server without long poll is asked to wait (as consume() polls). */
const POLL = { minMs: 50, maxMs: 1_000 };

/** A client for the queue's HTTP API. */
export function createClient(options: ClientOptions): QueueClient {
  return new QueueClient(options);
}

export class QueueClient {
  readonly #base: string;
  readonly #auth: string;
  readonly #fetch: FetchLike;
  readonly #timeoutMs: number;
  readonly #retries: number;
  readonly #maxClaimWait: number;
  /** Acks waiting for a claim in this tick; sent on their own at the end of it otherwise. */
  #riders: Rider[] = [];
  #flushQueued = false;
  /** False once the server refused a feature as an unknown field (a server older than the client). */
  #serverAcks = true;
  #serverWaits = true;

  constructor(options: ClientOptions) {
    if (typeof options !== "object" || options === null) {
      throw invalidArgument("options", `must be an object, got ${describe(options)}`);
    }
    this.#base = baseUrl(options.url);
    if (typeof options.token !== "string" || !/^[!-~]+$/.test(options.token)) {
      throw invalidArgument("options.token", "must be a non-empty string of visible ASCII characters (a bearer token)");
    }
    this.#auth = `Bearer ${options.token}`;
    if (options.fetch !== undefined && typeof options.fetch !== "function") {
      throw invalidArgument("options.fetch", `must be a function, got ${describe(options.fetch)}`);
    }
    const platform = (url: string, init: Parameters<FetchLike>[1]) => globalThis.fetch(url, init);
    this.#fetch = options.fetch ?? (nodeFetch() as FetchLike | undefined) ?? platform;
    this.#timeoutMs = timeoutOf("options.timeoutMs", options.timeoutMs, DEFAULTS.timeoutMs);
    this.#retries = intIn("options.retries", options.retries, DEFAULTS.retries, 0, 100);
    this.#maxClaimWait = numIn("options.maxClaimWait", options.maxClaimWait, DEFAULTS.maxClaimWait, 0, MAX_WAIT);
  }

  /** consume() long-polls a queue that declares this (seconds); undefined when `maxClaimWait` is 0. */
  get maxClaimWait(): number | undefined {
    return this.#maxClaimWait > 0 ? this.#maxClaimWait : undefined;
  }

  // -------------------------------------------------------------------------------------------
  // publish

  /** Appends `event` to `groupId`; returns its seq. The first publish of a group sets its priority. */
  async publish(groupId: string, event: unknown, priority?: number, options: PublishCallOptions = {}): Promise<number> {
    checkOptions(options);
    const path = `/v1/groups/${segment("group_id", () => checkId("group_id", groupId))}/messages`;
    library(() => encodeEvent("event", event));
    const body: PublishBody = { event };
    if (priority !== undefined) body.priority = priority;
    if (options.delay !== undefined) body.delay = options.delay;
    return this.#send(
      {
        method: "POST",
        path,
        body,
        headers: { "idempotency-key": idempotencyKey(options.idempotencyKey) },
        write: true,
        retryUnknown: true,
        ok: (a) => json<T.PublishAnswer>(a, path).seq,
      },
      options,
    );
  }

  /** Publishes all of `messages` in one request, all or nothing; returns their seqs in order. */
  async publishMany(messages: PublishInput[], options: PublishCallOptions = {}): Promise<number[]> {
    checkOptions(options);
    if (!Array.isArray(messages)) throw invalidArgument("messages", `must be an array, got ${describe(messages)}`);
    const list = messages.map((m, i): BatchMessage => {
      if (typeof m !== "object" || m === null) {
        throw invalidArgument(`messages[${i}]`, `must be an object, got ${describe(m)}`);
      }
      library(() => encodeEvent(`messages[${i}].event`, m.event));
      const out: BatchMessage = { group_id: m.groupId, event: m.event };
      if (m.priority !== undefined) out.priority = m.priority;
      const delay = m.delay ?? options.delay;
      if (delay !== undefined) out.delay = delay;
      return out;
    });
    const path = "/v1/messages";
    return this.#send(
      {
        method: "POST",
        path,
        body: { messages: list },
        headers: { "idempotency-key": idempotencyKey(options.idempotencyKey) },
        write: true,
        retryUnknown: true,
        ok: (a) => json<T.PublishBatchAnswer>(a, path).seqs,
      },
      options,
    );
  }

  // -------------------------------------------------------------------------------------------
  // claim

  /** The next message's lease, or null when nothing is deliverable (after `wait` seconds, if given). */
  async claim<E = unknown>(
    workerId: string,
    visibility: number,
    minPriority?: number,
    options: ClaimOptions = {},
  ): Promise<Lease<E> | null> {
    const [lease] = await this.claimMany<E>(workerId, visibility, 1, minPriority, options);
    return lease ?? null;
  }

  /**
   * Up to `n` (1-100) leases in distinct groups. With `wait` > 0 the API answers as soon as it can
   * lease, or with none when the wait is over.
   */
  async claimMany<E = unknown>(
    workerId: string,
    visibility: number,
    n: number,
    minPriority?: number,
    options: ClaimOptions = {},
  ): Promise<Lease<E>[]> {
    checkOptions(options);
    const wait = options.wait ?? 0;
    // Acks issued in this tick ride along, unless this claim may be held open (they would wait with it).
    const riders = wait === 0 && this.#serverAcks ? this.#riders.splice(0, MAX_ACKS) : [];
    const body: ClaimBody = { worker_id: workerId, visibility, max: n };
    if (minPriority !== undefined) body.min_priority = minPriority;
    if (wait !== 0 && this.#serverWaits) body.wait = wait;
    if (riders.length > 0) body.ack = riders.map((r) => r.id);
    const path = "/v1/claims";
    try {
      const { answer, retried } = await this.#send(
        {
          method: "POST",
          path,
          body,
          write: true,
          retryUnknown: true,
          ok: (a, retried) => ({ answer: json<ClaimAnswer>(a, path), retried }),
          extraMs: typeof body.wait === "number" ? body.wait * 1000 : 0,
        },
        options,
      );
      if (riders.length > 0) this.#settleRiders(riders, ackOutcomes(answer, body.ack ?? []), retried);
      const leases = answer.leases.map((l) => leaseOf<E>(l, workerId));
      if (leases.length > 0 || wait === 0 || this.#serverWaits) return leases;
      return this.#pollFor<E>(workerId, visibility, n, minPriority, options);
    } catch (e) {
      // The riders go on their own: alone, each gets its own answer (sent as a retry when the
      // claim may have applied them).
      const mayHaveApplied = !(e instanceof QueueHttpError) || e.outcomeUnknown;
      for (const r of riders) this.#ackAlone(r.id, {}, mayHaveApplied).then(r.resolve, r.reject);
      if (!(e instanceof QueueHttpError) || e.code !== "INVALID_ARGUMENT") throw e;
      // Refused for what the riders or `wait` added: the claim itself was fine, so send it without them.
      const acksRefused = riders.length > 0 && /^(ack\b|"ack")/.test(e.field ?? "");
      if (acksRefused && unsupported(e, "ack")) this.#serverAcks = false;
      const waitRefused = body.wait !== undefined && unsupported(e, "wait");
      if (waitRefused) this.#serverWaits = false;
      if (acksRefused || waitRefused) return this.claimMany<E>(workerId, visibility, n, minPriority, options);
      throw e;
    }
  }

  /** `wait` on a server without long poll: claims with backoff until a lease comes or the wait is over. */
  async #pollFor<E>(
    workerId: string,
    visibility: number,
    n: number,
    minPriority: number | undefined,
    options: ClaimOptions,
  ): Promise<Lease<E>[]> {
    const until = Date.now() + (options.wait ?? 0) * 1000;
    for (let pause = POLL.minMs; ; pause = Math.min(pause * 2, POLL.maxMs)) {
      const left = until - Date.now();
      if (left <= 0) return [];
      await sleep(Math.min(pause, left), options.signal);
      const leases = await this.claimMany<E>(workerId, visibility, n, minPriority, { ...options, wait: 0 });
      if (leases.length > 0) return leases;
    }
  }

  // -------------------------------------------------------------------------------------------
  // ack / nack / extend

  /**
   * Deletes the message of a lease that is still yours. Without per-call options, an ack issued in
   * the same tick as a claim travels in that claim's request.
   */
  ack(lease: Lease | string, options?: CallOptions): Promise<void> {
    let id: string;
    try {
      id = leaseIdOf(lease);
    } catch (e) {
      return Promise.reject(e);
    }
    if (options !== undefined || !this.#serverAcks) return this.#ackAlone(id, options ?? {}, false);
    return new Promise<void>((resolve, reject) => {
      this.#riders.push({ id, resolve, reject });
      if (!this.#flushQueued) {
        this.#flushQueued = true;
        queueMicrotask(() => {
          this.#flushQueued = false;
          for (const r of this.#riders.splice(0)) this.#ackAlone(r.id, {}, false).then(r.resolve, r.reject);
        });
      }
    });
  }

  /** One ack, in its own request; `retried`: an earlier request with this ack may have applied it. */
  async #ackAlone(id: string, options: CallOptions, retried: boolean): Promise<void> {
    const path = `/v1/leases/${segment("lease_id", () => id)}/ack`;
    try {
      await this.#send({ method: "POST", path, write: true, retryUnknown: true, ok: () => undefined }, options);
    } catch (e) {
      if (e instanceof QueueHttpError && this.#ackDone(e, retried || e.outcomeUnknown)) return;
      throw e;
    }
  }

  /**
   * A fenced ack that was sent before: a message now gone was deleted by the attempt whose answer
   * was lost (the library reads a resent ack the same way). Still present with another lease: the
   * lease was lost, whatever happened before (an ack that applied leaves no message).
   */
  #ackDone(e: QueueHttpError, retried: boolean): boolean {
    return retried && e.code === "LEASE_NOT_FOUND";
  }

  #settleRiders(riders: Rider[], outcomes: (AckOutcome | undefined)[], retried: boolean): void {
    riders.forEach((r, i) => {
      const o = outcomes[i];
      if (o === undefined) {
        // The answer does not say: ask again on its own (fenced, so sending it again is safe).
        this.#ackAlone(r.id, {}, true).then(r.resolve, r.reject);
      } else if (o.error === undefined) {
        r.resolve();
      } else {
        const e = new QueueHttpError(o.error.code as QueueHttpError["code"], o.error.message, {
          status: STATUS_OF_ACK_ERROR[o.error.code],
          field: "lease_id",
        });
        if (this.#ackDone(e, retried)) r.resolve();
        else r.reject(e);
      }
    });
  }

  /**
   * Gives a lease back: `delay` 0 frees it now; > 0 parks it (and blocks its group) that long.
   * `deadLettered` when it had used its last attempt.
   */
  async nack(lease: Lease | string, delay?: number, options: CallOptions = {}): Promise<NackResult> {
    const id = leaseIdOf(lease);
    const path = `/v1/leases/${segment("lease_id", () => id)}/nack`;
    const body: T.NackRequest = delay === undefined ? {} : { delay };
    try {
      return await this.#send(
        {
          method: "POST",
          path,
          body,
          write: true,
          retryUnknown: true,
          ok: (a) => ({ deadLettered: a.headers.get("dead-lettered") === "true" }),
        },
        options,
      );
    } catch (e) {
      if (!(e instanceof QueueHttpError && e.outcomeUnknown)) throw e;
      // An earlier attempt may have applied. Gone: it is a dead letter if that attempt moved it there.
      if (e.code === "LEASE_NOT_FOUND" && (await this.#isDeadLetter(seqOfLeaseId(id), options))) {
        return { deadLettered: true };
      }
      if (e.code === "LEASE_LOST") {
        // Held by another lease now. While our lease has not lapsed nobody else can have claimed
        // the message, so the attempt whose answer was lost released it. Past that, it may have
        // lapsed and been claimed before our nack: the API cannot tell which.
        if (typeof lease === "object" && (await this.#notLapsed(lease.expiresAt, options))) {
          return { deadLettered: false };
        }
        throw withUnknownOutcome(e, "an earlier attempt's answer was lost: it may have released the message");
      }
      throw e;
    }
  }

  /** True when a lease expiring at `expiresAt` has not lapsed yet, by the database's clock. */
  async #notLapsed(expiresAt: unknown, options: CallOptions): Promise<boolean> {
    if (typeof expiresAt !== "number") return false;
    return expiresAt > (await this.stats({ signal: options.signal })).now;
  }

  async #isDeadLetter(seq: number, options: CallOptions): Promise<boolean> {
    if (!Number.isSafeInteger(seq)) return false;
    const [first] = await this.deadLetters({ afterSeq: seq - 1, limit: 1, signal: options.signal });
    return first?.seq === seq;
  }

  /** Heartbeat: the lease now expires `visibility` seconds from now (the database's clock). */
  extend<E>(lease: Lease<E>, visibility: number, options?: CallOptions): Promise<Lease<E>>;
  extend(leaseId: string, visibility: number, options?: CallOptions): Promise<{ id: string; expiresAt: number }>;
  async extend<E>(
    lease: Lease<E> | string,
    visibility: number,
    options: CallOptions = {},
  ): Promise<Lease<E> | { id: string; expiresAt: number }> {
    const id = leaseIdOf(lease);
    const path = `/v1/leases/${segment("lease_id", () => id)}/extend`;
    const body: T.ExtendRequest = { visibility };
    const expiresAt = await this.#send(
      {
        method: "POST",
        path,
        body,
        write: true,
        retryUnknown: true,
        ok: (a) => json<T.ExtendAnswer>(a, path).expires_at,
      },
      options,
    );
    return typeof lease === "string" ? { id, expiresAt } : { ...lease, expiresAt };
  }

  // -------------------------------------------------------------------------------------------
  // inspect, dead letters

  /** Counts of ready, waiting, in-flight, parked and delayed messages, groups and dead letters. */
  async stats(options: CallOptions = {}): Promise<QueueStats> {
    const path = "/v1/stats";
    return this.#read(path, options, (a) => {
      const s = json<T.Stats>(a, path);
      return {
        ready: s.ready,
        waiting: s.waiting,
        inFlight: s.in_flight,
        parked: s.parked,
        delayed: s.delayed,
        groups: s.groups,
        deadLetters: s.dead_letters,
        now: s.now,
      };
    });
  }

  /** Groups worth watching, as the library's `groups()` lists them; `limit` 1-100 (default 20). */
  async groups(options: { limit?: number } & CallOptions = {}): Promise<GroupInfo[]> {
    checkOptions(options);
    const path = `/v1/groups${query({ limit: options.limit })}`;
    return this.#read(path, options, (a) =>
      json<T.GroupList>(a, path).groups.map((g) => ({
        groupId: g.group_id,
        messages: g.messages,
        priority: g.priority,
        inFlight: g.in_flight,
        parked: g.parked,
        lastClaimedAt: g.last_claimed_at ?? 0,
      })),
    );
  }

  /** A page of dead letters in seq order: pass the last one's seq as `afterSeq` for the next. */
  async deadLetters<E = unknown>(options: DeadLetterOptions = {}): Promise<DeadLetter<E>[]> {
    checkOptions(options);
    const q = { group_id: options.groupId, after_seq: options.afterSeq, limit: options.limit };
    const path = `/v1/dead-letters${query(q)}`;
    return this.#read(path, options, (a) =>
      json<T.DeadLetterPage>(a, path).dead_letters.map((d) => ({
        seq: d.seq,
        groupId: d.group_id,
        event: d.event as E,
        priority: d.priority,
        attempts: d.attempts,
        reason: d.reason,
        deadAt: d.dead_at,
      })),
    );
  }

  /**
   * Puts a dead letter back at the tail of its group; returns its new seq. Not sent again once an
   * attempt may have applied (a second redrive would find nothing and could not tell the new seq).
   */
  async redrive(seq: number, options: CallOptions = {}): Promise<number> {
    const path = `/v1/dead-letters/${seqSegment(seq)}/redrive`;
    return this.#send(
      { method: "POST", path, write: true, retryUnknown: false, ok: (a) => json<T.RedriveAnswer>(a, path).seq },
      options,
    );
  }

  /** Drops a dead letter; false when there was none (true when an earlier attempt whose answer was lost may have). */
  async deleteDeadLetter(seq: number, options: CallOptions = {}): Promise<boolean> {
    return this.#delete(`/v1/dead-letters/${seqSegment(seq)}`, options);
  }

  // -------------------------------------------------------------------------------------------
  // push subscriptions (issue 11)

  /** Creates or updates a push subscription; answers it with its `signingSecret` (kept on update). */
  async subscribe(
    name: string,
    options: SubscriptionOptions & CallOptions,
  ): Promise<Subscription & { signingSecret: string }> {
    checkOptions(options);
    const path = `/v1/subscriptions/${segment("name", () => checkId("name", name))}`;
    const body: SubscriptionRequest = { url: options.url };
    if (options.minPriority !== undefined) body.min_priority = options.minPriority;
    if (options.maxInFlight !== undefined) body.max_in_flight = options.maxInFlight;
    if (options.visibility !== undefined) body.visibility = options.visibility;
    return this.#send(
      {
        method: "PUT",
        path,
        body,
        write: true,
        retryUnknown: true,
        ok: (a) => {
          const s = json<SubscriptionAnswer>(a, path);
          return { ...subscriptionOf(s), signingSecret: s.signing_secret ?? "" };
        },
      },
      options,
    );
  }

  async subscriptions(options: CallOptions = {}): Promise<Subscription[]> {
    const path = "/v1/subscriptions";
    return this.#read(path, options, (a) =>
      json<{ subscriptions: SubscriptionAnswer[] }>(a, path).subscriptions.map(subscriptionOf),
    );
  }

  /** Deletes a subscription (no delivery starts after it); false when there was none. */
  async unsubscribe(name: string, options: CallOptions = {}): Promise<boolean> {
    return this.#delete(`/v1/subscriptions/${segment("name", () => checkId("name", name))}`, options);
  }

  // -------------------------------------------------------------------------------------------
  // requests

  #read<R>(path: string, options: CallOptions, ok: (a: Answer) => R): Promise<R> {
    return this.#send({ method: "GET", path, write: false, retryUnknown: true, ok }, options);
  }

  async #delete(path: string, options: CallOptions): Promise<boolean> {
    try {
      return await this.#send({ method: "DELETE", path, write: true, retryUnknown: true, ok: () => true }, options);
    } catch (e) {
      // 404: none (or gone already, when an earlier attempt may have deleted it).
      if (e instanceof QueueHttpError && e.code === "NOT_FOUND" && e.status === 404) return e.outcomeUnknown;
      throw e;
    }
  }

  /** Sends one call: its attempts, the pauses between them, all within its deadline. */
  async #send<R>(op: Op<R>, options: CallOptions): Promise<R> {
    checkOptions(options);
    const what = `${op.method} ${op.path.replace(/\?.*/, "")}`;
    const budget = timeoutOf("options.timeoutMs", options.timeoutMs, this.#timeoutMs) + (op.extraMs ?? 0);
    const clock = new Clock(budget, options.signal);
    const headers: Record<string, string> = { authorization: this.#auth, ...op.headers };
    const body = op.body === undefined ? undefined : JSON.stringify(op.body);
    if (body !== undefined) headers["content-type"] = "application/json";
    let retried = false;
    let sent = false;
    try {
      for (let attempt = 0; ; attempt++) {
        let failure: Failure;
        let answer: Answer | undefined;
        try {
          clock.check();
          sent = true;
          const f = this.#fetch;
          const res = await f(this.#base + op.path, { method: op.method, headers, body, signal: clock.signal });
          const text = await res.text();
          if (res.status < 400) answer = { status: res.status, headers: res.headers, text };
          else failure = failureOfAnswer(res.status, text, res.headers.get("retry-after"), what);
        } catch (e) {
          if (clock.aborted) throw clock.reason(what, op.write && (sent || retried));
          failure = failureOfNetwork(e, what);
        }
        if (answer !== undefined) return op.ok(answer, retried);
        failure = failure!;
        if (failure.unknown) retried = true;
        const pause = failure.retryAfterMs ?? backoff(attempt);
        const again = failure.notApplied || (failure.unknown && op.retryUnknown);
        if (again && attempt < this.#retries && pause < clock.remaining()) {
          sent = false;
          await clock.sleep(pause).catch(() => {
            throw clock.reason(what, op.write && retried);
          });
          continue;
        }
        throw op.write && retried ? withUnknownOutcome(failure.error) : failure.error;
      }
    } finally {
      clock.dispose();
    }
  }
}

/** The ack codes a claim's answer may report, with the status each has on its own route. */
const STATUS_OF_ACK_ERROR: Record<string, number> = { LEASE_LOST: 409, LEASE_NOT_FOUND: 404, INVALID_ARGUMENT: 400 };

/**
 * One call's deadline and abort: the caller's signal and the timeout abort one controller, whose
 * signal every attempt (and every pause between them) uses.
 */
class Clock {
  readonly #ctl = new AbortController();
  readonly #deadline: number;
  readonly #budget: number;
  readonly #timer: ReturnType<typeof setTimeout>;
  readonly #caller: AbortSignal | undefined;
  #timedOut = false;

  constructor(budgetMs: number, caller: AbortSignal | undefined) {
    this.#budget = budgetMs;
    this.#deadline = Date.now() + budgetMs;
    this.#caller = caller;
    this.#timer = setTimeout(() => {
      this.#timedOut = true;
      this.#ctl.abort();
    }, budgetMs);
    if (caller?.aborted) this.#ctl.abort();
    else caller?.addEventListener("abort", this.#onAbort, { once: true });
  }

  readonly #onAbort = () => this.#ctl.abort();

  get signal(): AbortSignal {
    return this.#ctl.signal;
  }
  get aborted(): boolean {
    return this.#ctl.signal.aborted;
  }
  remaining(): number {
    return this.#deadline - Date.now();
  }
  check(): void {
    if (this.aborted) throw new Error("aborted");
  }

  /** What ends the call: the caller's reason, or a TIMEOUT. */
  reason(what: string, maybeApplied: boolean): unknown {
    if (!this.#timedOut && this.#caller?.aborted) return this.#caller.reason;
    return new QueueHttpError(
      "TIMEOUT",
      `${what}: no answer within ${this.#budget} ms${maybeApplied ? " (it may have been applied)" : ""}`,
      { outcomeUnknown: maybeApplied },
    );
  }

  sleep(ms: number): Promise<void> {
    return sleep(ms, this.#ctl.signal);
  }

  dispose(): void {
    clearTimeout(this.#timer);
    this.#caller?.removeEventListener("abort", this.#onAbort);
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Jittered exponential pause before attempt `attempt + 1` when the server named none. */
const backoff = (attempt: number) =>
  Math.min(BACKOFF.maxMs, BACKOFF.initialMs * 2 ** attempt) * (0.5 + Math.random() / 2);

// ---------------------------------------------------------------------------------------------
// arguments

function baseUrl(url: unknown): string {
  let parsed: URL;
  try {
    parsed = new URL(String(url));
  } catch {
    throw invalidArgument("options.url", `must be an http(s) URL, got ${describe(url)}`);
  }
  if (typeof url !== "string" || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) {
    throw invalidArgument("options.url", `must be an http(s) URL, got ${describe(url)}`);
  }
  if (parsed.search || parsed.hash) throw invalidArgument("options.url", "must not have a query or a fragment");
  return parsed.href.replace(/\/+$/, "");
}

function checkOptions(options: unknown): void {
  if (typeof options !== "object" || options === null) {
    throw invalidArgument("options", `must be an object, got ${describe(options)}`);
  }
}

function intIn(field: string, v: unknown, d: number, min: number, max: number): number {
  if (v === undefined) return d;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    throw invalidArgument(field, `must be an integer from ${min} to ${max}, got ${describe(v)}`);
  }
  return v;
}

function numIn(field: string, v: unknown, d: number, min: number, max: number): number {
  if (v === undefined) return d;
  if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max) {
    throw invalidArgument(field, `must be a number from ${min} to ${max}, got ${describe(v)}`);
  }
  return v;
}

const timeoutOf = (field: string, v: unknown, d: number) => intIn(field, v, d, 1, 3_600_000);

/** Runs a library check, reporting its refusal as the client's error (same code, field and message). */
function library<R>(f: () => R): R {
  try {
    return f();
  } catch (e) {
    if (e instanceof QueueError && !(e instanceof QueueHttpError)) {
      throw new QueueHttpError(e.code, e.message, { field: e.field });
    }
    throw e;
  }
}

/** A path segment: `value()` checks it; encoding refuses what cannot travel (a lone surrogate). */
function segment(field: string, value: () => unknown): string {
  const v = library(value);
  if (typeof v !== "string") throw invalidArgument(field, `must be a string, got ${describe(v)}`);
  if (v === "") throw invalidArgument(field, "must not be empty");
  try {
    return encodeURIComponent(v);
  } catch {
    throw invalidArgument(field, "must be well-formed Unicode (no lone surrogates)");
  }
}

function seqSegment(seq: unknown): string {
  if (typeof seq !== "number" || !Number.isSafeInteger(seq) || seq < 1) {
    throw invalidArgument("seq", `must be a positive integer, got ${describe(seq)}`);
  }
  return String(seq);
}

function leaseIdOf(lease: unknown): string {
  const id = typeof lease === "string" ? lease : (lease as { id?: unknown } | null)?.id;
  if (typeof id !== "string" || id === "") {
    throw invalidArgument("lease_id", `must be a lease or a lease id, got ${describe(lease)}`);
  }
  return id;
}

/** The seq in a lease id (`"<seq>.<token>"`). */
const seqOfLeaseId = (id: string) => Number(id.slice(0, id.indexOf(".")));

/** Idempotency keys travel in a header: visible ASCII, inner spaces allowed, 1 to 512 characters. */
function idempotencyKey(key: unknown): string {
  if (key === undefined) return `tq-client-${randomHex(16)}`;
  if (typeof key !== "string" || !/^[!-~](?:[ -~]{0,510}[!-~])?$/.test(key)) {
    throw invalidArgument(
      "Idempotency-Key",
      `must be 1 to 512 visible ASCII characters (inner spaces allowed; it travels in an HTTP header), got ${describe(key)}`,
    );
  }
  return key;
}

function randomHex(bytes: number): string {
  const b = crypto.getRandomValues(new Uint8Array(bytes));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/** `?a=1&b=x` from the values given (undefined ones left out), strictly encoded. */
function query(params: Record<string, unknown>): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined) continue;
    try {
      parts.push(`${k}=${encodeURIComponent(String(v))}`);
    } catch {
      throw invalidArgument(k, "must be well-formed Unicode (no lone surrogates)");
    }
  }
  return parts.length === 0 ? "" : `?${parts.join("&")}`;
}

// ---------------------------------------------------------------------------------------------
// answers

function json<A>(a: Answer, path: string): A {
  try {
    return JSON.parse(a.text) as A;
  } catch {
    throw new QueueHttpError("INTERNAL", `${path}: the API answered ${a.status} with a body that is not JSON`, {
      status: a.status,
    });
  }
}

function leaseOf<E>(l: T.Lease, workerId: string): Lease<E> {
  return {
    id: l.lease_id,
    seq: l.seq,
    groupId: l.group_id,
    event: l.event as E,
    workerId,
    expiresAt: l.expires_at,
    attempts: l.attempts,
  };
}
