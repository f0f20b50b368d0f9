/**
 * The claim: the spec's round-robin over groups with nothing in flight, reshaped so that its cost
 * follows what it takes, not what is in flight (src/core/schema.ts says what each index is for).
 */
import type { InStatement, ResultSet, Row } from "@libsql/client";
import { DEAD, leaseId } from "../../rules.js";
import type { Lease } from "../types.js";
import { NOW, type Plan, plan, rowsOf, stmt, UNLIMITED } from "./plan.js";
import { FLOW_ON, HELD, inWindow, RATED, rateAllows, unlessFlowOn, windowHead } from "./settings.js";

export interface ClaimArgs {
  /** This claim's fencing token (32 hex). */
  token: string;
  worker: string;
  visibility: number;
  /** How many leases, in distinct groups. */
  n: number;
  minPriority: number;
  maxAttempts: number;
  /** A value no lease expiry can take, unique to this claim: marks its poison messages. */
  marker: number;
  /**
   * Flow settings were in force at the last write (the transport remembers): the claim walks as they
   * ask. Without it, the claim is the default walks alone, and fails (`flowTurnedOn`), taking
   * nothing, if settings are in force after all: the caller claims again with `flow`.
   */
  flow: boolean;
}

export interface ClaimResult<E> {
  leases: Lease<E>[];
  /** Messages this claim moved to the dead letters instead of leasing (it claims again for them). */
  deadLettered: number;
  /** Flow settings are in force: a group may have had more to give than this claim's one lease. */
  flow: boolean;
}

/**
 * A claim's round-robin stamp: the database clock, but never at or below the newest stamp among
 * groups free to claim (one row from the end of `tq_groups_free`). The clock ticks in
 * milliseconds; in-process claims can come several to a millisecond, and a tie would send the
 * next claim back to the group created first instead of the one served longest ago. Evaluated
 * only when a claim takes something.
 */
const STAMP = `max(${NOW}, coalesce((SELECT max(last_claimed_at) FROM groups WHERE tq_busy IS NULL), 0) + 0.000001)`;

/**
 * The same walks where flow settings are in force (src/core/sql/settings.ts), and one more: a
 * paused queue takes nothing; a group's head is the first free message of its window (its first
 * `concurrency` messages); a lock that ended is taken again only inside its group's window and
 * when its group's rate allows; and groups whose rate held them come back when it lets them go
 * (`tq_groups_until`). Each walk starts only when the switch is on: with no setting in force none
 * of it reads a row.
 */
/**
 * What keeps each path's walks from starting when the other path is taken (a condition checked on
 * each row would still walk): the default walks get an empty index range while the switch is on;
 * the flow walks have the queue's settings row as their outer loop, absent while it is off (looking
 * up an absent key of a WITHOUT ROWID table reads no row).
 */
const FLOW_OFF_FROM = `CASE WHEN ${FLOW_ON} THEN 1e308 ELSE -1e308 END`;
const FLOW_OFF_UNTIL = `CASE WHEN ${FLOW_ON} THEN -1e308 ELSE ${NOW} END`;
const FLOW_GATE = "tq_settings st CROSS JOIN";
const FLOW_GATE_ON = "st.id = 1 AND coalesce(st.paused, 0) = 0 AND";

const FLOW_PICK = `UNION ALL
    SELECT * FROM (
      SELECT g.rowid AS rid, g.last_claimed_at AS lca, ${windowHead("g.group_id")} AS head
        FROM ${FLOW_GATE} groups g
       WHERE ${FLOW_GATE_ON} g.tq_busy IS NULL AND g.priority >= :min AND head IS NOT NULL
       ORDER BY g.last_claimed_at, g.rowid LIMIT :n)
    UNION ALL
    SELECT * FROM (
      SELECT g.rowid AS rid, g.last_claimed_at AS lca, m.seq AS head
        FROM ${FLOW_GATE} messages m JOIN groups g ON g.group_id = m.group_id
       WHERE ${FLOW_GATE_ON} m.locked_by IS NOT NULL AND m.lock_expiry < ${NOW}
         AND g.tq_busy = ${HELD} AND g.priority >= :min
         AND ${inWindow("m")} AND ${rateAllows("g", NOW)}
       ORDER BY m.lock_expiry LIMIT :n)
    UNION ALL
    SELECT * FROM (
      SELECT g.rowid AS rid, g.last_claimed_at AS lca, ${windowHead("g.group_id")} AS head
        FROM ${FLOW_GATE} groups g
       WHERE ${FLOW_GATE_ON} g.tq_until IS NOT NULL AND g.tq_until <= ${NOW} AND g.tq_busy = ${RATED} AND g.priority >= :min
         AND head IS NOT NULL
       ORDER BY g.tq_until LIMIT :n)`;

/**
 * The spec's claim, reshaped so that its cost follows what it takes, not what is in flight:
 * groups with nothing in flight are walked in round-robin order on the free index (never-claimed
 * first, ties by creation), and groups held by a lease or park that has ended are found on the
 * lock index (oldest first); of both, the first `n` go. Each group's first message is its head:
 * taken if free or lapsed. One statement leases them all (the `tq_messages_leased` trigger stamps
 * and hides their groups); the stamps grow by a microsecond per pick, so `n` leases in one claim
 * line up as `n` single claims would.
 *
 * A head past its attempts is not leased but marked with the claim's negative marker (never a
 * lease expiry), then moved to the dead letters by the two statements after.
 */
function claimText(single: boolean, guard: string, flow: boolean): string {
  const pick = `SELECT head, lca, rid FROM (
    SELECT * FROM (
      SELECT g.rowid AS rid, g.last_claimed_at AS lca,
             (SELECT CASE WHEN m.locked_by IS NULL OR m.lock_expiry < ${NOW} THEN m.seq END
                FROM messages m WHERE m.group_id = g.group_id ORDER BY m.seq LIMIT 1) AS head
        FROM groups g
       WHERE g.tq_busy IS NULL${flow ? ` AND g.last_claimed_at >= ${FLOW_OFF_FROM}` : ""} AND g.priority >= :min AND head IS NOT NULL
       ORDER BY g.last_claimed_at, g.rowid LIMIT :n)
    UNION ALL
    SELECT * FROM (
      SELECT g.rowid AS rid, g.last_claimed_at AS lca, m.seq AS head
        FROM messages m JOIN groups g ON g.group_id = m.group_id
       WHERE m.locked_by IS NOT NULL AND m.lock_expiry < ${flow ? FLOW_OFF_UNTIL : NOW}
         AND g.tq_busy IS NOT NULL AND g.priority >= :min
         AND m.seq = (SELECT f.seq FROM messages f WHERE f.group_id = m.group_id ORDER BY f.seq LIMIT 1)
       ORDER BY m.lock_expiry LIMIT :n)
    ${flow ? FLOW_PICK : ""}) AS pick
   WHERE ${guard}
   ORDER BY lca, rid LIMIT ${flow ? ":n" : unlessFlowOn(":n")}`;
  const set = (stamp: string) => `UPDATE messages
   SET locked_by   = CASE WHEN coalesce(tq_attempts, 0) < :max THEN :worker ELSE '${DEAD}' END,
       lock_expiry = CASE WHEN coalesce(tq_attempts, 0) < :max THEN ${NOW} + :vis ELSE :marker END,
       tq_lease = :token || '|' || :worker,
       tq_attempts = coalesce(tq_attempts, 0) + 1,
       tq_claimed_at = ${stamp}`;
  const returning = `RETURNING seq, group_id, event, locked_by, lock_expiry, tq_attempts AS attempts, tq_claimed_at AS stamp, tq_trace AS trace, ${flow ? FLOW_ON : "0"} AS flow`;
  // One lease (the usual claim): a scalar pick, the cheapest form in rows read.
  return single
    ? `${set(STAMP)}\n WHERE seq = (SELECT head FROM (${pick}))\n${returning}`
    : `WITH pick AS (${pick})
${set("p.stamp")}
  FROM (SELECT head, ${STAMP} + (row_number() OVER (ORDER BY lca, rid) - 1) * 0.000001 AS stamp FROM pick) AS p
 WHERE messages.seq = p.head
${returning}`;
}

/** The claim's text for one lease or several, first request or resend: built once each. */
const claimTexts = new Map<string, string>();

function claimStatement(a: ClaimArgs, guard: string): InStatement {
  const cacheKey = `${a.n === 1}${a.flow}${guard}`;
  let text = claimTexts.get(cacheKey);
  if (text === undefined) {
    text = claimText(a.n === 1, guard, a.flow);
    claimTexts.set(cacheKey, text);
  }
  return stmt(text, {
    n: a.n,
    min: a.minPriority,
    max: a.maxAttempts,
    worker: a.worker,
    vis: a.visibility,
    marker: a.marker,
    token: a.token,
  });
}

/** A resend must not lease more under one token: the leases of this token that are still live. */
const OWN_LEASES = `messages WHERE locked_by IS NOT NULL AND lock_expiry >= ${NOW} AND tq_lease = :token || '|' || locked_by`;

const poisoned = (r: { leased?: ResultSet }) => rowsOf(r.leased).some((row) => row.locked_by === DEAD);

export function claimPlan<E>(a: ClaimArgs): Plan<ClaimResult<E>> {
  const build = (resend: boolean) =>
    plan(
      [
        [
          "earlier",
          resend
            ? stmt(
                `SELECT seq, group_id, event, locked_by, lock_expiry, tq_attempts AS attempts, tq_claimed_at AS stamp, tq_trace AS trace FROM ${OWN_LEASES}`,
                { token: a.token },
              )
            : undefined,
        ],
        ["leased", claimStatement(a, resend ? `NOT EXISTS (SELECT 1 FROM ${OWN_LEASES})` : "true")],
        [
          "dead",
          a.maxAttempts < UNLIMITED
            ? stmt(
                `INSERT INTO tq_dead_letters (seq, group_id, event, priority, attempts, reason, dead_at, trace)
SELECT m.seq, m.group_id, m.event, coalesce(g.priority, 0), m.tq_attempts - 1, 'max_attempts', ${NOW}, m.tq_trace
  FROM messages m LEFT JOIN groups g ON g.group_id = m.group_id
 WHERE m.locked_by IS NOT NULL AND m.lock_expiry = :marker
ON CONFLICT (seq) DO NOTHING`,
                { marker: a.marker },
              )
            : undefined,
          poisoned,
        ],
        [
          "removed",
          a.maxAttempts < UNLIMITED
            ? stmt("DELETE FROM messages WHERE locked_by IS NOT NULL AND lock_expiry = :marker", { marker: a.marker })
            : undefined,
          poisoned,
        ],
      ],
      (r) => {
        const rows = [...rowsOf(r.earlier), ...rowsOf(r.leased)];
        const live = rows.filter((row) => row.locked_by === a.worker);
        live.sort((x, y) => Number(x.stamp) - Number(y.stamp));
        return {
          leases: live.map((row) => toLease<E>(row, a.token, a.worker)),
          deadLettered: rows.length - live.length,
          flow: rowsOf(r.leased).some((row) => Number(row.flow) === 1),
        };
      },
    );
  return { ...build(false), resend: build(true) };
}

function toLease<E>(row: Row, token: string, workerId: string): Lease<E> {
  const seq = Number(row.seq);
  return {
    id: leaseId.of(seq, token),
    seq,
    groupId: String(row.group_id),
    event: JSON.parse(String(row.event)) as E,
    workerId,
    expiresAt: Number(row.lock_expiry),
    attempts: Number(row.attempts),
    ...(typeof row.trace === "string" ? { traceparent: row.trace } : {}),
  };
}
