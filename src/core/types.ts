/** The library's public shapes, apart from the transport that produces them. */

import type { Scope } from "../rules.js";
import type { QueueError } from "./errors.js";

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
  /** The W3C trace context the message was published in, when it was traced: its processing's parent. */
  traceparent?: string;
}

export interface PublishInput {
  groupId: string;
  event: unknown;
  priority?: number;
  /** Seconds (0 to 366 days) before the message may be delivered; it keeps its place in its group. */
  delay?: number;
}

export interface PublishOptions {
  /** Retrying a publish with the same key returns the first answer instead of enqueuing again. */
  idempotencyKey?: string;
  /**
   * The W3C trace context to store with the message (its consumer's span becomes a child of it);
   * default: the publish's own span, when an OpenTelemetry SDK is registered.
   */
  traceparent?: string;
  /** Seconds (0 to 366 days) before the message may be delivered; it keeps its place in its group. */
  delay?: number;
  /**
   * One message alone: store nothing while a message with this key waits unclaimed in the queue
   * (answer its seq instead); once that one is claimed, the next publish with the key is stored.
   */
  singletonKey?: string;
  /** With `singletonKey`: replace the waiting message's event with this one. */
  replace?: boolean;
}

/** What a publish did (`publishSingleton`). */
export interface PublishResult {
  seq: number;
  /** A message with its singleton key was waiting: nothing new was stored, `seq` is that message's. */
  deduplicated: boolean;
  /** …and its event was replaced by this publish's. */
  replaced: boolean;
}

/** One lease of a `settle()`: acked, nacked (parked for `delay` seconds when > 0), or released. */
export type Settlement =
  | { action: "ack"; lease: Lease | string }
  | { action: "nack"; lease: Lease | string; delay?: number }
  | { action: "release"; lease: Lease | string };

/** What became of one lease of a `settle()`, in the order they were given. */
export interface SettleOutcome {
  leaseId: string;
  action: Settlement["action"];
  /** A nack whose message had used its attempts and moved to the dead letters. */
  deadLettered?: boolean;
  /**
   * Why it was not applied, as the lease's own call would have failed: LEASE_LOST, LEASE_NOT_FOUND,
   * or the database's UNAVAILABLE, TIMEOUT, ... Absent when it was.
   */
  error?: QueueError<string>;
}

export interface NackResult {
  /** True when the message had used its attempts and moved to the dead letters. */
  deadLettered: boolean;
}

/**
 * Where every message is. `ready + waiting + inFlight + parked + delayed` is the number of messages.
 * Counted from the groups and the live leases, so a call costs the same at any depth.
 */
export interface QueueStats {
  /** Deliverable now: the first message of each group with nothing in flight (lapsed leases count). */
  ready: number;
  /** Queued behind an earlier message, a live lease or a park in their group. */
  waiting: number;
  /** Live leases. */
  inFlight: number;
  /** Live parks (nacked with a delay). */
  parked: number;
  /** Published with a delay that has not passed yet. */
  delayed: number;
  /** Groups with messages. */
  groups: number;
  deadLetters: number;
  /** The queue is paused (a sharded queue: every shard is). */
  paused: boolean;
  /** Groups paused by their own setting. */
  pausedGroups: number;
  /** Groups waiting for their rate right now. */
  rateLimitedGroups: number;
  /** The database's clock, epoch seconds. */
  now: number;
  /**
   * Seconds the oldest message has waited: since its publish, or, for a delayed one, since it came
   * due (one not due yet waits for nothing). Null when no message has a known age (an empty queue,
   * or only rows the spec's Python transports wrote). Read from the oldest 20 messages.
   */
  oldestAge: number | null;
  /** The groups most behind (at most 5), each with its oldest message's age, the most behind first. */
  lag: Array<{ groupId: string; age: number }>;
  /**
   * A sharded queue's shards that could not be reached (the counts are the other shards'), with the
   * code they failed with; absent when every shard answered.
   */
  unreachableShards?: UnreachableShard[];
}

/** A shard of a sharded queue that did not answer, and the error code it failed with (`UNAVAILABLE`, ...). */
export interface UnreachableShard {
  shard: number;
  code: string;
}

/**
 * What claims and settles leases: what consume() needs of a queue (`ConsumerQueue`), and a sharded
 * queue of each of its shards (`Shard`). LibsqlTransport, ShardedQueue and the HTTP client have it.
 */
export interface LeaseQueue {
  /**
   * Up to `n` leases. `options` is passed only to a queue that declares `maxClaimWait`: such a claim
   * may wait up to `wait` seconds for a message to arrive (long poll), and should end early (with
   * no leases, or an error) when `signal` aborts.
   */
  claimMany<E = unknown>(
    workerId: string,
    visibility: number,
    n: number,
    minPriority?: number,
    options?: { wait?: number; signal?: AbortSignal },
  ): Promise<Lease<E>[]>;
  ack(lease: Lease | string): Promise<unknown>;
  /** May answer `{ deadLettered: true }` when the message used its last attempt. */
  nack(lease: Lease | string, delay?: number): Promise<unknown>;
  /** Gives back a lease no handler will run, without spending the message's attempt. */
  release(lease: Lease | string): Promise<unknown>;
  /** Acks, nacks and releases many leases in one call, each with its own outcome. */
  settle?(settlements: Settlement[]): Promise<SettleOutcome[]>;
  /** Heartbeat: the lease with its new expiry. */
  extend<E>(lease: Lease<E>, visibility: number): Promise<Lease<E>>;
  /** Longest wait (seconds) its claimMany accepts; set where claims may wait for a message. */
  readonly maxClaimWait?: number | undefined;
}

/**
 * The queue's state at one moment, for charts: its counts (as in QueueStats) and the writer's running
 * totals of messages published and acked (their difference between two samples is a rate).
 */
export interface QueueHistory {
  /** Seconds between two samples (QUEUE_SAMPLE_SECONDS): at most one per that long. */
  sampleSeconds: number;
  /** Oldest first. */
  samples: QueueSample[];
}

export interface QueueSample {
  /** Epoch seconds, on the database's clock. */
  at: number;
  ready: number;
  waiting: number;
  inFlight: number;
  parked: number;
  delayed: number;
  deadLetters: number;
  oldestAge: number | null;
  published: number;
  acked: number;
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

/** A group as `groups()` lists it. */
export interface GroupInfo {
  groupId: string;
  /** Its messages, counted up to `GROUP_COUNT_CAP` (a count that reaches it means "at least"). */
  messages: number;
  priority: number;
  /** Its first message is leased (live). */
  inFlight: boolean;
  /** Its first message is parked (nacked with a delay) or delayed, and not due yet. */
  parked: boolean;
  /** The database clock's epoch seconds of its last claim; 0 when never claimed. */
  lastClaimedAt: number;
}

/** A message as a peek sees it, left where it is. */
export interface QueuedMessage<E = unknown> {
  seq: number;
  groupId: string;
  event: E;
  /**
   * `in_flight`: leased; `parked`: nacked with a delay; `delayed`: published with one (each until
   * `until`); `queued`: waiting for its turn, or deliverable when first in its group.
   */
  state: "queued" | "in_flight" | "parked" | "delayed";
  /** When its lease, park or delay ends (epoch seconds, database clock); null when queued. */
  until: number | null;
  /** Deliveries it got so far. */
  attempts: number;
  /** When it was published (epoch seconds); null for rows the spec's Python transports wrote. */
  publishedAt: number | null;
}

/** A push subscription: the queue POSTs each deliverable message to `url` (docs/http.md, "Push"). */
export interface Subscription {
  name: string;
  url: string;
  /** Skips groups whose priority is below this. */
  minPriority: number;
  /** Deliveries awaiting the consumer's answer at once, and leases it holds after a 202. */
  maxInFlight: number;
  /** Seconds a delivery's lease lasts: the consumer answers (or, after a 202, settles) within it. */
  visibility: number;
}

/** A named queue (the API's `/v1/queues`). */
export interface QueueDescription {
  name: string;
  /** The databases it spreads over. */
  shards: number;
  /** Where its writers are asked to run (a Durable Object location hint), if anywhere. */
  locationHint: string | undefined;
  /** When it was made (epoch seconds); 0 for the default queue. */
  createdAt: number;
}

/** A subscription's settings as given: defaults fill what is absent. */
export interface SubscriptionInput {
  /** Where deliveries are posted: an http(s) URL without credentials. */
  url: string;
  /** 0-4, default 0. */
  minPriority?: number | undefined;
  /** 1-100, default 10. */
  maxInFlight?: number | undefined;
  /** Seconds, default 30. */
  visibility?: number | undefined;
  /** The signing secret to use (16-256 visible ASCII); absent: drawn at creation, kept on update. */
  signingSecret?: string | undefined;
  /**
   * Rotates the signing secret: "start" draws a next one (kept until finished), and deliveries are
   * signed with both; "finish" makes the next one the secret.
   */
  rotateSecret?: "start" | "finish" | undefined;
  /** Sets the next secret (16-256 visible ASCII) instead of drawing one; null ends a rotation. */
  nextSigningSecret?: string | null | undefined;
}

/** A key made through the API, as listed: its secret is never kept (only a hash of it). */
export interface ApiKey {
  /** 16 hex digits: the part after `tq_` of the key; not a secret. */
  id: string;
  name: string;
  scopes: Scope[];
  /** Queue names and `prefix*` patterns it may touch; undefined: every queue. */
  queues: string[] | undefined;
  /** Epoch seconds. */
  createdAt: number;
  /** The key that made it: `root`, a key's id, or `jwt:<sub>`. */
  createdBy: string;
  /** Epoch seconds; undefined: until revoked. */
  expiresAt: number | undefined;
  /** Epoch seconds (to within a minute); undefined: never used. */
  lastUsedAt: number | undefined;
}

/** Who a key or token is, and what it may do (the API's `GET /v1/whoami`). */
export interface KeyGrant {
  /** `root`, `root:next`, a key's id, or `jwt:<sub>`. */
  id: string;
  kind: "root" | "key" | "jwt";
  scopes: Scope[];
  /** Undefined: every queue. */
  queues: string[] | undefined;
  /** Epoch seconds; undefined: never. */
  expiresAt: number | undefined;
}

/** One `manage` action, as the audit records it. */
export interface AuditEntry {
  /** Grows with each entry. */
  id: number;
  /** Epoch seconds, the database's clock. */
  at: number;
  /** Who did it: `root`, `root:next`, a key's id, or `jwt:<sub>`. */
  keyId: string;
  /** The API operation: `purge`, `createKey`, `deleteQueue`, ... */
  action: string;
  queue: string | undefined;
  detail: Record<string, unknown> | undefined;
}

/**
 * A group's rate: at most `limit` claims per `period` seconds, started `period / limit` apart, of
 * which `burst` (default 1) may start back to back after a quiet spell: a token bucket of `burst`
 * tokens, one refilled every `period / limit` seconds. Messages over it wait; none is dropped.
 */
export interface RateLimit {
  limit: number;
  period: number;
  burst?: number;
}

/** A queue's flow settings: what applies to each of its groups unless the group has its own. */
export interface QueueFlow {
  /** Leases a group may hold at once (1: one message in flight per group). */
  groupConcurrency: number;
  /** Each group's rate; null: none. */
  groupRate: RateLimit | null;
  /** Nothing is delivered (claims, long polls, pushes); publishes are still accepted. */
  paused: boolean;
}

/** What applies to one group: its own settings, and the queue's where it has none. */
export interface GroupFlow {
  groupId: string;
  /** Its own settings (absent: the queue's apply); `rate: null` is "no rate", whatever the queue's. */
  own: { concurrency?: number; rate?: RateLimit | null; paused?: boolean };
  concurrency: number;
  rate: RateLimit | null;
  /** Its own pause. */
  paused: boolean;
  /** The queue's pause (which holds every group). */
  queuePaused: boolean;
  /** When its rate lets its next claim go, while it holds it back (epoch seconds, database clock); else null. */
  rateLimitedUntil: number | null;
}

/** A group's settings as given: what is absent stays as it was. */
export interface GroupFlowInput {
  concurrency?: number;
  /** null: no rate for this group, whatever the queue's. */
  rate?: RateLimit | null;
  paused?: boolean;
}

/** A queue's flow settings as given: what is absent stays as it was. */
export interface QueueFlowInput {
  groupConcurrency?: number;
  /** null: no rate. */
  groupRate?: RateLimit | null;
  paused?: boolean;
}

/** A schedule as given (`putSchedule`): a cron expression or an interval, not both. */
export interface ScheduleInput {
  groupId: string;
  event: unknown;
  priority?: number;
  /** Five fields (minute hour day-of-month month day-of-week), in UTC unless `timeZone` says otherwise. */
  cron?: string;
  /** An IANA time zone for `cron` (`Europe/Paris`). */
  timeZone?: string;
  /** Seconds between ticks (at least 1), counted from the epoch: `60` ticks on every whole minute. */
  every?: number;
  /** A paused schedule publishes nothing; resumed, it goes on from its next tick. */
  paused?: boolean;
}

/** A schedule, with its next tick. */
export interface Schedule {
  name: string;
  groupId: string;
  event: unknown;
  priority: number;
  cron: string | null;
  timeZone: string | null;
  every: number | null;
  paused: boolean;
  /** Its next tick (epoch seconds), or null while paused. */
  nextAt: number | null;
  /** Its last tick published, or null. */
  lastAt: number | null;
  /** Ticks it published. */
  runs: number;
}
