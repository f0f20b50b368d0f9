/** Push subscriptions (`tq_subscriptions`), one row each, read by the writer that delivers them. */
import type { Subscription } from "../types.js";
import { NOW, type Plan, plan, rowsOf, stmt } from "./plan.js";

/** A subscription as stored: with its signing secret (drawn at creation, kept on update). */
export interface StoredSubscription extends Subscription {
  /** HMAC-SHA256 key of the `Turso-Queue-Signature` header (hex). */
  signingSecret: string;
  /** During a rotation, the next one: deliveries are signed with both. */
  nextSigningSecret: string | undefined;
  createdAt: number;
  updatedAt: number;
}

const COLUMNS = "name, url, min_priority, max_in_flight, visibility, secret, next_secret, created_at, updated_at";

function toSubscription(row: Record<string, unknown>): StoredSubscription {
  return {
    name: String(row.name),
    url: String(row.url),
    minPriority: Number(row.min_priority),
    maxInFlight: Number(row.max_in_flight),
    visibility: Number(row.visibility),
    signingSecret: String(row.secret),
    nextSigningSecret: row.next_secret === null || row.next_secret === undefined ? undefined : String(row.next_secret),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

/**
 * What a put does to the next secret: keep it (or clear it when the secret is set), set it to `next`,
 * start a rotation (`next` unless one is under way), or finish one (the next becomes the secret).
 */
export type NextSecret = { mode: "keep" } | { mode: "set" | "start"; next: string | null } | { mode: "finish" };

/** Creates or updates one; `secret` is used when it is created, and on an update only when `replace`. */
export function putSubscriptionPlan(
  s: Subscription,
  secret: string,
  replace = false,
  next: NextSecret = { mode: "keep" },
): Plan<StoredSubscription> {
  return plan(
    [
      [
        "put",
        stmt(
          `INSERT INTO tq_subscriptions (${COLUMNS})
  VALUES (:name, :url, :min, :max, :vis, :secret, CASE WHEN :mode IN ('set', 'start') THEN :next END, ${NOW}, ${NOW})
  ON CONFLICT (name) DO UPDATE SET url = excluded.url, min_priority = excluded.min_priority,
     max_in_flight = excluded.max_in_flight, visibility = excluded.visibility, updated_at = excluded.updated_at,
     secret = CASE WHEN :replace = 1 THEN excluded.secret
                   WHEN :mode = 'finish' AND next_secret IS NOT NULL THEN next_secret ELSE secret END,
     next_secret = CASE :mode WHEN 'set' THEN :next WHEN 'start' THEN coalesce(next_secret, :next)
                   WHEN 'finish' THEN NULL ELSE CASE WHEN :replace = 1 THEN NULL ELSE next_secret END END
  RETURNING ${COLUMNS}`,
          {
            name: s.name,
            url: s.url,
            min: s.minPriority,
            max: s.maxInFlight,
            vis: s.visibility,
            secret,
            replace: replace ? 1 : 0,
            mode: next.mode,
            next: "next" in next ? next.next : null,
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
