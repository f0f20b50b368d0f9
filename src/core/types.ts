/** The library's public shapes, apart from the transport that produces them. */
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
}
