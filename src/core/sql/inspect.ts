/** What is in the queue, read without reading the queue: counters, groups worth watching, the next due moment. */
import type { Row } from "@libsql/client";
import { DELAYED, GROUP_COUNT_CAP, PARKED } from "../../rules.js";
import type { GroupInfo, QueueStats } from "../types.js";
import { NOW, type Plan, plan, rowsOf, stmt } from "./plan.js";
import { FLOW_ON, QUEUE_PAUSED } from "./settings.js";

/** How many of the oldest messages stats reads for the oldest age and the groups' lag. */
export const AGE_WINDOW = 20;
/** How many groups' lag stats answers. */
export const LAG_GROUPS = 5;

/**
 * Counts from the table sizes (a b-tree count, not a scan) and one walk of the live locks on the
 * lock index: the cost follows what is in flight, not the depth. Ages from the first AGE_WINDOW
 * messages by seq (seqs grow with publish time): a message's age runs from its publish, or, for a
 * delayed one, from when it came due; one not due yet is not behind anything. A row written by
 * the spec's Python transports (or before schema 5) has no publish time and no age.
 */
export function statsPlan(): Plan<QueueStats> {
  return plan(
    [
      [
        "counts",
        stmt(`SELECT
  (SELECT count(*) FROM messages) AS total,
  (SELECT count(*) FROM groups) AS groups,
  (SELECT count(*) FROM tq_dead_letters) AS dead_letters,
  live.in_flight, live.parked, live.delayed, live.held_groups,
  ${QUEUE_PAUSED} AS paused,
  CASE WHEN ${FLOW_ON} THEN (SELECT count(*) FROM tq_group_settings WHERE paused = 1) ELSE 0 END AS paused_groups,
  CASE WHEN ${FLOW_ON} THEN (SELECT count(*) FROM groups WHERE tq_until IS NOT NULL) ELSE 0 END AS rate_limited,
  ${NOW} AS now
FROM (SELECT coalesce(sum(locked_by NOT IN ('${PARKED}', '${DELAYED}')), 0) AS in_flight,
             coalesce(sum(locked_by = '${PARKED}'), 0) AS parked,
             coalesce(sum(locked_by = '${DELAYED}'), 0) AS delayed,
             -- a group is held when its first message is locked (a delayed one may sit further back)
             count(DISTINCT CASE WHEN seq = (SELECT f.seq FROM messages f WHERE f.group_id = m.group_id
                                              ORDER BY f.seq LIMIT 1) THEN group_id END) AS held_groups
        FROM messages m WHERE locked_by IS NOT NULL AND lock_expiry >= ${NOW}) AS live`),
      ],
      [
        "oldest",
        stmt(`SELECT group_id, ${NOW} - coalesce(CASE WHEN locked_by = '${DELAYED}' THEN lock_expiry END, tq_published_at) AS age
  FROM (SELECT group_id, locked_by, lock_expiry, tq_published_at FROM messages ORDER BY seq LIMIT ${AGE_WINDOW})
 WHERE NOT (locked_by IS NOT NULL AND locked_by = '${DELAYED}' AND lock_expiry > ${NOW})
   AND (tq_published_at IS NOT NULL OR locked_by = '${DELAYED}')`),
      ],
    ],
    (r) => {
      const row = rowsOf(r.counts)[0] as Row;
      const total = Number(row.total);
      const groups = Number(row.groups);
      const inFlight = Number(row.in_flight);
      const parked = Number(row.parked);
      const delayed = Number(row.delayed);
      const ready = Math.max(0, groups - Number(row.held_groups));
      return {
        ready,
        waiting: Math.max(0, total - inFlight - parked - delayed - ready),
        inFlight,
        parked,
        delayed,
        groups,
        deadLetters: Number(row.dead_letters),
        paused: Number(row.paused) === 1,
        pausedGroups: Number(row.paused_groups),
        rateLimitedGroups: Number(row.rate_limited),
        now: Number(row.now),
        ...agesOf(rowsOf(r.oldest)),
      };
    },
  );
}

/** The oldest age among the rows, and each group's (its oldest message's), the most behind first. */
function agesOf(rows: Row[]): Pick<QueueStats, "oldestAge" | "lag"> {
  const byGroup = new Map<string, number>();
  for (const row of rows) {
    const group = String(row.group_id);
    const age = Math.max(0, Number(row.age));
    if (age > (byGroup.get(group) ?? -1)) byGroup.set(group, age);
  }
  const lag = [...byGroup]
    .map(([groupId, age]) => ({ groupId, age }))
    .sort((a, b) => b.age - a.age)
    .slice(0, LAG_GROUPS);
  return { oldestAge: lag[0]?.age ?? null, lag };
}

/** How many lock index entries per group asked for `groups()` looks at, live and ended each. */
const LOCK_WINDOW = 4;

/**
 * Groups worth watching, without reading the queue: those whose first message is locked (leased,
 * parked or delayed; newest lock first), then the next ones in round-robin order, as a claim finds
 * them: on the free index, and those whose lease, park or delay has ended (their group stays out
 * of the free index until a claim takes them; oldest first); each with its messages counted up to
 * GROUP_COUNT_CAP. The lock index is read in two windows of LOCK_WINDOW × `limit` entries (live
 * locks, ended locks), the free index for `limit` groups, then at most `limit` × (GROUP_COUNT_CAP
 * + a few) rows: whatever the depth, or how many locks there are.
 */
export function groupsPlan(limit: number): Plan<GroupInfo[]> {
  /** A window of the lock index: its first entries, in the order given. */
  const locks = (when: string, order: string) =>
    `(SELECT seq, group_id, lock_expiry FROM messages WHERE locked_by IS NOT NULL AND ${when}
       ORDER BY lock_expiry ${order} LIMIT :scan)`;
  const first = "m.seq = (SELECT f.seq FROM messages f WHERE f.group_id = m.group_id ORDER BY f.seq LIMIT 1)";
  return plan(
    [
      [
        "groups",
        stmt(
          `WITH picked AS (
  SELECT * FROM (
    SELECT m.group_id, 0 AS part, -m.lock_expiry AS ord, 0 AS rid FROM ${locks(`lock_expiry >= ${NOW}`, "DESC")} AS m
     WHERE ${first} ORDER BY m.lock_expiry DESC LIMIT :limit)
  UNION ALL
  SELECT * FROM (
    SELECT g.group_id, 1 AS part, g.last_claimed_at AS ord, g.rowid AS rid FROM groups g
     WHERE g.tq_busy IS NULL ORDER BY g.last_claimed_at, g.rowid LIMIT :limit)
  UNION ALL
  SELECT * FROM (
    SELECT m.group_id, 1 AS part, g.last_claimed_at AS ord, g.rowid AS rid
      FROM ${locks(`lock_expiry < ${NOW}`, "ASC")} AS m JOIN groups g ON g.group_id = m.group_id
     WHERE ${first} ORDER BY m.lock_expiry LIMIT :limit))
SELECT p.group_id, coalesce(g.priority, 0) AS priority, coalesce(g.last_claimed_at, 0) AS last_claimed_at,
       (SELECT count(*) FROM (SELECT 1 FROM messages c WHERE c.group_id = p.group_id LIMIT ${GROUP_COUNT_CAP})) AS messages,
       h.locked_by AS holder, h.lock_expiry >= ${NOW} AS live
  FROM (SELECT group_id, min(part) AS part, min(ord) AS ord, min(rid) AS rid FROM picked GROUP BY group_id) AS p
  LEFT JOIN groups g ON g.group_id = p.group_id
  LEFT JOIN messages h ON h.seq = (SELECT f.seq FROM messages f WHERE f.group_id = p.group_id ORDER BY f.seq LIMIT 1)
 ORDER BY p.part, p.ord, p.rid
 LIMIT :limit`,
          { limit, scan: LOCK_WINDOW * limit },
        ),
      ],
    ],
    (r) =>
      rowsOf(r.groups).map((row) => {
        const holder = row.holder === null ? null : String(row.holder);
        const live = Number(row.live) === 1;
        return {
          groupId: String(row.group_id),
          messages: Number(row.messages),
          priority: Number(row.priority),
          inFlight: live && holder !== null && holder !== PARKED && holder !== DELAYED,
          parked: live && (holder === PARKED || holder === DELAYED),
          lastClaimedAt: Number(row.last_claimed_at),
        };
      }),
  );
}

/**
 * When something held by time may become deliverable: the earliest lease expiry, park end or
 * delayed message's time still ahead (epoch seconds, database clock), and the database's now.
 */
export function nextDuePlan(): Plan<{ next: number | null; now: number }> {
  return plan(
    [
      [
        "next",
        stmt(`SELECT min((SELECT min(lock_expiry) FROM messages WHERE locked_by IS NOT NULL AND lock_expiry >= ${NOW}),
           coalesce(CASE WHEN ${FLOW_ON} THEN (SELECT min(tq_until) FROM groups WHERE tq_until IS NOT NULL) END, 1e308)) AS next,
       ${NOW} AS now`),
      ],
    ],
    (r) => {
      const row = rowsOf(r.next)[0] as Row;
      return { next: row.next === null || Number(row.next) >= 1e308 ? null : Number(row.next), now: Number(row.now) };
    },
  );
}
