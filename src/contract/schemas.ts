/**
 * The HTTP API's contract: every request part and every answer as a valibot schema. The same
 * schemas validate requests (src/app/route.ts), type the handlers (`c.req.valid`), generate the
 * OpenAPI document (src/app/openapi.ts) and, through src/contract/types.ts, give plain TypeScript
 * types to any client. Nothing here imports Hono.
 *
 * A refusal's message is `<field>: <problem>` with the API's field name, worded as the library's own
 * checks word it (src/core/validate.ts), e.g. `messages[3].priority: must be an integer from 0 to 4, got 9`.
 * Each schema below carries its problem text; src/app/route.ts puts the field in front.
 */
import * as v from "valibot";
import { MAX_SUBSCRIPTION_IN_FLIGHT } from "../core/subscriptions.js";
import { MAX_CLAIM_BATCH, MAX_PUBLISH_BATCH } from "../core/transport.js";
import { describe, MAX_ID_LENGTH, MAX_PRIORITY, MIN_PRIORITY } from "../core/validate.js";

/** Longest visibility or delay, in seconds (366 days), as the library checks it. */
export const MAX_SECONDS = 366 * 24 * 3600;
/** Most dead letters one page returns. */
export const MAX_DEAD_LETTER_PAGE = 1000;
/** Most groups `GET /v1/groups` lists. */
export const MAX_GROUPS_PAGE = 100;
/** Longest long poll of a claim, in seconds (SQS's is 20 too). */
export const MAX_CLAIM_WAIT = 20;
/** Most acks one claim carries. */
export const MAX_CLAIM_ACKS = 100;

// ---------------------------------------------------------------------------------------------
// building blocks

type Issue = { input: unknown };
/** A problem text that shows what was sent (`got 9`, `got "30"`, `got null`). */
const got = (problem: string) => (issue: Issue) => `${problem}, got ${describe(issue.input)}`;

/**
 * A JSON object that refuses fields it does not declare (a typo must not be silently ignored),
 * with the messages route.ts expects: a missing field "is required", an unknown one is named.
 */
export function object<E extends v.ObjectEntries>(entries: E, what = "field") {
  const names = Object.keys(entries);
  const expected = names.length === 0 ? "none is accepted" : `expected ${names.map((n) => `"${n}"`).join(", ")}`;
  return v.strictObject(entries, (issue) => {
    if (issue.expected === "never") return `unknown ${what} (${expected})`;
    if (issue.expected?.startsWith('"')) return "is required";
    return "must be an object";
  });
}

/** Group ids, worker ids and idempotency keys: 1 to 512 UTF-16 code units, no NUL, well-formed Unicode. */
function id(description: string) {
  return v.pipe(
    v.string(got("must be a string")),
    v.minLength(1, "must not be empty"),
    v.maxLength(MAX_ID_LENGTH, `must be at most ${MAX_ID_LENGTH} characters`),
    v.regex(/^[^\0]*$/, "must not contain NUL characters"),
    v.check(isWellFormed, "must be well-formed Unicode (no lone surrogates)"),
    v.description(description),
  );
}

function isWellFormed(s: string): boolean {
  return !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
}

function integer(min: number, max: number, description: string) {
  const problem = got(`must be an integer from ${min} to ${max}`);
  return v.pipe(
    v.number(problem),
    v.integer(problem),
    v.minValue(min, problem),
    v.maxValue(max, problem),
    v.description(description),
  );
}

function seconds(min: "> 0" | ">= 0", description: string) {
  const problem = got(`must be a finite number of seconds ${min}`);
  return v.pipe(
    v.number(problem),
    v.finite(problem),
    min === "> 0" ? v.gtValue(0, problem) : v.minValue(0, problem),
    v.maxValue(MAX_SECONDS, (issue) => `must be at most ${MAX_SECONDS} seconds, got ${describe(issue.input)}`),
    v.description(description),
  );
}

const priority = (description: string) => integer(MIN_PRIORITY, MAX_PRIORITY, description);

/** A path or query value holding a positive integer (a seq); the handler gets a number. */
function seqText(description: string, allowZero = false) {
  const problem = allowZero ? "must be an integer >= 0" : "must be a positive integer";
  return v.pipe(
    v.string(problem),
    v.regex(allowZero ? /^(?:0|[1-9][0-9]{0,15})$/ : /^[1-9][0-9]{0,15}$/, problem),
    v.check((s) => Number.isSafeInteger(Number(s)), problem),
    v.description(description),
    v.transform(Number),
  );
}

/** A query value given at most once, holding a count from 1 to `max`. */
function countText(max: number, description: string) {
  const problem = `must be an integer from 1 to ${max}`;
  return v.pipe(
    v.string(once(problem)),
    v.regex(/^[1-9][0-9]{0,6}$/, (issue) => `${problem}, got ${describe(issue.input)}`),
    v.check(
      (s) => Number(s) <= max,
      (issue) => `${problem}, got ${issue.input}`,
    ),
    v.description(description),
    v.transform(Number),
  );
}

/** A query parameter sent twice arrives as an array: say so rather than "must be a string". */
const once = (problem: string) => (issue: Issue) => (Array.isArray(issue.input) ? "must be given once" : problem);

const event = v.pipe(
  v.unknown(),
  v.description(
    "Any JSON value, stored as JSON text: at most 1,048,576 characters as JSON and 64 levels deep; numbers must be finite.",
  ),
  v.examples([{ order: 1001, action: "charge" }]),
);
const seq = v.pipe(v.number(), v.integer(), v.minValue(1), v.description("The message's position in the queue."));
const epochSeconds = (description: string) => v.pipe(v.number(), v.description(description));
const leaseId = v.pipe(
  v.string("is not a lease id of this queue"),
  v.regex(/^[1-9][0-9]{0,15}\.[0-9a-f]{32}$/, "is not a lease id of this queue"),
  v.description(
    "`<seq>.<32 hex>`: the handle for ack, nack and extend. Its token fences off a holder whose lease lapsed and was claimed again.",
  ),
  v.examples(["1.e60920e7c2e2f9e880bfec5577612017"]),
);

// ---------------------------------------------------------------------------------------------
// request parts: path, query, headers, bodies

const delay = seconds(
  ">= 0",
  "Deliver no earlier than this many seconds from now (at most 366 days; default 0). The message keeps its place in its group: it holds back the messages published after it in its group, never those before.",
);

export const GroupPath = object({ group_id: id("The message group (FIFO, one message in flight at a time).") });
export const LeasePath = object({ lease_id: leaseId });
export const DeadLetterPath = object({ seq: seqText("The dead letter's seq.") });

export const IdempotencyHeaders = v.object({
  "Idempotency-Key": v.optional(
    id(
      "Makes a retry of the same publish return the first answer (the same seqs) instead of enqueuing again, for 24 hours. Reusing it for a different request is 409 IDEMPOTENCY_CONFLICT. Keys are global to the queue: scope them yourself, e.g. `orders:1001:charge`.",
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
});

export const BatchMessage = object({
  group_id: id("The message's group."),
  event,
  priority: v.optional(priority("0 (default) to 4; the first publish into a group sets the group's priority.")),
  delay: v.optional(delay),
});

export const PublishBatchBody = object({
  messages: v.pipe(
    v.array(BatchMessage, "must be an array"),
    v.minLength(1, (issue) => `must hold 1 to ${MAX_PUBLISH_BATCH} messages, got ${(issue.input as unknown[]).length}`),
    v.maxLength(
      MAX_PUBLISH_BATCH,
      (issue) => `must hold 1 to ${MAX_PUBLISH_BATCH} messages, got ${(issue.input as unknown[]).length}`,
    ),
    v.description(`1 to ${MAX_PUBLISH_BATCH} messages, stored all or nothing, in this order.`),
  ),
});

export const ClaimBody = object({
  worker_id: v.pipe(
    id("Who holds the lease (for your logs and the dead letters' reason)."),
    v.notValue("__parked__", 'must not be "__parked__" (reserved for parked messages)'),
  ),
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
      v.number(got(`must be a number of seconds from 0 to ${MAX_CLAIM_WAIT}`)),
      v.finite(got(`must be a number of seconds from 0 to ${MAX_CLAIM_WAIT}`)),
      v.minValue(0, got(`must be a number of seconds from 0 to ${MAX_CLAIM_WAIT}`)),
      v.maxValue(MAX_CLAIM_WAIT, got(`must be a number of seconds from 0 to ${MAX_CLAIM_WAIT}`)),
      v.description(
        `Long poll: when nothing is deliverable, hold the request up to this many seconds (0 to ${MAX_CLAIM_WAIT}, default 0) and answer as soon as a lease can be taken; then 204 (or \`{"leases": []}\` with \`max\`) when the wait is over.`,
      ),
    ),
  ),
  ack: v.optional(
    v.pipe(
      v.array(leaseId, "must be an array of lease ids"),
      v.minLength(1, (issue) => `must hold 1 to ${MAX_CLAIM_ACKS} lease ids, got ${(issue.input as unknown[]).length}`),
      v.maxLength(
        MAX_CLAIM_ACKS,
        (issue) => `must hold 1 to ${MAX_CLAIM_ACKS} lease ids, got ${(issue.input as unknown[]).length}`,
      ),
      v.description(
        `Leases to ack before claiming (1 to ${MAX_CLAIM_ACKS}), in the same database batch as the claim: one round trip per message for a steady consumer. Needs \`max\`; each ack's outcome is in the answer's \`acks\`, and a failed ack never fails the claim.`,
      ),
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

export const ExtendBody = object({
  visibility: seconds("> 0", "The lease now expires this many seconds from now (the database's clock)."),
});

/** A push subscription's name: the path's `{name}`. */
export const SubscriptionPath = object({
  name: v.pipe(
    v.string("must be a string"),
    v.regex(
      /^[A-Za-z0-9_-]{1,64}$/,
      (issue) => `must be 1 to 64 of A-Z, a-z, 0-9, "_" and "-", got ${describe(issue.input)}`,
    ),
    v.description("1 to 64 of A-Z, a-z, 0-9, `_` and `-`."),
  ),
});

/** http(s), absolute, no credentials: the consumer checks the signature instead. */
const pushUrl = v.pipe(
  v.string(got("must be a string")),
  v.maxLength(2048, "must be at most 2048 characters"),
  v.check(
    (s) => URL.canParse(s) && ["http:", "https:"].includes(new URL(s).protocol),
    got("must be an absolute http or https URL"),
  ),
  v.check((s) => {
    const u = new URL(s);
    return u.username === "" && u.password === "";
  }, "must not hold credentials (verify the Turso-Queue-Signature header instead)"),
  v.description("Where each message is POSTed: an http or https URL, without credentials."),
  v.examples(["https://consumer.example.com/queue"]),
);

export const SubscriptionBody = object({
  url: pushUrl,
  min_priority: v.optional(priority("Deliver only groups of this priority or above (default 0).")),
  max_in_flight: v.optional(
    integer(1, MAX_SUBSCRIPTION_IN_FLIGHT, "Deliveries awaiting the consumer's answer at once (default 10)."),
  ),
  visibility: v.optional(
    seconds(
      "> 0",
      "Each delivery's lease, in seconds (default 30): the consumer must answer (or, after a 202, ack) within it.",
    ),
  ),
});

export const DeadLetterQuery = object(
  {
    group_id: v.optional(v.pipe(v.string(once("must be a string")), id("Only this group's dead letters."))),
    after_seq: v.optional(
      seqText("Page after this seq: the previous page's `next_after_seq` (default 0, the first page).", true),
    ),
    limit: v.optional(
      countText(MAX_DEAD_LETTER_PAGE, `Dead letters per page, 1 to ${MAX_DEAD_LETTER_PAGE} (default 100).`),
    ),
  },
  "query parameter",
);

export const GroupsQuery = object(
  { limit: v.optional(countText(MAX_GROUPS_PAGE, `Groups to list, 1 to ${MAX_GROUPS_PAGE} (default 20).`)) },
  "query parameter",
);

// ---------------------------------------------------------------------------------------------
// answers

export const Health = v.object({ status: v.literal("ok") });

export const PublishAnswer = v.object({ seq });

export const PublishBatchAnswer = v.object({
  seqs: v.pipe(v.array(seq), v.description("The messages' seqs, in the order they were sent.")),
});

export const Lease = v.object({
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
});

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

export const ExtendAnswer = v.object({
  lease_id: leaseId,
  expires_at: epochSeconds("The lease's new deadline, epoch seconds on the database's clock."),
});

const count = (description: string) => v.pipe(v.number(), v.integer(), v.minValue(0), v.description(description));

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
  now: epochSeconds("The database's clock, epoch seconds: compare `expires_at` with it, not with yours."),
});

export const DeadLetter = v.object({
  seq,
  group_id: v.string(),
  event: v.pipe(v.unknown(), v.description("The event as it was published.")),
  priority: v.pipe(v.number(), v.integer(), v.description("Its group's priority when it died.")),
  attempts: v.pipe(v.number(), v.integer(), v.description("Deliveries it got.")),
  reason: v.pipe(v.string(), v.description("Why it was moved (attempts used up, and by which worker).")),
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
    "Messages in the group, leased, parked and waiting alike, counted up to 1,000 (1000 means at least 1,000): listing groups never reads a deep one whole.",
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
  groups: v.pipe(v.array(Group), v.description("The deepest groups first (ties by group id).")),
});

export const RedriveAnswer = v.object({
  seq: v.pipe(seq, v.description("The message's new seq, at the tail of its group.")),
});

const subscriptionFields = {
  name: v.string(),
  url: v.string(),
  min_priority: v.pipe(v.number(), v.integer()),
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
});

export const SubscriptionList = v.object({
  subscriptions: v.pipe(v.array(Subscription), v.description("By name; secrets are only answered by the PUT.")),
});

/** Every error code the API answers with, its status and when. */
export const ERRORS = {
  INVALID_ARGUMENT: [
    400,
    "A field, path or query parameter, header or body refused (the message starts with its name); invalid JSON or UTF-8; an unknown field.",
  ],
  UNAUTHORIZED: [401, "Missing, malformed or wrong bearer token (with `WWW-Authenticate: Bearer`)."],
  NOT_FOUND: [404, "No such route, dead letter or subscription."],
  LEASE_NOT_FOUND: [404, "The leased message is gone (acked or dead-lettered)."],
  METHOD_NOT_ALLOWED: [405, "A known path asked with another method (with `Allow`)."],
  LEASE_LOST: [409, "The lease lapsed and the message was claimed again, or it was released: nothing changed."],
  IDEMPOTENCY_CONFLICT: [409, "The Idempotency-Key was used before for a different request; nothing was stored."],
  PAYLOAD_TOO_LARGE: [413, "A body over 1 MiB (checked on Content-Length and on the bytes read)."],
  UNSUPPORTED_MEDIA_TYPE: [415, "A body that is not `application/json` (or `+json`) in UTF-8."],
  INTERNAL: [500, "A fault of ours; never caused by input."],
  DATABASE: [500, "The database reported an unexpected error."],
  DATABASE_UNAUTHORIZED: [502, "The database refused TURSO_AUTH_TOKEN (our configuration, not the caller's fault)."],
  NOT_CONFIGURED: [503, "QUEUE_TOKEN or TURSO_DATABASE_URL missing or unusable (the message says which)."],
  BUSY: [503, "The database stayed locked; nothing was applied (with `Retry-After: 1`)."],
  UNAVAILABLE: [
    503,
    "The database (or the queue's writer) could not be reached; a write may have been applied: retry a publish with the same Idempotency-Key (with `Retry-After: 1`).",
  ],
  TIMEOUT: [
    503,
    "The database did not answer in time; a write may have been applied: retry a publish with the same Idempotency-Key (with `Retry-After: 1`).",
  ],
  CLOSED: [503, "The transport was closed (with `Retry-After: 1`)."],
} as const satisfies Record<string, readonly [number, string]>;

export type ErrorCode = keyof typeof ERRORS;

export const ErrorAnswer = v.object({
  error: v.object({
    code: v.pipe(v.picklist(Object.keys(ERRORS) as ErrorCode[]), v.description("Stable: branch on it.")),
    message: v.pipe(v.string(), v.description("For people. A 400's message starts with the field at fault.")),
  }),
});
