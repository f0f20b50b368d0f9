/** Push subscriptions (`tq_subscriptions`), one row each, read by the writer that delivers them. */
import type { Subscription } from "../types.js";
import { NOW, type Plan, plan, rowsOf, stmt } from "./plan.js";

/** A subscription as stored: with its signing secret (drawn at creation, kept on update). */
export interface StoredSubscription extends Subscription {
  /** HMAC-SHA256 key of the `Turso-Queue-Signature` header (hex). */
  signingSecret: string;
  createdAt: number;
  updatedAt: number;
}

const COLUMNS = "name, url, min_priority, max_in_flight, visibility, secret, created_at, updated_at";

function toSubscription(row: Record<string, unknown>): StoredSubscription {
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

/** Creates or updates one; `secret` is used when it is created, and on an update only when `replace`. */
export function putSubscriptionPlan(s: Subscription, secret: string, replace = false): Plan<StoredSubscription> {
  return plan(
    [
      [
        "put",
        stmt(
          `INSERT INTO tq_subscriptions (${COLUMNS})
  VALUES (:name, :url, :min, :max, :vis, :secret, ${NOW}, ${NOW})
  ON CONFLICT (name) DO UPDATE SET url = excluded.url, min_priority = excluded.min_priority,
     max_in_flight = excluded.max_in_flight, visibility = excluded.visibility, updated_at = excluded.updated_at,
     secret = CASE WHEN :replace = 1 THEN excluded.secret ELSE secret END
  RETURNING ${COLUMNS}`,
          {
            name: s.name,
            url: s.url,
            min: s.minPriority,
            max: s.maxInFlight,
            vis: s.visibility,
            secret,
            replace: replace ? 1 : 0,
          },
        ),
      ],
    ],
    (r) => toSubscription(rowsOf(r.put)[0] as Record<string, unknown>),
  );
}

export function listSubscriptionsPlan(): Plan<StoredSubscription[]> {
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
