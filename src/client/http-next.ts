/**
 * The client's side of what the API added for long polls, acks riding with claims, delayed publishes
 * and push subscriptions: the wire shapes are the contract's (src/contract/types.ts), the
 * camel-cased ones the client's.
 *
 * A server older than a feature refuses its field as unknown (`"wait": unknown field`); the client
 * then stops sending it (see `unsupported()`), so it works with both.
 */
import type * as T from "../contract/types.js";
import type { QueueHttpError } from "./http-errors.js";

// The contract's MAX_CLAIM_WAIT and MAX_CLAIM_ACKS, repeated so that the client never loads valibot
// (test/client/http.test.ts checks they agree).
/** Longest `wait` the API accepts on a claim, in seconds. */
export const MAX_WAIT = 20;
/** Most lease ids one claim may ack. */
export const MAX_ACKS = 100;

export type ClaimBody = T.ClaimRequest;
export type ClaimAnswer = T.LeaseList;
export type AckOutcome = T.AckOutcome;
export type PublishBody = T.PublishRequest;
export type BatchMessage = T.BatchMessage;

/** `PUT /v1/subscriptions/{name}`. */
export type SubscriptionRequest = T.SubscriptionRequest;
/** A subscription as the API answers it (`signing_secret` only from the PUT). */
export type SubscriptionAnswer = T.Subscription & { signing_secret?: string };

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
