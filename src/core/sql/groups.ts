/** One group's messages: its next ones, read where they are (a peek), and all of them deleted (a purge). */
import { DELAYED, PARKED } from "../../rules.js";
import type { QueuedMessage } from "../types.js";
import { NOW, type Plan, plan, rowsOf, stmt } from "./plan.js";

/** The group's first `limit` messages in delivery order, on its index: `limit` rows read. */
export function peekPlan<E>(groupId: string, limit: number): Plan<QueuedMessage<E>[]> {
  return plan(
    [
      [
        "next",
        stmt(
          `SELECT seq, group_id, event, locked_by, lock_expiry, lock_expiry >= ${NOW} AS live,
       coalesce(tq_attempts, 0) AS attempts, tq_published_at
  FROM messages WHERE group_id = :group ORDER BY seq LIMIT :limit`,
          { group: groupId, limit },
        ),
      ],
    ],
    (r) =>
      rowsOf(r.next).map((row) => {
        const holder = row.locked_by === null ? null : String(row.locked_by);
        const live = holder !== null && Number(row.live) === 1;
        const state = !live ? "queued" : holder === PARKED ? "parked" : holder === DELAYED ? "delayed" : "in_flight";
        return {
          seq: Number(row.seq),
          groupId: String(row.group_id),
          event: JSON.parse(String(row.event)) as E,
          state,
          until: live ? Number(row.lock_expiry) : null,
          attempts: Number(row.attempts),
          publishedAt: row.tq_published_at === null ? null : Number(row.tq_published_at),
        };
      }),
  );
}

/**
 * Deletes up to `chunk` of the group's messages, oldest first, among those with a seq up to `upTo`
 * (the queue's last seq when the purge began: a message published since is kept). Answers how many
 * went and that bound. The delete trigger frees or deletes the group.
 */
export function purgePlan(
  groupId: string,
  upTo: number | null,
  chunk: number,
): Plan<{ deleted: number; upTo: number }> {
  const bound = "coalesce(:up_to, (SELECT max(seq) FROM messages), 0)";
  const args = { group: groupId, up_to: upTo, chunk };
  return plan(
    [
      ["bound", stmt(`SELECT ${bound} AS up_to`, { up_to: upTo })],
      [
        "deleted",
        stmt(
          `DELETE FROM messages WHERE seq IN (
  SELECT seq FROM messages WHERE group_id = :group AND seq <= ${bound} ORDER BY seq LIMIT :chunk) RETURNING seq`,
          args,
        ),
      ],
    ],
    (r) => ({ deleted: rowsOf(r.deleted).length, upTo: Number(rowsOf(r.bound)[0]?.up_to ?? 0) }),
  );
}
