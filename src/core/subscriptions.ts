/**
 * Push subscriptions (`tq_subscriptions`): where the QueueWriter posts messages (src/app/writer/push.ts).
 * Checks and plans only; the transport runs them. A subscription's signing secret is drawn when it is
 * created and kept when it is updated, so that consumers need not change theirs.
 */
import { invalid } from "./errors.js";
import { type Plan, plan, rowsOf, stmt } from "./sql.js";
import { checkCount, checkPositiveSeconds, checkPriority, describe } from "./validate.js";

export interface SubscriptionInput {
  /** Where deliveries are posted: an http(s) URL without credentials. */
  url: string;
  /** Skip groups whose priority is below this (0-4, default 0). */
  minPriority?: number;
  /** Deliveries in flight at once (1-100, default 10). */
  maxInFlight?: number;
  /** Seconds a delivery's lease lasts, and how long the consumer has to answer (default 30). */
  visibility?: number;
}

export interface Subscription {
  name: string;
  url: string;
  minPriority: number;
  maxInFlight: number;
  visibility: number;
  /** HMAC-SHA256 key of the `Turso-Queue-Signature` header (hex). */
  signingSecret: string;
  createdAt: number;
  updatedAt: number;
}

export const MAX_SUBSCRIPTION_IN_FLIGHT = 100;
export const DEFAULT_SUBSCRIPTION_IN_FLIGHT = 10;
export const DEFAULT_SUBSCRIPTION_VISIBILITY = 30;
export const SUBSCRIPTION_NAME = /^[A-Za-z0-9_-]{1,64}$/;

export function checkSubscriptionName(field: string, v: unknown): string {
  if (typeof v !== "string" || !SUBSCRIPTION_NAME.test(v)) {
    throw invalid(field, `must be 1 to 64 of A-Z, a-z, 0-9, "_" and "-", got ${describe(v)}`);
  }
  return v;
}

export function checkSubscriptionUrl(field: string, v: unknown): string {
  if (typeof v !== "string") throw invalid(field, `must be a string, got ${describe(v)}`);
  if (v.length > 2048) throw invalid(field, "must be at most 2048 characters");
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    throw invalid(field, `must be an absolute http or https URL, got ${describe(v)}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw invalid(field, `must be an http or https URL, got ${describe(url.protocol)}`);
  }
  if (url.username !== "" || url.password !== "") {
    throw invalid(field, "must not hold credentials (verify the Turso-Queue-Signature header instead)");
  }
  return v;
}

/** Checks everything before a byte is written; names each field as the library takes it. */
export function checkSubscription(
  name: unknown,
  input: SubscriptionInput,
): Required<SubscriptionInput> & { name: string } {
  if (typeof input !== "object" || input === null) throw invalid("subscription", "must be an object");
  return {
    name: checkSubscriptionName("name", name),
    url: checkSubscriptionUrl("url", input.url),
    minPriority: input.minPriority === undefined ? 0 : checkPriority("minPriority", input.minPriority),
    maxInFlight:
      input.maxInFlight === undefined
        ? DEFAULT_SUBSCRIPTION_IN_FLIGHT
        : checkCount("maxInFlight", input.maxInFlight, MAX_SUBSCRIPTION_IN_FLIGHT),
    visibility:
      input.visibility === undefined
        ? DEFAULT_SUBSCRIPTION_VISIBILITY
        : checkPositiveSeconds("visibility", input.visibility),
  };
}

const COLUMNS = "name, url, min_priority, max_in_flight, visibility, secret, created_at, updated_at";

function toSubscription(row: Record<string, unknown>): Subscription {
  return {
    name: String(row.name),
    url: String(row.url),
    minPriority: Number(row.min_priority),
    maxInFlight: Number(row.max_in_flight),
    visibility: Number(row.visibility),
    signingSecret: String(row.secret),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

/** Creates or updates one; `secret` is used only when it is created. */
export function putSubscriptionPlan(s: ReturnType<typeof checkSubscription>, secret: string): Plan<Subscription> {
  return plan(
    [
      [
        "put",
        stmt(
          `INSERT INTO tq_subscriptions (${COLUMNS})
  VALUES (:name, :url, :min, :max, :vis, :secret, unixepoch('subsec'), unixepoch('subsec'))
  ON CONFLICT (name) DO UPDATE SET url = excluded.url, min_priority = excluded.min_priority,
     max_in_flight = excluded.max_in_flight, visibility = excluded.visibility, updated_at = excluded.updated_at
  RETURNING ${COLUMNS}`,
          { name: s.name, url: s.url, min: s.minPriority, max: s.maxInFlight, vis: s.visibility, secret },
        ),
      ],
    ],
    (r) => toSubscription(rowsOf(r.put)[0] as Record<string, unknown>),
  );
}

export function listSubscriptionsPlan(): Plan<Subscription[]> {
  return plan([["list", stmt(`SELECT ${COLUMNS} FROM tq_subscriptions ORDER BY name LIMIT 1000`)]], (r) =>
    rowsOf(r.list).map((row) => toSubscription(row as Record<string, unknown>)),
  );
}

export function deleteSubscriptionPlan(name: string): Plan<boolean> {
  return plan(
    [["removed", stmt("DELETE FROM tq_subscriptions WHERE name = :name RETURNING name", { name })]],
    (r) => rowsOf(r.removed).length > 0,
  );
}
