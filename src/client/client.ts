/**
 * `createClient()`: a typed client for the Worker's HTTP API, for publishers in serverless functions
 * (Vercel, Lambda, Workers, Deno, browsers) and for consumers anywhere: it is a `ConsumerQueue`, so
 * `consume(client, handler, ...)` runs over HTTP.
 *
 * Its methods are the library's (`LibsqlTransport`'s): the same arguments, the same answers
 * (camelCase `Lease`, `QueueStats`, ...), so code moves between the two unchanged. Each delegates
 * to a resource (./resources/*) over one request engine (./engine.ts: deadlines, retries,
 * Retry-After); the wire shapes are mapped in one place, src/contract/wire.ts.
 *
 * Every failure is a `QueueHttpError` (a `QueueError`) with the API's `code`, the HTTP `status` and
 * the `field` at fault; what cannot travel is refused before anything is sent.
 */
import type { Span } from "@opentelemetry/api";
import { nodeFetch } from "../core/node-fetch.js";
import { consumed, traced, traceparentOf } from "../core/telemetry.js";
import type {
  DeadLetter,
  GroupInfo,
  Lease,
  NackResult,
  PublishInput,
  QueueDescription,
  QueuedMessage,
  QueueHistory,
  QueueStats,
  Settlement,
  SettleOutcome,
  Subscription,
  SubscriptionInput,
} from "../core/types.js";
import { DEFAULT_QUEUE, describe, leaseId, MAX_CLAIM_WAIT, waitProblem } from "../rules.js";
import { PendingAcks } from "./acks.js";
import { baseUrl, intOption, timeoutOf } from "./args.js";
import { Engine } from "./engine.js";
import { ServerFeatures } from "./features.js";
import { invalidArgument } from "./http-errors.js";
import type {
  CallOptions,
  ClaimOptions,
  ClientOptions,
  DeadLetterOptions,
  FetchLike,
  PublishCallOptions,
} from "./options.js";
import { Claims } from "./resources/claims.js";
import { DeadLetters } from "./resources/dead-letters.js";
import { Inspect } from "./resources/inspect.js";
import { Leases } from "./resources/leases.js";
import { Messages } from "./resources/messages.js";
import { type ListedQueue, Queues, type QueueWithStats, queueSegment } from "./resources/queues.js";
import { Subscriptions } from "./resources/subscriptions.js";

const DEFAULTS = { timeoutMs: 30_000, retries: 4, maxClaimWait: MAX_CLAIM_WAIT };

/** A client for the queue's HTTP API. */
export function createClient(options: ClientOptions): QueueClient {
  return new QueueClient(options);
}

export class QueueClient {
  readonly #maxClaimWait: number;
  readonly #messages: Messages;
  readonly #claims: Claims;
  readonly #leases: Leases;
  readonly #inspect: Inspect;
  readonly #deadLetters: DeadLetters;
  readonly #subscriptions: Subscriptions;
  readonly #queues: Queues;
  readonly #options: ClientOptions;

  constructor(options: ClientOptions) {
    if (typeof options !== "object" || options === null) {
      throw invalidArgument("options", `must be an object, got ${describe(options)}`);
    }
    const base = baseUrl(options.url);
    if (typeof options.token !== "string" || !/^[!-~]+$/.test(options.token)) {
      throw invalidArgument("options.token", "must be a non-empty string of visible ASCII characters (a bearer token)");
    }
    if (options.fetch !== undefined && typeof options.fetch !== "function") {
      throw invalidArgument("options.fetch", `must be a function, got ${describe(options.fetch)}`);
    }
    const platform = (url: string, init: Parameters<FetchLike>[1]) => globalThis.fetch(url, init);
    const engine = new Engine({
      base,
      auth: `Bearer ${options.token}`,
      fetch: options.fetch ?? (nodeFetch() as FetchLike | undefined) ?? platform,
      timeoutMs: timeoutOf("options.timeoutMs", options.timeoutMs, DEFAULTS.timeoutMs),
      retries: intOption("options.retries", options.retries, DEFAULTS.retries, 0, 100),
      queue: options.queue === undefined || options.queue === DEFAULT_QUEUE ? undefined : queueSegment(options.queue),
    });
    if (options.autoIdempotencyKeys !== undefined && typeof options.autoIdempotencyKeys !== "boolean") {
      throw invalidArgument(
        "options.autoIdempotencyKeys",
        `must be a boolean, got ${describe(options.autoIdempotencyKeys)}`,
      );
    }
    this.#options = options;
    const wait = options.maxClaimWait;
    const waitRefused = wait === undefined ? undefined : waitProblem(wait);
    if (waitRefused !== undefined) throw invalidArgument("options.maxClaimWait", waitRefused);
    this.#maxClaimWait = wait ?? DEFAULTS.maxClaimWait;

    const features = new ServerFeatures();
    // Acks no claim carries go in one settle request: through #leases, made below.
    const acks = new PendingAcks(engine, features, (ids, mayHaveApplied) =>
      this.#leases.settle(
        ids.map((lease) => ({ action: "ack", lease })),
        {},
        mayHaveApplied,
      ),
    );
    this.#messages = new Messages(engine, options.autoIdempotencyKeys ?? true);
    this.#claims = new Claims(engine, features, acks);
    this.#inspect = new Inspect(engine);
    this.#deadLetters = new DeadLetters(engine);
    this.#leases = new Leases(engine, features, acks, this.#inspect, this.#deadLetters);
    this.#subscriptions = new Subscriptions(engine);
    this.#queues = new Queues(engine);
  }

  /** A client of the named queue `name`, with this client's options (`default`: the default queue). */
  queue(name: string): QueueClient {
    queueSegment(name);
    return new QueueClient({ ...this.#options, queue: name });
  }

  /** consume() long-polls a queue that declares this (seconds); undefined when `maxClaimWait` is 0. */
  get maxClaimWait(): number | undefined {
    return this.#maxClaimWait > 0 ? this.#maxClaimWait : undefined;
  }

  // publish

  /** The queue this client serves, in traces and metrics (`messaging.destination.name`). */
  get name(): string {
    return this.#options.queue ?? DEFAULT_QUEUE;
  }

  /** Appends `event` to `groupId`; returns its seq. The first publish of a group sets its priority. */
  publish(groupId: string, event: unknown, priority?: number, options: PublishCallOptions = {}): Promise<number> {
    return traced("send", { name: "publish", destination: this.name }, (span) =>
      this.#messages.publish(groupId, event, priority, withTrace(options, span)).then((seq) => {
        span.setAttribute("messaging.message.id", String(seq));
        return seq;
      }),
    );
  }

  /** Publishes all of `messages` in one request, all or nothing; returns their seqs in order. */
  publishMany(messages: PublishInput[], options: PublishCallOptions = {}): Promise<number[]> {
    const count = Array.isArray(messages) ? messages.length : undefined;
    return traced("send", { name: "publishMany", destination: this.name, count }, (span) =>
      this.#messages.publishMany(messages, withTrace(options, span)),
    );
  }

  // claim

  /** The next message's lease, or null when nothing is deliverable (after `wait` seconds, if given). */
  claim<E = unknown>(
    workerId: string,
    visibility: number,
    minPriority?: number,
    options: ClaimOptions = {},
  ): Promise<Lease<E> | null> {
    return this.#received("claim", () =>
      this.#claims.claim<E>(workerId, visibility, minPriority, options).then((l) => (l ? [l] : [])),
    ).then(([lease]) => lease ?? null);
  }

  /**
   * Up to `n` (1-100) leases in distinct groups. With `wait` > 0 the API answers as soon as it can
   * lease, or with none when the wait is over.
   */
  claimMany<E = unknown>(
    workerId: string,
    visibility: number,
    n: number,
    minPriority?: number,
    options: ClaimOptions = {},
  ): Promise<Lease<E>[]> {
    return this.#received("claimMany", () => this.#claims.claimMany<E>(workerId, visibility, n, minPriority, options));
  }

  /** A claim in its `receive` span; what it got counts as consumed. */
  #received<L>(name: string, claim: () => Promise<L[]>): Promise<L[]> {
    return traced("receive", { name, destination: this.name }, async (span) => {
      const leases = await claim();
      span.setAttribute("messaging.batch.message_count", leases.length);
      consumed(this.name, leases.length, name);
      return leases;
    });
  }

  /** A settlement in its `settle` span. */
  #settle<T>(name: string, lease: Lease | string, settle: () => Promise<T>): Promise<T> {
    const id = typeof lease === "string" ? lease : (lease as Lease | null)?.id;
    const seq = leaseId.parse(id)?.seq;
    const attributes = seq === undefined ? undefined : { "messaging.message.id": String(seq) };
    return traced("settle", { name, destination: this.name, ...(attributes ? { attributes } : {}) }, settle);
  }

  // ack / nack / release / extend

  /**
   * Deletes the message of a lease that is still yours. Without per-call options, an ack issued in
   * the same tick as a claim travels in that claim's request.
   */
  ack(lease: Lease | string, options?: CallOptions): Promise<void> {
    return this.#settle("ack", lease, () => this.#leases.ack(lease, options));
  }

  /**
   * Gives a lease back: `delay` 0 frees it now; > 0 parks it (and blocks its group) that long.
   * `deadLettered` when it had used its last attempt.
   */
  nack(lease: Lease | string, delay?: number, options: CallOptions = {}): Promise<NackResult> {
    return this.#settle("nack", lease, () => this.#leases.nack(lease, delay, options));
  }

  /**
   * Gives a lease back unhandled: the message is claimable again at once, and this delivery does not
   * count among its attempts. For a consumer that is stopping, or took more than it will handle.
   */
  release(lease: Lease | string, options: CallOptions = {}): Promise<void> {
    return this.#settle("release", lease, () => this.#leases.release(lease, options));
  }

  /**
   * Acks, nacks and releases many leases (up to MAX_SETTLE_BATCH) in one request: each fenced as on
   * its own, each with its own outcome, in the order given. A list with an entry that is not valid
   * is refused whole, before anything is sent.
   */
  settle(settlements: Settlement[], options: CallOptions = {}): Promise<SettleOutcome[]> {
    const count = Array.isArray(settlements) ? settlements.length : undefined;
    return traced("settle", { name: "settle", destination: this.name, count }, () =>
      this.#leases.settle(settlements, options),
    );
  }

  /** Heartbeat: the lease now expires `visibility` seconds from now (the database's clock). */
  extend<E>(lease: Lease<E>, visibility: number, options?: CallOptions): Promise<Lease<E>>;
  extend(leaseId: string, visibility: number, options?: CallOptions): Promise<{ id: string; expiresAt: number }>;
  extend<E>(
    lease: Lease<E> | string,
    visibility: number,
    options: CallOptions = {},
  ): Promise<Lease<E> | { id: string; expiresAt: number }> {
    return this.#leases.extend(lease, visibility, options);
  }

  // inspect, dead letters

  /** Counts of ready, waiting, in-flight, parked and delayed messages, groups and dead letters. */
  stats(options: CallOptions = {}): Promise<QueueStats> {
    return this.#inspect.stats(options);
  }

  /** Groups worth watching, as the library's `groups()` lists them; `limit` 1-100 (default 20). */
  groups(options: { limit?: number } & CallOptions = {}): Promise<GroupInfo[]> {
    return this.#inspect.groups(options);
  }

  /** The queue's samples over the last hour (counts, and running totals published and acked), oldest first. */
  history(options: CallOptions = {}): Promise<QueueHistory> {
    return this.#inspect.history(options);
  }

  /** The group's next messages in delivery order, left where they are; `limit` 1-100 (default 10). */
  peek<E = unknown>(groupId: string, options: { limit?: number } & CallOptions = {}): Promise<QueuedMessage<E>[]> {
    return this.#inspect.peek<E>(groupId, options);
  }

  /** Deletes the group's messages, the one in flight included; answers how many. */
  purge(groupId: string, options: CallOptions = {}): Promise<number> {
    return this.#inspect.purge(groupId, options);
  }

  /** A page of dead letters in seq order: pass the last one's seq as `afterSeq` for the next. */
  deadLetters<E = unknown>(options: DeadLetterOptions = {}): Promise<DeadLetter<E>[]> {
    return this.#deadLetters.list<E>(options);
  }

  /**
   * Puts a dead letter back at the tail of its group; returns its new seq. Not sent again once an
   * attempt may have applied; a missing one fails with DEAD_LETTER_NOT_FOUND.
   */
  redrive(seq: number, options: CallOptions = {}): Promise<number> {
    return this.#deadLetters.redrive(seq, options);
  }

  /** Drops a dead letter; false when there was none (true when an earlier attempt whose answer was lost may have). */
  deleteDeadLetter(seq: number, options: CallOptions = {}): Promise<boolean> {
    return this.#deadLetters.delete(seq, options);
  }

  // push subscriptions

  /** Creates or updates a push subscription; answers it with its `signingSecret` (kept on update). */
  subscribe(name: string, options: SubscriptionInput & CallOptions): Promise<Subscription & { signingSecret: string }> {
    return this.#subscriptions.subscribe(name, options);
  }

  subscriptions(options: CallOptions = {}): Promise<Subscription[]> {
    return this.#subscriptions.list(options);
  }

  /** Deletes a subscription (no delivery starts after it); false when there was none. */
  unsubscribe(name: string, options: CallOptions = {}): Promise<boolean> {
    return this.#subscriptions.unsubscribe(name, options);
  }

  // named queues (everyone's, whatever queue this client serves)

  /** Every queue, the default one first, each with its counts. */
  queues(options: CallOptions = {}): Promise<ListedQueue[]> {
    return this.#queues.list(options);
  }

  /** One queue with its counts; QUEUE_NOT_FOUND when there is none. */
  getQueue(name: string, options: CallOptions = {}): Promise<QueueWithStats> {
    return this.#queues.get(name, options);
  }

  /**
   * Makes a queue (its databases, one per shard); answers it as it is when it exists (`created:
   * false`). Its shard count cannot change afterwards.
   */
  createQueue(
    name: string,
    options: { shards?: number; locationHint?: string } & CallOptions = {},
  ): Promise<QueueDescription & { created: boolean }> {
    return this.#queues.create(name, options);
  }

  /** Deletes a queue and its databases; refused (QUEUE_NOT_EMPTY) while it holds messages unless `force`. False when there was none. */
  deleteQueue(name: string, options: { force?: boolean } & CallOptions = {}): Promise<boolean> {
    return this.#queues.delete(name, options);
  }
}

/** The options, carrying the publish span's trace context unless the caller gave one. */
function withTrace(options: PublishCallOptions, span: Span): PublishCallOptions {
  if (typeof options !== "object" || options === null || options.traceparent !== undefined) return options;
  const traceparent = traceparentOf(span);
  return traceparent === undefined ? options : { ...options, traceparent };
}
