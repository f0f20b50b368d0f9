/**
 * The client's side of what issue 11 (and issue 12's ack-with-claim) add to the API, coded against
 * the shapes those issues specify, before the contract (src/contract/types.ts) has them:
 *
 *  - `"wait"` (long poll, 0-20 s) and `"ack": [lease_id, ...]` (at most 100) on `POST /v1/claims`,
 *    with each ack's outcome in the answer;
 *  - `"delay"` (seconds) on both publish routes;
 *  - `PUT/GET/DELETE /v1/subscriptions[/{name}]`.
 *
 * Everything that guesses at a shape the contract will define lives here. Once those routes are on
 * main: replace the types below with the contract's, and `ackOutcomes()` with a read of the
 * contract's answer. A server without a feature refuses its field as unknown (`"wait": unknown
 * field`); the client then stops sending it (see `unsupported()`), so it works with both.
 */
import type * as T from "../contract/types.js";
import type { QueueHttpError } from "./http-errors.js";

/** Longest `wait` the API accepts on a claim, in seconds. */
export const MAX_WAIT = 20;
/** Most lease ids one claim may ack. */
export const MAX_ACKS = 100;

/** A claim's body: the contract's, plus `wait` and `ack`. */
export type ClaimBody = T.ClaimRequest & { wait?: number; ack?: string[] };
/** A claim's answer with `max`: the contract's, plus each ack's outcome (in the order sent). */
export type ClaimAnswer = T.LeaseList & { acks?: AckOutcome[] };
/** One ack of a claim: no `error` when it was applied. */
export interface AckOutcome {
  lease_id: string;
  error?: { code: string; message: string };
}

/** Publish bodies with `delay` (seconds before the message may be delivered). */
export type PublishBody = T.PublishRequest & { delay?: number };
export type BatchMessage = T.BatchMessage & { delay?: number };

/** `PUT /v1/subscriptions/{name}`. */
export interface SubscriptionRequest {
  url: string;
  min_priority?: number;
  max_in_flight?: number;
  visibility?: number;
}
/** A subscription as the API answers it (`signing_secret` only from the PUT). */
export interface SubscriptionAnswer {
  name: string;
  url: string;
  min_priority: number;
  max_in_flight: number;
  visibility: number;
  signing_secret?: string;
}

/** A push subscription: the API posts each message to `url` (see the README's push section). */
export interface Subscription {
  name: string;
  url: string;
  minPriority: number;
  maxInFlight: number;
  visibility: number;
}
export interface SubscriptionOptions {
  /** Where deliveries are posted (http or https). */
  url: string;
  minPriority?: number;
  /** Deliveries in flight at once (1-100, default 10). */
  maxInFlight?: number;
  /** Seconds a delivery's lease lasts (default 30). */
  visibility?: number;
}

export const subscriptionOf = (s: SubscriptionAnswer): Subscription => ({
  name: s.name,
  url: s.url,
  minPriority: s.min_priority,
  maxInFlight: s.max_in_flight,
  visibility: s.visibility,
});

/** The ack outcomes of a claim's answer, one per id sent (in order), or undefined where the answer does not say. */
export function ackOutcomes(answer: ClaimAnswer, ids: string[]): (AckOutcome | undefined)[] {
  const acks = Array.isArray(answer.acks) ? answer.acks : [];
  return ids.map((id, i) => (acks[i]?.lease_id === id ? acks[i] : undefined));
}

/** True when the server refused `name` as an unknown field: it predates the feature. */
export const unsupported = (e: QueueHttpError, name: string) =>
  e.code === "INVALID_ARGUMENT" && e.field === JSON.stringify(name);
