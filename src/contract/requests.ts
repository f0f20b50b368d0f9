/**
 * What requests carry: path, query and header values and JSON bodies, as valibot schemas built from
 * the blocks of ./kit.ts (each field's rule is src/rules.ts's). They validate requests
 * (src/app/route.ts), type the handlers (`c.req.valid`) and document the API (src/app/openapi.ts).
 */
import * as v from "valibot";
import {
  DEAD_LETTER_PAGE,
  DEFAULT_IDEMPOTENCY_WINDOW,
  DEFAULT_QUEUE,
  everyProblem,
  GROUPS_PAGE,
  LOCATION_HINTS,
  locationHintProblem,
  MAX_CLAIM_ACKS,
  MAX_CLAIM_BATCH,
  MAX_CLAIM_WAIT,
  MAX_GROUP_CONCURRENCY,
  MAX_PUBLISH_BATCH,
  MAX_SETTLE_BATCH,
  MAX_SHARDS,
  PEEK_PAGE,
  pushUrlProblem,
  QUEUE_NAME,
  queueNameProblem,
  RATE,
  SETTLE_ACTIONS,
  SETTLE_DELAY_PROBLEM,
  SIGNING_SECRET,
  SUBSCRIPTION,
  scheduleNameProblem,
  settleActionProblem,
  signingSecretProblem,
  subscriptionNameProblem,
  timeZoneProblem,
  traceparentProblem,
  waitProblem,
  workerIdProblem,
} from "../rules.js";
import {
  countText,
  event,
  id,
  integer,
  leaseId,
  list,
  object,
  once,
  priority,
  ruleCheck,
  ruleMessage,
  seconds,
  seqText,
  withCommas,
} from "./kit.js";

const delay = seconds(
  ">= 0",
  "Deliver no earlier than this many seconds from now (at most 366 days; default 0). The message keeps its place in its group: it holds back the messages published after it in its group, never those before.",
);

export const GroupPath = object({ group_id: id("The message group (FIFO, one message in flight at a time).") });
export const LeasePath = object({ lease_id: leaseId });
export const DeadLetterPath = object({ seq: seqText("The dead letter's seq.") });

/** The W3C trace context a publish is made in (OpenTelemetry's `traceparent`). */
const traceparent = v.optional(
  v.pipe(
    v.string(ruleMessage(traceparentProblem)),
    ruleCheck<string>(traceparentProblem),
    v.description(
      "The W3C trace context of the publisher's span (`00-<trace id>-<span id>-<flags>`): stored with the message, handed back with its lease (and push delivery), so that its processing is a child of its publishing.",
    ),
  ),
);

export const IdempotencyHeaders = v.object({
  traceparent,
  "Idempotency-Key": v.optional(
    id(
      `Makes a retry of the same publish return the first answer (the same seqs) instead of enqueuing again, for ${DEFAULT_IDEMPOTENCY_WINDOW / 3600} hours. Reusing it for a different request is 409 IDEMPOTENCY_CONFLICT. Keys are global to the queue: scope them yourself, e.g. \`orders:1001:charge\`.`,
    ),
  ),
});

export const PublishBody = object({
  event,
  priority: v.optional(
    priority(
      "0 (default) to 4. The first publish into a group sets the group's priority; claims with `min_priority` skip groups below it.",
    ),
  ),
  delay: v.optional(delay),
  singleton_key: v.optional(
    id(
      "Store nothing while a message with this key waits unclaimed in the queue (whatever its group): answer its seq with `deduplicated: true`. Once it is claimed, the next publish with the key is stored anew. On a sharded queue, per shard (use the key with one group).",
    ),
  ),
  replace: v.optional(
    v.pipe(
      v.boolean("must be true or false"),
      v.description("With `singleton_key`: replace the waiting message's event with this one (`replaced: true`)."),
    ),
  ),
});

export const BatchMessage = object({
  group_id: id("The message's group."),
  event,
  priority: v.optional(priority("0 (default) to 4; the first publish into a group sets the group's priority.")),
  delay: v.optional(delay),
});

export const PublishBatchBody = object({
  messages: list(
    BatchMessage,
    MAX_PUBLISH_BATCH,
    "messages",
    `1 to ${MAX_PUBLISH_BATCH} messages, stored all or nothing, in this order.`,
  ),
});

export const ClaimBody = object({
  worker_id: id("Who holds the lease (for your logs and the dead letters' reason).", workerIdProblem),
  visibility: seconds("> 0", "How long the lease lasts, in seconds (fractions allowed), at most 366 days."),
  min_priority: v.optional(priority("Skip groups whose priority is below this (default 0).")),
  max: v.optional(
    integer(
      1,
      MAX_CLAIM_BATCH,
      `Claim up to this many leases, in distinct groups, and answer \`{"leases": [...]}\` (possibly empty) instead of one lease or 204.`,
    ),
  ),
  wait: v.optional(
    v.pipe(
      v.number(ruleMessage(waitProblem)),
      ruleCheck<number>(waitProblem),
      v.minValue(0),
      v.maxValue(MAX_CLAIM_WAIT),
      v.description(
        `Long poll: when nothing is deliverable, hold the request up to this many seconds (0 to ${MAX_CLAIM_WAIT}, default 0) and answer as soon as a lease can be taken; then 204 (or \`{"leases": []}\` with \`max\`) when the wait is over.`,
      ),
    ),
  ),
  ack: v.optional(
    list(
      leaseId,
      MAX_CLAIM_ACKS,
      "lease ids",
      `Leases to ack before claiming (1 to ${MAX_CLAIM_ACKS}), in the same database batch as the claim: one round trip per message for a steady consumer. Needs \`max\`; each ack's outcome is in the answer's \`acks\`, and a failed ack never fails the claim.`,
    ),
  ),
});

export const NoBody = object({});

export const NackBody = object({
  delay: v.optional(
    seconds(
      ">= 0",
      "0 (default) frees the message for the next claim now; > 0 parks it, blocking its group, for that many seconds.",
    ),
  ),
});

export const Settlement = v.pipe(
  object({
    lease_id: leaseId,
    action: v.pipe(
      v.picklist(SETTLE_ACTIONS, ruleMessage(settleActionProblem)),
      v.description(
        "`ack`: the message is done; `nack`: give it back (after `delay`), spending its attempt; `release`: give it back unhandled, its attempt not counted.",
      ),
    ),
    delay: v.optional(
      seconds(">= 0", "For `nack`: park the message, blocking its group, this many seconds (default 0: free it now)."),
    ),
  }),
  v.forward(
    v.check((s) => s.delay === undefined || s.action === "nack", SETTLE_DELAY_PROBLEM),
    ["delay"],
  ),
);

export const SettleBody = object({
  leases: list(
    Settlement,
    MAX_SETTLE_BATCH,
    "settlements",
    `1 to ${MAX_SETTLE_BATCH} leases to ack, nack or release, each fenced as on its own route and each with its own outcome, in this order.`,
  ),
});

export const ExtendBody = object({
  visibility: seconds("> 0", "The lease now expires this many seconds from now (the database's clock)."),
});

/** A push subscription's name: the path's `{name}`. */
export const SubscriptionPath = object({
  name: v.pipe(
    v.string(ruleMessage(subscriptionNameProblem)),
    v.regex(SUBSCRIPTION.name, ruleMessage(subscriptionNameProblem)),
    v.description("1 to 64 of A-Z, a-z, 0-9, `_` and `-`."),
  ),
});

/** A push subscription's signing secret, when the caller sets one. */
const signingSecret = v.pipe(
  v.string(ruleMessage(signingSecretProblem)),
  ruleCheck<string>(signingSecretProblem),
  v.minLength(SIGNING_SECRET.minLength),
  v.maxLength(SIGNING_SECRET.maxLength),
);

export const SubscriptionBody = object({
  url: v.pipe(
    v.string(ruleMessage(pushUrlProblem)),
    v.maxLength(SUBSCRIPTION.maxUrlLength, ruleMessage(pushUrlProblem)),
    ruleCheck<string>(pushUrlProblem),
    v.description("Where each message is POSTed: an http or https URL, without credentials."),
    v.examples(["https://consumer.example.com/queue"]),
  ),
  min_priority: v.optional(priority("Deliver only groups of this priority or above (default 0).")),
  max_in_flight: v.optional(
    integer(
      1,
      SUBSCRIPTION.maxInFlight,
      `Deliveries awaiting the consumer's answer at once (default ${SUBSCRIPTION.defaultInFlight}).`,
    ),
  ),
  visibility: v.optional(
    seconds(
      "> 0",
      `Each delivery's lease, in seconds (default ${SUBSCRIPTION.defaultVisibility}): the consumer must answer (or, after a 202, ack) within it.`,
    ),
  ),
  signing_secret: v.optional(
    v.pipe(
      signingSecret,
      v.description(
        `Sets the signing secret (${SIGNING_SECRET.minLength} to ${SIGNING_SECRET.maxLength} visible ASCII characters) instead of keeping the current one or drawing one: to give several subscriptions one secret. Absent: drawn at creation, kept on update. Setting it ends a rotation.`,
      ),
    ),
  ),
  rotate_secret: v.optional(
    v.pipe(
      v.picklist(["start", "finish"], 'must be "start" or "finish"'),
      v.description(
        '`"start"`: draws a next signing secret (answered as `next_signing_secret`; starting again keeps it), and from then on every delivery is signed with both, so that a consumer holding either verifies it. `"finish"`: the next secret becomes the secret, and deliveries are signed with it alone. Not with `signing_secret` or `next_signing_secret`.',
      ),
    ),
  ),
  next_signing_secret: v.optional(
    v.pipe(
      v.nullable(signingSecret),
      v.description(
        "Sets the next signing secret (a rotation with a secret of your own; null ends a rotation). Not with `rotate_secret`.",
      ),
    ),
  ),
});

/** A queue's name: the path's `{queue}`. */
export const QueuePath = object({
  queue: v.pipe(
    v.string(ruleMessage(queueNameProblem)),
    ruleCheck<string>(queueNameProblem),
    v.maxLength(QUEUE_NAME.maxLength),
    v.description(
      `The queue: 1 to ${QUEUE_NAME.maxLength} ${QUEUE_NAME.text}. \`${DEFAULT_QUEUE}\` is the queue that \`/v1/...\` without a queue serves.`,
    ),
    v.examples(["emails"]),
  ),
});

export const QueueDeleteQuery = object(
  {
    force: v.optional(
      v.pipe(
        v.picklist(["true", "false"], 'must be "true" or "false"'),
        v.description(
          "`true` drops the queue's messages and dead letters with it; otherwise a queue that holds any is kept (409).",
        ),
        v.transform((s) => s === "true"),
      ),
    ),
  },
  "query parameter",
);

export const DeadLetterQuery = object(
  {
    group_id: v.optional(v.pipe(v.string(once("must be a string")), id("Only this group's dead letters."))),
    after_seq: v.optional(
      seqText("Page after this seq: the previous page's `next_after_seq` (default 0, the first page).", true),
    ),
    limit: v.optional(
      countText(
        DEAD_LETTER_PAGE.max,
        `Dead letters per page, 1 to ${DEAD_LETTER_PAGE.max} (default ${DEAD_LETTER_PAGE.default}).`,
      ),
    ),
  },
  "query parameter",
);

export const PeekQuery = object(
  {
    limit: v.optional(
      countText(PEEK_PAGE.max, `Messages to show, 1 to ${PEEK_PAGE.max} (default ${PEEK_PAGE.default}).`),
    ),
  },
  "query parameter",
);

export const GroupsQuery = object(
  {
    limit: v.optional(
      countText(GROUPS_PAGE.max, `Groups to list, 1 to ${GROUPS_PAGE.max} (default ${GROUPS_PAGE.default}).`),
    ),
  },
  "query parameter",
);

const concurrency = (description: string) => integer(1, MAX_GROUP_CONCURRENCY, description);

/** A rate: `{limit, period, burst?}`. */
const Rate = object({
  limit: integer(1, RATE.maxLimit, `Claims per \`period\` (1 to ${withCommas(RATE.maxLimit)}).`),
  period: seconds("> 0", "Seconds (at most 366 days)."),
  burst: v.optional(
    integer(
      1,
      RATE.maxLimit,
      "How many may go back to back after a quiet spell (1 to `limit`, default 1): a token bucket of `burst` tokens refilled one per `period / limit` seconds.",
    ),
  ),
});

const rate = (description: string) =>
  v.pipe(
    Rate,
    v.check((r) => r.burst === undefined || r.burst <= r.limit, "burst must be at most limit"),
    v.description(description),
  );

/** The flow settings a queue's PUT may carry besides `shards` and `location_hint`. */
export const QueueFlowFields = {
  group_concurrency: v.optional(
    concurrency(
      `Leases each group may hold at once, 1 (default: one message in flight per group) to ${MAX_GROUP_CONCURRENCY}, handed out in publish order (completion order is then the handlers').`,
    ),
  ),
  group_rate: v.optional(
    v.nullable(
      rate(
        "At most `limit` claims per group per `period` seconds, started `period / limit` apart (`burst` back to back after a quiet spell); messages over it wait, never dropped. null: no rate.",
      ),
    ),
  ),
  paused: v.optional(
    v.pipe(
      v.boolean("must be true or false"),
      v.description(
        "true: nothing is delivered (claims, long polls, pushes), publishes are still accepted; false: resume.",
      ),
    ),
  ),
};

export const GroupSettingsPath = object({ group_id: id("The group.") });

export const GroupSettingsBody = object({
  concurrency: v.optional(
    concurrency(`Leases this group may hold at once (1 to ${MAX_GROUP_CONCURRENCY}), over the queue's.`),
  ),
  rate: v.optional(v.nullable(rate("This group's rate, over the queue's; null: none, whatever the queue's."))),
  paused: v.optional(
    v.pipe(v.boolean("must be true or false"), v.description("true: this group delivers nothing until resumed.")),
  ),
});

export const SchedulePath = object({
  name: v.pipe(
    v.string(ruleMessage(scheduleNameProblem)),
    v.regex(SUBSCRIPTION.name, ruleMessage(scheduleNameProblem)),
    v.description("1 to 64 of A-Z, a-z, 0-9, `_` and `-`."),
  ),
});

export const ScheduleBody = v.pipe(
  object({
    group_id: id("The group each tick publishes into."),
    event,
    priority: v.optional(priority("The group's priority if a tick creates it (default 0).")),
    cron: v.optional(
      v.pipe(
        v.string("must be a string of five fields"),
        v.maxLength(256, "must be a string of five fields"),
        v.description(
          "Five fields: minute hour day-of-month month day-of-week (`*/5 * * * *`), in UTC unless `time_zone`.",
        ),
      ),
    ),
    time_zone: v.optional(
      v.pipe(
        v.string(ruleMessage(timeZoneProblem)),
        ruleCheck<string>(timeZoneProblem),
        v.description("An IANA time zone for `cron` (`Europe/Paris`)."),
      ),
    ),
    every: v.optional(
      v.pipe(
        v.number(ruleMessage(everyProblem)),
        ruleCheck<number>(everyProblem),
        v.description("Seconds between ticks (at least 1), counted from the epoch: 60 ticks on every whole minute."),
      ),
    ),
    paused: v.optional(
      v.pipe(v.boolean("must be true or false"), v.description("A paused schedule publishes nothing.")),
    ),
  }),
  v.description(
    "Either `cron` or `every`. Each tick is published once (an idempotency key per schedule and tick), whoever fires it; after downtime, one catch-up tick.",
  ),
);

export const QueueBody = object({
  ...QueueFlowFields,
  shards: v.optional(
    integer(
      1,
      MAX_SHARDS,
      `Databases the queue spreads over (1 to ${MAX_SHARDS}, default 1): a group lives on one, by a hash of its id. Fixed once the queue exists (a group's messages must not split): make a new queue and drain this one to change it.`,
    ),
  ),
  location_hint: v.optional(
    v.pipe(
      v.string(ruleMessage(locationHintProblem)),
      ruleCheck<string>(locationHintProblem),
      v.description(
        `Where the queue's writers should run, next to its databases' primary: one of ${LOCATION_HINTS.join(", ")} (a Durable Object location hint; the Worker's QUEUE_LOCATION_HINT by default).`,
      ),
    ),
  ),
});
