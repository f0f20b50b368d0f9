/** Dead letters: a page of them, a redrive to the tail of its group, a delete. */
import { noDeadLetter } from "../errors.js";
import type { DeadLetter } from "../types.js";
import { NOW, type Plan, plan, rowsOf, stmt } from "./plan.js";

export function deadLettersPlan<E>(groupId: string | null, afterSeq: number, limit: number): Plan<DeadLetter<E>[]> {
  return plan(
    [
      [
        "page",
        stmt(
          `SELECT seq, group_id, event, priority, attempts, reason, dead_at FROM tq_dead_letters
 WHERE seq > :after AND (:group IS NULL OR group_id = :group) ORDER BY seq LIMIT :limit`,
          { after: afterSeq, group: groupId, limit },
        ),
      ],
    ],
    (r) =>
      rowsOf(r.page).map((row) => ({
        seq: Number(row.seq),
        groupId: String(row.group_id),
        event: JSON.parse(String(row.event)) as E,
        priority: Number(row.priority),
        attempts: Number(row.attempts),
        reason: String(row.reason),
        deadAt: Number(row.dead_at),
      })),
  );
}

/**
 * Puts a dead letter back at the tail of its group, with a fresh attempt count and the trace context
 * it was published in. Answers its new seq. Its publish time is the redrive's: a message's age (stats'
 * `oldest_age`, a group's lag) runs from when it was last made deliverable, as a delayed one's runs
 * from when it came due, so that a redriven backlog shows from the moment it is back, and a redrive
 * of old dead letters does not read as consumers falling behind.
 */
export function redrivePlan(seq: number): Plan<number> {
  const args = { seq };
  return plan(
    [
      [
        "inserted",
        stmt(
          `INSERT INTO messages (group_id, event, tq_published_at, tq_trace)
  SELECT group_id, event, ${NOW}, trace FROM tq_dead_letters WHERE seq = :seq RETURNING seq`,
          args,
        ),
      ],
      [
        "group",
        stmt(
          "INSERT OR IGNORE INTO groups (group_id, priority) SELECT group_id, priority FROM tq_dead_letters WHERE seq = :seq",
          args,
        ),
      ],
      ["removed", stmt("DELETE FROM tq_dead_letters WHERE seq = :seq", args)],
    ],
    (r) => {
      const row = rowsOf(r.inserted)[0];
      if (!row) throw noDeadLetter(seq);
      return Number(row.seq);
    },
  );
}

/** Drops a dead letter for good; false when there was none. */
export function deleteDeadLetterPlan(seq: number): Plan<boolean> {
  return plan(
    [["removed", stmt("DELETE FROM tq_dead_letters WHERE seq = :seq RETURNING seq", { seq })]],
    (r) => rowsOf(r.removed).length > 0,
  );
}
