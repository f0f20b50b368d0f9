/** What the API answers, and what a push subscription's consumer receives, as valibot schemas. */
import * as v from "valibot";
import { GROUP_COUNT_CAP, MIN_PRIORITY, SETTLE_ACTIONS } from "../rules.js";
import { count, epochSeconds, leaseId, seq } from "./kit.js";

export const Health = v.object({ status: v.literal("ok") });

export const PublishAnswer = v.object({
  seq,
  deduplicated: v.optional(
    v.pipe(
      v.boolean(),
      v.description(
        "With `singleton_key`: true when a message with the key was waiting, so nothing new was stored and `seq` is that message's.",
      ),
    ),
  ),
  replaced: v.optional(
    v.pipe(v.boolean(), v.description("With `replace`: the waiting message's event was replaced by this one.")),
  ),
});

export const PublishBatchAnswer = v.object({
  seqs: v.pipe(v.array(seq), v.description("The messages' seqs, in the order they were sent.")),
});

const leaseFields = {
  lease_id: leaseId,
  seq,
  group_id: v.pipe(v.string(), v.description("The message's group.")),
  event: v.pipe(v.unknown(), v.description("The event as it was published.")),
  expires_at: epochSeconds("When the lease lapses, epoch seconds on the database's clock."),
  attempts: v.pipe(
    v.number(),
    v.integer(),
    v.minValue(1),
    v.description("Deliveries of this message, this one included."),
  ),
  traceparent: v.optional(
    v.pipe(
      v.string(),
      v.description(
        "The W3C trace context the message was published in (its publisher sent a `traceparent` header): make its processing a child of it. Absent when it was not traced.",
      ),
    ),
  ),
};

export const Lease = v.object(leaseFields);

export const AckOutcome = v.object({
  lease_id: leaseId,
  error: v.optional(
    v.pipe(
      v.object({ code: v.string(), message: v.string() }),
      v.description("Why this ack was not applied (`LEASE_LOST`, `LEASE_NOT_FOUND`, ...); absent when it was."),
    ),
  ),
});

export const LeaseList = v.object({
  leases: v.pipe(
    v.array(Lease),
    v.description("Up to `max` leases, each in its own group; empty when nothing is deliverable."),
  ),
  acks: v.optional(
    v.pipe(v.array(AckOutcome), v.description("With `ack`: each ack's outcome, in the order the ids were sent.")),
  ),
});

/** A claim's 200: one lease, or a list of leases when `max` was sent. */
export const ClaimAnswer = v.union([Lease, LeaseList]);

export const SettleOutcome = v.object({
  lease_id: leaseId,
  action: v.pipe(v.picklist(SETTLE_ACTIONS), v.description("What was asked for this lease.")),
  dead_lettered: v.optional(
    v.pipe(
      v.boolean(),
      v.description("For an applied `nack`: `true` when this was its last attempt and it moved to the dead letters."),
    ),
  ),
  error: v.optional(
    v.pipe(
      v.object({ code: v.string(), message: v.string() }),
      v.description(
        "Why it was not applied, as its own route would have answered (`LEASE_LOST`, `LEASE_NOT_FOUND`, `UNAVAILABLE`, ...); absent when it was.",
      ),
    ),
  ),
});

export const SettleAnswer = v.object({
  outcomes: v.pipe(v.array(SettleOutcome), v.description("One per lease sent, in the order they were sent.")),
});

export const ExtendAnswer = v.object({
  lease_id: leaseId,
  expires_at: epochSeconds("The lease's new deadline, epoch seconds on the database's clock."),
});

export const Stats = v.object({
  ready: count(
    "Messages deliverable now: the first message of each group whose first message holds no live lease, park or delay (a lapsed lease counts as deliverable). One per group, since a group delivers one message at a time.",
  ),
  waiting: count(
    "Messages queued behind an earlier message, a live lease, a park or a delay in their group. Each becomes ready when everything before it in its group is done.",
  ),
  in_flight: count("Live leases: claimed messages whose lease has not lapsed yet."),
  parked: count("Messages nacked with a delay that has not passed yet; each holds its group until then."),
  delayed: count(
    "Messages published with a delay that has not passed yet; each holds its group from the moment it is the group's first. `ready + waiting + in_flight + parked + delayed` is every message in the queue.",
  ),
  groups: count("Groups holding at least one message."),
  dead_letters: count("Messages moved to the dead letters after their last attempt (see /v1/dead-letters)."),
  paused: v.optional(
    v.pipe(v.boolean(), v.description("The queue is paused: nothing is delivered, publishes are accepted.")),
  ),
  paused_groups: v.optional(count("Groups paused by a setting of their own.")),
  rate_limited_groups: v.optional(count("Groups whose rate holds their next message back right now.")),
  now: epochSeconds("The database's clock, epoch seconds: compare `expires_at` with it, not with yours."),
  oldest_age: v.pipe(
    v.nullable(v.number()),
    v.description(
      "Seconds the oldest message has waited: since its publish, or, for a delayed one, since it came due (one not due yet waits for nothing). How far behind the consumers are. Null when no message has a known age (an empty queue, or only rows the spec's Python transports wrote). Read from the oldest 20 messages.",
    ),
  ),
  lag: v.pipe(
    v.array(
      v.object({
        group_id: v.string(),
        age: v.pipe(v.number(), v.description("Seconds its oldest message has waited.")),
      }),
    ),
    v.description("The groups most behind (at most 5), the most behind first, from the oldest 20 messages."),
  ),
  unreachable_shards: v.optional(
    v.pipe(
      v.array(
        v.object({
          shard: v.pipe(v.number(), v.description("The shard's index (`seq % 16` of its messages).")),
          code: v.pipe(v.string(), v.description("What it failed with: `UNAVAILABLE`, `TIMEOUT`, ...")),
        }),
      ),
      v.description(
        "A sharded queue's shards that could not be reached: the counts above are the other shards'. Absent when every shard answered.",
      ),
    ),
  ),
});

export const QueuedMessage = v.object({
  seq,
  group_id: v.string(),
  event: v.pipe(v.unknown(), v.description("The event as it was published.")),
  state: v.pipe(
    v.picklist(["queued", "in_flight", "parked", "delayed"]),
    v.description(
      "`in_flight`: leased; `parked`: nacked with a delay; `delayed`: published with one (each until `until`); `queued`: waiting for its turn, or deliverable when first in its group.",
    ),
  ),
  until: v.pipe(
    v.nullable(v.number()),
    v.description("When its lease, park or delay ends, epoch seconds on the database's clock; null when queued."),
  ),
  attempts: count("Deliveries it got so far."),
  published_at: v.pipe(
    v.nullable(v.number()),
    v.description("When it was published, epoch seconds; null for rows the spec's Python transports wrote."),
  ),
});

export const PeekAnswer = v.object({
  messages: v.pipe(
    v.array(QueuedMessage),
    v.description("The group's next messages in the order they will be delivered, left where they are."),
  ),
});

export const PurgeAnswer = v.object({ purged: count("Messages deleted.") });

export const Sample = v.object({
  at: epochSeconds("When it was taken, epoch seconds on the database's clock."),
  ready: count("As in /v1/stats."),
  waiting: count("As in /v1/stats."),
  in_flight: count("As in /v1/stats."),
  parked: count("As in /v1/stats."),
  delayed: count("As in /v1/stats."),
  dead_letters: count("As in /v1/stats."),
  oldest_age: v.pipe(v.nullable(v.number()), v.description("As in /v1/stats.")),
  published: count(
    "Messages published through the queue's writers so far (a running total: the difference between two samples is what was published between them).",
  ),
  acked: count("Messages acked through the queue's writers so far (a running total)."),
});

export const History = v.object({
  sample_seconds: v.pipe(v.number(), v.description("At most one sample per this many seconds (QUEUE_SAMPLE_SECONDS).")),
  samples: v.pipe(
    v.array(Sample),
    v.description(
      "Oldest first, the last hour at the default interval. A sample is taken when the queue is written or its history read, at most one per interval: an idle queue has none, and its last state holds.",
    ),
  ),
});

export const DeadLetter = v.object({
  seq,
  group_id: v.string(),
  event: v.pipe(v.unknown(), v.description("The event as it was published.")),
  priority: v.pipe(v.number(), v.integer(), v.description("Its group's priority when it died.")),
  attempts: v.pipe(v.number(), v.integer(), v.description("Deliveries it got.")),
  reason: v.pipe(
    v.string(),
    v.description("Why it was moved: `max_attempts` (it was delivered as many times as the queue allows)."),
  ),
  dead_at: epochSeconds("When it was moved, epoch seconds on the database's clock."),
});

export const DeadLetterPage = v.object({
  dead_letters: v.pipe(v.array(DeadLetter), v.description("In seq order.")),
  next_after_seq: v.pipe(
    v.nullable(seq),
    v.description("Pass as `after_seq` for the next page; null when no dead letter follows this page."),
  ),
});

export const Group = v.object({
  group_id: v.string(),
  messages: count(
    `Messages in the group, leased, parked and waiting alike, counted up to ${GROUP_COUNT_CAP} (${GROUP_COUNT_CAP} means at least that many): listing groups never reads a deep one whole.`,
  ),
  priority: v.pipe(v.number(), v.integer(), v.description("The group's priority (set by its first publish).")),
  in_flight: v.pipe(v.boolean(), v.description("True while its first message holds a live lease.")),
  parked: v.pipe(
    v.boolean(),
    v.description("True while its first message is parked (nacked with a delay) or delayed, and not due yet."),
  ),
  last_claimed_at: v.pipe(
    v.nullable(v.number()),
    v.description("When a message of the group was last claimed (epoch seconds); null if never."),
  ),
});

export const GroupList = v.object({
  groups: v.pipe(
    v.array(Group),
    v.description(
      "First the groups whose first message holds a live lease, park or delay (the latest to end first), then the next groups in round-robin order (the group claimed longest ago first).",
    ),
  ),
});

export const RedriveAnswer = v.object({
  seq: v.pipe(seq, v.description("The message's new seq, at the tail of its group.")),
});

const subscriptionFields = {
  name: v.string(),
  url: v.string(),
  min_priority: v.pipe(v.number(), v.integer(), v.minValue(MIN_PRIORITY)),
  max_in_flight: v.pipe(v.number(), v.integer()),
  visibility: v.number(),
};

/** A subscription as listed (no secret). */
export const Subscription = v.object(subscriptionFields);

/** The PUT's answer: the subscription with its signing secret. */
export const SubscriptionAnswer = v.object({
  ...subscriptionFields,
  signing_secret: v.pipe(
    v.string(),
    v.description(
      "The HMAC-SHA256 key of each delivery's `Turso-Queue-Signature` header (hex). Drawn when the subscription is created, kept when it is updated.",
    ),
  ),
  next_signing_secret: v.pipe(
    v.nullable(v.string()),
    v.description(
      "During a rotation (`rotate_secret`), the next secret: each delivery carries a `v1` signature for each; null otherwise.",
    ),
  ),
});

export const SubscriptionList = v.object({
  subscriptions: v.pipe(v.array(Subscription), v.description("By name; secrets are only answered by the PUT.")),
});

export const RateAnswer = v.object({
  limit: v.pipe(v.number(), v.integer(), v.description("Claims per `period`.")),
  period: v.pipe(v.number(), v.description("Seconds.")),
  burst: v.pipe(v.number(), v.integer(), v.description("Claims that may go back to back after a quiet spell.")),
});

/** A queue's flow settings. */
export const QueueSettings = v.object({
  group_concurrency: v.pipe(
    v.number(),
    v.integer(),
    v.description("Leases each group may hold at once (1: one message in flight per group)."),
  ),
  group_rate: v.pipe(v.nullable(RateAnswer), v.description("Each group's rate; null: none.")),
  paused: v.pipe(
    v.boolean(),
    v.description("Nothing is delivered (claims, long polls, pushes); publishes are accepted."),
  ),
});

export const Queue = v.object({
  name: v.pipe(v.string(), v.description("The queue's name.")),
  shards: v.pipe(v.number(), v.integer(), v.minValue(1), v.description("The databases it spreads over.")),
  location_hint: v.pipe(v.nullable(v.string()), v.description("Where its writers are asked to run; null: anywhere.")),
  created_at: v.pipe(
    v.nullable(v.number()),
    v.description("When it was made (epoch seconds); null for the default queue."),
  ),
});

/** The PUT's answer: the queue, whether this request made it, and its flow settings. */
export const QueueAnswer = v.object({
  ...Queue.entries,
  created: v.pipe(v.boolean(), v.description("True when this request made it; false when it was there already.")),
  settings: v.optional(QueueSettings),
});

/** A queue and its counts, added up over its shards. */
export const QueueWithStats = v.object({ ...Queue.entries, stats: Stats });

/** A queue in the list: its counts, or, when its databases did not answer, null and why. */
export const QueueListItem = v.object({
  ...Queue.entries,
  stats: v.pipe(v.nullable(Stats), v.description("Its counts; null when its databases could not be reached.")),
  error: v.optional(
    v.pipe(
      v.object({ code: v.string(), message: v.string() }),
      v.description(
        "Why its databases could not be reached (`UNAVAILABLE`, `TIMEOUT`, ...); absent when they answered. One unreachable queue hides no other.",
      ),
    ),
  ),
});

export const QueueList = v.object({
  queues: v.pipe(
    v.array(QueueListItem),
    v.description(
      "Every queue, the default one first, then by name, each with its counts (added up over its shards), or why they could not be read.",
    ),
  ),
});

/**
 * What the queue POSTs to a push subscription's URL (the OpenAPI document's `webhooks`): the lease,
 * to settle by the answer (2xx acks, 202 keeps it for the consumer, anything else retries), and the
 * subscription it came through.
 */
export const PushDelivery = v.object({
  ...leaseFields,
  subscription: v.pipe(v.string(), v.description("The subscription that delivered it.")),
});

export const QueueWithSettings = v.object({ ...QueueWithStats.entries, settings: QueueSettings });

export const GroupSettingsAnswer = v.object({
  group_id: v.string(),
  own: v.pipe(
    v.object({
      concurrency: v.optional(v.number()),
      rate: v.optional(v.nullable(RateAnswer)),
      paused: v.optional(v.boolean()),
    }),
    v.description(
      "The group's own settings (what is absent is the queue's); `rate: null` is no rate, whatever the queue's.",
    ),
  ),
  concurrency: v.pipe(v.number(), v.integer(), v.description("What applies: its own, else the queue's.")),
  rate: v.pipe(v.nullable(RateAnswer), v.description("What applies: its own, else the queue's.")),
  paused: v.pipe(v.boolean(), v.description("Paused by its own setting.")),
  queue_paused: v.pipe(v.boolean(), v.description("Its queue is paused (which holds every group).")),
  rate_limited_until: v.pipe(
    v.nullable(v.number()),
    v.description("While its rate holds its next message back: when it lets it go (epoch seconds); else null."),
  ),
});

export const Schedule = v.object({
  name: v.string(),
  group_id: v.string(),
  event: v.pipe(v.unknown(), v.description("What each tick publishes.")),
  priority: v.pipe(v.number(), v.integer()),
  cron: v.pipe(v.nullable(v.string()), v.description("Five fields, or null for `every`.")),
  time_zone: v.pipe(v.nullable(v.string()), v.description("The cron's IANA time zone; null: UTC.")),
  every: v.pipe(v.nullable(v.number()), v.description("Seconds between ticks, or null for `cron`.")),
  paused: v.boolean(),
  next_at: v.pipe(
    v.nullable(v.number()),
    v.description("Its next tick (epoch seconds, the database's clock); null while paused."),
  ),
  last_at: v.pipe(v.nullable(v.number()), v.description("Its last tick published; null if none yet.")),
  runs: count("Ticks it published."),
});

export const ScheduleAnswer = v.object({
  ...Schedule.entries,
  created: v.pipe(v.boolean(), v.description("True when this request made it; false when it replaced one.")),
});

export const ScheduleList = v.object({ schedules: v.pipe(v.array(Schedule), v.description("By name.")) });
