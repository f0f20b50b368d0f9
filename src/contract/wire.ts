/**
 * The one mapping between the library's shapes (camelCase, src/core/types.ts) and the API's wire
 * shapes (snake_case, src/contract/types.ts), each way side by side: the app answers with `*ToWire`,
 * the client reads answers with `*FromWire`. Type-only imports: no runtime dependency, so the client
 * bundle stays free of valibot and Hono.
 */
import type {
  DeadLetter,
  GroupInfo,
  Lease,
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
import { pushWorkerId } from "../rules.js";
import type * as W from "./types.js";

export function leaseToWire(l: Lease): W.Lease {
  return {
    lease_id: l.id,
    seq: l.seq,
    group_id: l.groupId,
    event: l.event,
    expires_at: l.expiresAt,
    attempts: l.attempts,
    ...(l.traceparent === undefined ? {} : { traceparent: l.traceparent }),
  };
}

/** The wire does not repeat the worker: the caller that claimed knows it. */
export function leaseFromWire<E>(w: W.Lease, workerId: string): Lease<E> {
  return {
    id: w.lease_id,
    seq: w.seq,
    groupId: w.group_id,
    event: w.event as E,
    workerId,
    expiresAt: w.expires_at,
    attempts: w.attempts,
    ...(w.traceparent === undefined ? {} : { traceparent: w.traceparent }),
  };
}

export const extendToWire = (l: Pick<Lease, "id" | "expiresAt">): W.ExtendAnswer => ({
  lease_id: l.id,
  expires_at: l.expiresAt,
});

export const extendFromWire = (w: W.ExtendAnswer): Pick<Lease, "id" | "expiresAt"> => ({
  id: w.lease_id,
  expiresAt: w.expires_at,
});

/** A settlement as the client sends it (its lease as an id; a nack's delay only when it parks). */
export const settlementToWire = (s: { id: string; action: Settlement["action"]; delay: number }): W.Settlement =>
  s.action === "nack" && s.delay > 0
    ? { lease_id: s.id, action: s.action, delay: s.delay }
    : { lease_id: s.id, action: s.action };

export const settlementFromWire = (w: W.Settlement): Settlement =>
  w.action === "nack"
    ? { action: "nack", lease: w.lease_id, ...(w.delay === undefined ? {} : { delay: w.delay }) }
    : { action: w.action, lease: w.lease_id };

export const settleOutcomeToWire = (o: SettleOutcome): W.SettleOutcome => ({
  lease_id: o.leaseId,
  action: o.action,
  ...(o.deadLettered === undefined ? {} : { dead_lettered: o.deadLettered }),
  ...(o.error === undefined ? {} : { error: { code: o.error.code, message: o.error.message } }),
});

/** An outcome as the client reads it; `errorOf` makes the error the client throws for that code. */
export const settleOutcomeFromWire = (
  w: W.SettleOutcome,
  errorOf: (e: { code: string; message: string }) => NonNullable<SettleOutcome["error"]>,
): SettleOutcome => ({
  leaseId: w.lease_id,
  action: w.action,
  ...(w.dead_lettered === undefined ? {} : { deadLettered: w.dead_lettered }),
  ...(w.error === undefined ? {} : { error: errorOf(w.error) }),
});

export function statsToWire(s: QueueStats): W.Stats {
  return {
    ready: s.ready,
    waiting: s.waiting,
    in_flight: s.inFlight,
    parked: s.parked,
    delayed: s.delayed,
    groups: s.groups,
    dead_letters: s.deadLetters,
    now: s.now,
    oldest_age: s.oldestAge,
    lag: s.lag.map((l) => ({ group_id: l.groupId, age: l.age })),
  };
}

export function statsFromWire(w: W.Stats): QueueStats {
  return {
    ready: w.ready,
    waiting: w.waiting,
    inFlight: w.in_flight,
    parked: w.parked,
    delayed: w.delayed,
    groups: w.groups,
    deadLetters: w.dead_letters,
    now: w.now,
    // An API older than these fields answers neither.
    oldestAge: w.oldest_age ?? null,
    lag: (w.lag ?? []).map((l) => ({ groupId: l.group_id, age: l.age })),
  };
}

export const queuedToWire = (m: QueuedMessage): W.QueuedMessage => ({
  seq: m.seq,
  group_id: m.groupId,
  event: m.event,
  state: m.state,
  until: m.until,
  attempts: m.attempts,
  published_at: m.publishedAt,
});

export const queuedFromWire = <E>(w: W.QueuedMessage): QueuedMessage<E> => ({
  seq: w.seq,
  groupId: w.group_id,
  event: w.event as E,
  state: w.state,
  until: w.until,
  attempts: w.attempts,
  publishedAt: w.published_at,
});

export const historyToWire = (h: QueueHistory): W.History => ({
  sample_seconds: h.sampleSeconds,
  samples: h.samples.map((s) => ({
    at: s.at,
    ready: s.ready,
    waiting: s.waiting,
    in_flight: s.inFlight,
    parked: s.parked,
    delayed: s.delayed,
    dead_letters: s.deadLetters,
    oldest_age: s.oldestAge,
    published: s.published,
    acked: s.acked,
  })),
});

export const historyFromWire = (w: W.History): QueueHistory => ({
  sampleSeconds: w.sample_seconds,
  samples: w.samples.map((s) => ({
    at: s.at,
    ready: s.ready,
    waiting: s.waiting,
    inFlight: s.in_flight,
    parked: s.parked,
    delayed: s.delayed,
    deadLetters: s.dead_letters,
    oldestAge: s.oldest_age,
    published: s.published,
    acked: s.acked,
  })),
});

/** The spec's tables store 0.0 for a group never claimed; the wire says null. */
export function groupToWire(g: GroupInfo): W.Group {
  return {
    group_id: g.groupId,
    messages: g.messages,
    priority: g.priority,
    in_flight: g.inFlight,
    parked: g.parked,
    last_claimed_at: g.lastClaimedAt > 0 ? g.lastClaimedAt : null,
  };
}

export function groupFromWire(w: W.Group): GroupInfo {
  return {
    groupId: w.group_id,
    messages: w.messages,
    priority: w.priority,
    inFlight: w.in_flight,
    parked: w.parked,
    lastClaimedAt: w.last_claimed_at ?? 0,
  };
}

export function deadLetterToWire(d: DeadLetter): W.DeadLetter {
  return {
    seq: d.seq,
    group_id: d.groupId,
    event: d.event,
    priority: d.priority,
    attempts: d.attempts,
    reason: d.reason,
    dead_at: d.deadAt,
  };
}

export function deadLetterFromWire<E>(w: W.DeadLetter): DeadLetter<E> {
  return {
    seq: w.seq,
    groupId: w.group_id,
    event: w.event as E,
    priority: w.priority,
    attempts: w.attempts,
    reason: w.reason,
    deadAt: w.dead_at,
  };
}

/** A message of a batch publish; absent optional fields stay absent. */
export function publishInputToWire(m: PublishInput, defaultDelay?: number): W.BatchMessage {
  const out: W.BatchMessage = { group_id: m.groupId, event: m.event };
  if (m.priority !== undefined) out.priority = m.priority;
  const delay = m.delay ?? defaultDelay;
  if (delay !== undefined) out.delay = delay;
  return out;
}

export const publishInputFromWire = (w: W.BatchMessage): PublishInput => ({
  groupId: w.group_id,
  event: w.event,
  priority: w.priority ?? 0,
  delay: w.delay,
});

export function subscriptionToWire(s: Subscription): W.Subscription {
  return {
    name: s.name,
    url: s.url,
    min_priority: s.minPriority,
    max_in_flight: s.maxInFlight,
    visibility: s.visibility,
  };
}

export function subscriptionFromWire(w: W.Subscription): Subscription {
  return {
    name: w.name,
    url: w.url,
    minPriority: w.min_priority,
    maxInFlight: w.max_in_flight,
    visibility: w.visibility,
  };
}

/** A subscription's settings as a PUT sends them; absent optional fields stay absent. */
export function subscriptionInputToWire(s: SubscriptionInput): W.SubscriptionRequest {
  const out: W.SubscriptionRequest = { url: s.url };
  if (s.minPriority !== undefined) out.min_priority = s.minPriority;
  if (s.maxInFlight !== undefined) out.max_in_flight = s.maxInFlight;
  if (s.visibility !== undefined) out.visibility = s.visibility;
  if (s.signingSecret !== undefined) out.signing_secret = s.signingSecret;
  return out;
}

export const subscriptionInputFromWire = (w: W.SubscriptionRequest): SubscriptionInput => ({
  url: w.url,
  minPriority: w.min_priority,
  maxInFlight: w.max_in_flight,
  visibility: w.visibility,
  signingSecret: w.signing_secret,
});

/** The default queue has no creation time (null on the wire, 0 in the library). */
export const queueToWire = (q: QueueDescription): W.Queue => ({
  name: q.name,
  shards: q.shards,
  location_hint: q.locationHint ?? null,
  created_at: q.createdAt > 0 ? q.createdAt : null,
});

export const queueFromWire = (w: W.Queue): QueueDescription => ({
  name: w.name,
  shards: w.shards,
  locationHint: w.location_hint ?? undefined,
  createdAt: w.created_at ?? 0,
});

/** What a push subscription's consumer receives: the lease, and which subscription it came through. */
export const pushDeliveryToWire = (l: Lease, subscription: string): W.PushDelivery => ({
  ...leaseToWire(l),
  subscription,
});

/** A delivery's lease, to ack, nack or extend through the client (the subscription is its worker). */
export const pushDeliveryFromWire = <E>(w: W.PushDelivery): Lease<E> =>
  leaseFromWire<E>(w, pushWorkerId(w.subscription));
