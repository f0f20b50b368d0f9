/**
 * The HTTP API's requests and answers as plain TypeScript types, inferred from the schemas in
 * ./schemas.ts. Type-only: `import type { Lease } from "turso-queue/contract"` (this file) pulls
 * neither Hono nor valibot into a client's runtime.
 *
 * Requests are the schemas' input types (what a client sends); answers are their output types (what
 * the API sends back).
 */
import type { InferInput, InferOutput } from "valibot";
import type * as s from "./schemas.js";

export type { ErrorCode } from "./schemas.js";

// requests
export type PublishRequest = InferInput<typeof s.PublishBody>;
export type PublishBatchRequest = InferInput<typeof s.PublishBatchBody>;
export type BatchMessage = InferInput<typeof s.BatchMessage>;
export type ClaimRequest = InferInput<typeof s.ClaimBody>;
export type NackRequest = InferInput<typeof s.NackBody>;
export type ExtendRequest = InferInput<typeof s.ExtendBody>;
export type SettleRequest = InferInput<typeof s.SettleBody>;
export type Settlement = InferInput<typeof s.Settlement>;
export type SubscriptionRequest = InferInput<typeof s.SubscriptionBody>;
/** Query parameters of `GET /v1/dead-letters`, as strings on the wire. */
export type DeadLetterQuery = InferInput<typeof s.DeadLetterQuery>;
/** Query parameters of `GET /v1/groups`. */
export type GroupsQuery = InferInput<typeof s.GroupsQuery>;
/** Query parameters of `GET /v1/groups/{group_id}/messages`. */
export type PeekQuery = InferInput<typeof s.PeekQuery>;

// answers
export type Health = InferOutput<typeof s.Health>;
export type PublishAnswer = InferOutput<typeof s.PublishAnswer>;
export type PublishBatchAnswer = InferOutput<typeof s.PublishBatchAnswer>;
export type Lease = InferOutput<typeof s.Lease>;
export type LeaseList = InferOutput<typeof s.LeaseList>;
/** One ack carried by a claim: no `error` when it was applied. */
export type AckOutcome = InferOutput<typeof s.AckOutcome>;
export type ExtendAnswer = InferOutput<typeof s.ExtendAnswer>;
export type SettleAnswer = InferOutput<typeof s.SettleAnswer>;
/** One lease of a settle: no `error` when it was applied. */
export type SettleOutcome = InferOutput<typeof s.SettleOutcome>;
export type Stats = InferOutput<typeof s.Stats>;
export type DeadLetter = InferOutput<typeof s.DeadLetter>;
export type DeadLetterPage = InferOutput<typeof s.DeadLetterPage>;
export type Group = InferOutput<typeof s.Group>;
export type GroupList = InferOutput<typeof s.GroupList>;
export type QueuedMessage = InferOutput<typeof s.QueuedMessage>;
export type PeekAnswer = InferOutput<typeof s.PeekAnswer>;
export type PurgeAnswer = InferOutput<typeof s.PurgeAnswer>;
export type Sample = InferOutput<typeof s.Sample>;
export type History = InferOutput<typeof s.History>;
export type RedriveAnswer = InferOutput<typeof s.RedriveAnswer>;
export type Subscription = InferOutput<typeof s.Subscription>;
export type SubscriptionAnswer = InferOutput<typeof s.SubscriptionAnswer>;
export type SubscriptionList = InferOutput<typeof s.SubscriptionList>;
export type QueueRequest = InferInput<typeof s.QueueBody>;
export type Queue = InferOutput<typeof s.Queue>;
export type QueueAnswer = InferOutput<typeof s.QueueAnswer>;
export type QueueWithStats = InferOutput<typeof s.QueueWithStats>;
export type QueueListItem = InferOutput<typeof s.QueueListItem>;
export type QueueList = InferOutput<typeof s.QueueList>;
/** What a push subscription's consumer receives: the body of each POST to its URL. */
export type PushDelivery = InferOutput<typeof s.PushDelivery>;
/** Every error: `{ "error": { "code", "message" } }`. */
export type ErrorAnswer = InferOutput<typeof s.ErrorAnswer>;
