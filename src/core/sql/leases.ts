/**
 * A lease's life after its claim: ack, nack, release, extend. Each applies only while the lease is
 * still the caller's (fencing). A lease is `<seq>.<token>` outside, `tq_lease = '<token>|<worker>'`
 * inside.
 */
import { PARKED } from "../../rules.js";
import { leaseGone, leaseLost, type QueueError } from "../errors.js";
import type { NackResult } from "../types.js";
import { flag, NOW, type Plan, plan, rowsOf, stmt, UNLIMITED } from "./plan.js";

export interface LeaseRef {
  seq: number;
  token: string;
}

/**
 * The lease is still the caller's: its token, and the worker that took it still holding the
 * message (a lease that lapsed and was claimed again, by us or by the spec's claim, or that was
 * released or parked, no longer matches).
 */
const FENCE = "tq_lease = :token || '|' || locked_by";

function leaseError(present: boolean, ref: LeaseRef): QueueError {
  return present ? leaseLost(ref.seq) : leaseGone(ref.seq);
}

const PRESENT = "EXISTS (SELECT 1 FROM messages WHERE seq = :seq) AS present";

/**
 * Deletes the message (the trigger then frees or deletes its group). Answers how long the message
 * was held, claim to ack, on the database's clock (undefined when a resend found it acked already).
 */
export function ackPlan(l: LeaseRef): Plan<number | undefined> {
  const args = { seq: l.seq, token: l.token };
  return plan(
    [
      [
        "acked",
        stmt(`DELETE FROM messages WHERE seq = :seq AND ${FENCE} RETURNING ${NOW} - tq_claimed_at AS held`, args),
      ],
      ["state", stmt(`SELECT ${PRESENT}`, { seq: l.seq }), (r) => rowsOf(r.acked).length === 0],
    ],
    (r, retried) => {
      const acked = rowsOf(r.acked)[0];
      if (acked !== undefined) return acked.held === null ? undefined : Math.max(0, Number(acked.held));
      const present = flag(r.state, "present");
      // Gone after a retry: our first attempt applied and only its answer was lost.
      if (!present && retried) return;
      throw leaseError(present, l);
    },
  );
}

/**
 * delay > 0 parks the message (its group stays held) until now + delay; 0 frees it. A message that
 * has used its attempts moves to the dead letters instead.
 */
export function nackPlan(l: LeaseRef, delay: number, maxAttempts: number): Plan<NackResult> {
  const args = { seq: l.seq, token: l.token };
  const limited = maxAttempts < UNLIMITED;
  return plan(
    [
      [
        "dead",
        limited
          ? stmt(
              `INSERT INTO tq_dead_letters (seq, group_id, event, priority, attempts, reason, dead_at, trace)
SELECT m.seq, m.group_id, m.event, coalesce(g.priority, 0), m.tq_attempts, 'max_attempts', ${NOW}, m.tq_trace
  FROM messages m LEFT JOIN groups g ON g.group_id = m.group_id
 WHERE m.seq = :seq AND m.tq_lease = :token || '|' || m.locked_by AND m.tq_attempts >= :max
ON CONFLICT (seq) DO NOTHING`,
              { ...args, max: maxAttempts },
            )
          : undefined,
      ],
      [
        "removed",
        limited
          ? stmt(
              `DELETE FROM messages WHERE seq = :seq AND ${FENCE}
   AND EXISTS (SELECT 1 FROM tq_dead_letters WHERE seq = :seq) RETURNING seq`,
              args,
            )
          : undefined,
      ],
      [
        "released",
        stmt(
          `UPDATE messages
   SET locked_by   = CASE WHEN :delay > 0 THEN '${PARKED}' END,
       lock_expiry = CASE WHEN :delay > 0 THEN ${NOW} + :delay END
 WHERE seq = :seq AND ${FENCE} RETURNING seq`,
          { ...args, delay },
        ),
      ],
      [
        "state",
        stmt(
          `SELECT ${PRESENT},
       EXISTS (SELECT 1 FROM messages WHERE seq = :seq AND substr(tq_lease, 1, 32) = :token) AS ours,
       EXISTS (SELECT 1 FROM tq_dead_letters WHERE seq = :seq) AS dead`,
          args,
        ),
      ],
    ],
    (r, retried) => {
      if (rowsOf(r.removed).length > 0) return { deadLettered: true };
      if (rowsOf(r.released).length > 0) return { deadLettered: false };
      const present = flag(r.state, "present");
      if (retried && flag(r.state, "dead")) return { deadLettered: true };
      if (retried && present && flag(r.state, "ours")) return { deadLettered: false };
      throw leaseError(present, l);
    },
  );
}

/**
 * Gives a lease back as if it had not been delivered: the message is free again at once and the
 * attempt its claim counted is taken back (the group keeps the claim's round-robin stamp).
 */
export function releasePlan(l: LeaseRef): Plan<void> {
  const args = { seq: l.seq, token: l.token };
  return plan(
    [
      [
        "released",
        stmt(
          `UPDATE messages SET locked_by = NULL, lock_expiry = NULL, tq_attempts = max(coalesce(tq_attempts, 1) - 1, 0)
 WHERE seq = :seq AND ${FENCE} RETURNING seq`,
          args,
        ),
      ],
      [
        "state",
        stmt(
          `SELECT ${PRESENT},
       EXISTS (SELECT 1 FROM messages WHERE seq = :seq AND substr(tq_lease, 1, 32) = :token AND locked_by IS NULL) AS ours`,
          args,
        ),
        (r) => rowsOf(r.released).length === 0,
      ],
    ],
    (r, retried) => {
      if (rowsOf(r.released).length > 0) return;
      const present = flag(r.state, "present");
      if (retried && (!present || flag(r.state, "ours"))) return;
      throw leaseError(present, l);
    },
  );
}

/** Heartbeat: the lease now ends `visibility` seconds from now. Answers the new expiry. */
export function extendPlan(l: LeaseRef, visibility: number): Plan<number> {
  const args = { seq: l.seq, token: l.token, vis: visibility };
  return plan(
    [
      [
        "extended",
        stmt(
          `UPDATE messages SET lock_expiry = ${NOW} + :vis WHERE seq = :seq AND ${FENCE} RETURNING lock_expiry`,
          args,
        ),
      ],
      ["state", stmt(`SELECT ${PRESENT}`, { seq: l.seq })],
    ],
    (r) => {
      const row = rowsOf(r.extended)[0];
      if (row) return Number(row.lock_expiry);
      throw leaseError(flag(r.state, "present"), l);
    },
  );
}
