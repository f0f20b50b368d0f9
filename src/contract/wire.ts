/**
 * The one mapping between the library's shapes (camelCase, src/core/types.ts) and the API's wire
 * shapes (snake_case, src/contract/types.ts), each way side by side: the app answers with `*ToWire`,
 * the client reads answers with `*FromWire`. Type-only imports: no runtime dependency, so the client
 * bundle stays free of valibot and Hono.
 */
import type {
  ApiKey,
  AuditEntry,
  DeadLetter,
  GroupFlow,
  GroupFlowInput,
  GroupInfo,
  KeyGrant,
  Lease,
  PublishInput,
  QueueDescription,
  QueuedMessage,
  QueueFlow,
  QueueFlowInput,
  QueueHistory,
  QueueStats,
  RateLimit,
  Schedule,
  ScheduleInput,
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
    paused: s.paused,
    paused_groups: s.pausedGroups,
    rate_limited_groups: s.rateLimitedGroups,
    now: s.now,
    oldest_age: s.oldestAge,
    lag: s.lag.map((l) => ({ group_id: l.groupId, age: l.age })),
    ...(s.unreachableShards === undefined ? {} : { unreachable_shards: s.unreachableShards }),
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
    paused: w.paused ?? false,
    pausedGroups: w.paused_groups ?? 0,
    rateLimitedGroups: w.rate_limited_groups ?? 0,
    now: w.now,
    // An API older than these fields answers neither.
    oldestAge: w.oldest_age ?? null,
    lag: (w.lag ?? []).map((l) => ({ groupId: l.group_id, age: l.age })),
    ...(w.unreachable_shards === undefined ? {} : { unreachableShards: w.unreachable_shards }),
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
  if (s.rotateSecret !== undefined) out.rotate_secret = s.rotateSecret;
  if (s.nextSigningSecret !== undefined) out.next_signing_secret = s.nextSigningSecret;
  return out;
}

export const subscriptionInputFromWire = (w: W.SubscriptionRequest): SubscriptionInput => ({
  url: w.url,
  minPriority: w.min_priority,
  maxInFlight: w.max_in_flight,
  visibility: w.visibility,
  signingSecret: w.signing_secret,
  rotateSecret: w.rotate_secret,
  nextSigningSecret: w.next_signing_secret,
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

export const keyToWire = (k: ApiKey): W.Key => ({
  id: k.id,
  name: k.name,
  scopes: k.scopes,
  queues: k.queues ?? null,
  created_at: k.createdAt,
  created_by: k.createdBy,
  expires_at: k.expiresAt ?? null,
  last_used_at: k.lastUsedAt ?? null,
});

export const keyFromWire = (w: W.Key): ApiKey => ({
  id: w.id,
  name: w.name,
  scopes: w.scopes,
  queues: w.queues ?? undefined,
  createdAt: w.created_at,
  createdBy: w.created_by,
  expiresAt: w.expires_at ?? undefined,
  lastUsedAt: w.last_used_at ?? undefined,
});

export const grantToWire = (g: KeyGrant): W.WhoAmI => ({
  id: g.id,
  kind: g.kind,
  scopes: g.scopes,
  queues: g.queues ?? null,
  expires_at: g.expiresAt ?? null,
});

export const grantFromWire = (w: W.WhoAmI): KeyGrant => ({
  id: w.id,
  kind: w.kind,
  scopes: w.scopes,
  queues: w.queues ?? undefined,
  expiresAt: w.expires_at ?? undefined,
});

export const auditEntryToWire = (e: AuditEntry): W.AuditEntry => ({
  id: e.id,
  at: e.at,
  key_id: e.keyId,
  action: e.action,
  queue: e.queue ?? null,
  detail: e.detail ?? null,
});

export const auditEntryFromWire = (w: W.AuditEntry): AuditEntry => ({
  id: w.id,
  at: w.at,
  keyId: w.key_id,
  action: w.action,
  queue: w.queue ?? undefined,
  detail: w.detail ?? undefined,
});

const rateToWire = (r: RateLimit | null): W.RateAnswer | null =>
  r === null ? null : { limit: r.limit, period: r.period, burst: r.burst ?? 1 };

/** A rate as a request sends it (burst only where given). */
export const rateInputToWire = (r: RateLimit | null) =>
  r === null ? null : { limit: r.limit, period: r.period, ...(r.burst === undefined ? {} : { burst: r.burst }) };

export const queueSettingsToWire = (q: QueueFlow): W.QueueSettings => ({
  group_concurrency: q.groupConcurrency,
  group_rate: rateToWire(q.groupRate),
  paused: q.paused,
});

export const queueSettingsFromWire = (w: W.QueueSettings): QueueFlow => ({
  groupConcurrency: w.group_concurrency,
  groupRate: w.group_rate,
  paused: w.paused,
});

/** A queue's flow settings as a PUT sends them; absent fields stay absent. */
export function queueFlowInputToWire(
  q: QueueFlowInput,
): Pick<W.QueueRequest, "group_concurrency" | "group_rate" | "paused"> {
  return {
    ...(q.groupConcurrency === undefined ? {} : { group_concurrency: q.groupConcurrency }),
    ...(q.groupRate === undefined ? {} : { group_rate: rateInputToWire(q.groupRate) }),
    ...(q.paused === undefined ? {} : { paused: q.paused }),
  };
}

export const queueFlowInputFromWire = (w: W.QueueRequest): QueueFlowInput => ({
  ...(w.group_concurrency === undefined ? {} : { groupConcurrency: w.group_concurrency }),
  ...(w.group_rate === undefined ? {} : { groupRate: w.group_rate }),
  ...(w.paused === undefined ? {} : { paused: w.paused }),
});

export const groupFlowToWire = (g: GroupFlow): W.GroupSettingsAnswer => ({
  group_id: g.groupId,
  own: {
    ...(g.own.concurrency === undefined ? {} : { concurrency: g.own.concurrency }),
    ...(g.own.rate === undefined ? {} : { rate: rateToWire(g.own.rate) }),
    ...(g.own.paused === undefined ? {} : { paused: g.own.paused }),
  },
  concurrency: g.concurrency,
  rate: rateToWire(g.rate),
  paused: g.paused,
  queue_paused: g.queuePaused,
  rate_limited_until: g.rateLimitedUntil,
});

export const groupFlowFromWire = (w: W.GroupSettingsAnswer): GroupFlow => ({
  groupId: w.group_id,
  own: {
    ...(w.own.concurrency === undefined ? {} : { concurrency: w.own.concurrency }),
    ...(w.own.rate === undefined ? {} : { rate: w.own.rate }),
    ...(w.own.paused === undefined ? {} : { paused: w.own.paused }),
  },
  concurrency: w.concurrency,
  rate: w.rate,
  paused: w.paused,
  queuePaused: w.queue_paused,
  rateLimitedUntil: w.rate_limited_until,
});

export const groupFlowInputToWire = (g: GroupFlowInput): W.GroupSettingsRequest => ({
  ...(g.concurrency === undefined ? {} : { concurrency: g.concurrency }),
  ...(g.rate === undefined ? {} : { rate: rateInputToWire(g.rate) }),
  ...(g.paused === undefined ? {} : { paused: g.paused }),
});

export const groupFlowInputFromWire = (w: W.GroupSettingsRequest): GroupFlowInput => ({
  ...(w.concurrency === undefined ? {} : { concurrency: w.concurrency }),
  ...(w.rate === undefined ? {} : { rate: w.rate }),
  ...(w.paused === undefined ? {} : { paused: w.paused }),
});

export const scheduleToWire = (s: Schedule): W.Schedule => ({
  name: s.name,
  group_id: s.groupId,
  event: s.event,
  priority: s.priority,
  cron: s.cron,
  time_zone: s.timeZone,
  every: s.every,
  paused: s.paused,
  next_at: s.nextAt,
  last_at: s.lastAt,
  runs: s.runs,
});

export const scheduleFromWire = (w: W.Schedule): Schedule => ({
  name: w.name,
  groupId: w.group_id,
  event: w.event,
  priority: w.priority,
  cron: w.cron,
  timeZone: w.time_zone,
  every: w.every,
  paused: w.paused,
  nextAt: w.next_at,
  lastAt: w.last_at,
  runs: w.runs,
});

export function scheduleInputToWire(s: ScheduleInput): W.ScheduleRequest {
  return {
    group_id: s.groupId,
    event: s.event,
    ...(s.priority === undefined ? {} : { priority: s.priority }),
    ...(s.cron === undefined ? {} : { cron: s.cron }),
    ...(s.timeZone === undefined ? {} : { time_zone: s.timeZone }),
    ...(s.every === undefined ? {} : { every: s.every }),
    ...(s.paused === undefined ? {} : { paused: s.paused }),
  };
}

export const scheduleInputFromWire = (w: W.ScheduleRequest): ScheduleInput => ({
  groupId: w.group_id,
  event: w.event,
  ...(w.priority === undefined ? {} : { priority: w.priority }),
  ...(w.cron === undefined ? {} : { cron: w.cron }),
  ...(w.time_zone === undefined ? {} : { timeZone: w.time_zone }),
  ...(w.every === undefined ? {} : { every: w.every }),
  ...(w.paused === undefined ? {} : { paused: w.paused }),
});
