/**
 * Flow control: a queue's and its groups' settings (how many leases a group may hold at once, how
 * fast it may be claimed, whether it is paused), and the SQL that every claim and trigger uses to
 * obey them.
 *
 * Where they live: `tq_settings` holds the queue's row (id 1), `tq_group_settings` a row per group
 * given settings of its own. The queue's row exists while any setting, the queue's or a group's,
 * differs from the defaults: it is the switch (`FLOW_ON`) that sends claims and triggers down the
 * flow-aware path. Without it, every statement reads exactly what it read before flow control
 * existed (a lookup of a key that is not there reads no row).
 *
 * A group's state, in `groups.tq_busy` (the free index, `tq_groups_free`, holds the NULLs):
 * - NULL: it may be claimed now;
 * - 1 (HELD): none of its first `concurrency` messages (its window) is free: leases, parks and
 *   delays hold them. The lock index finds those that end (as it always did);
 * - 2 (PAUSED): its own pause (a paused queue is checked by every claim instead);
 * - 4 (RATED): waiting for its rate until `groups.tq_until`, the only state that sets it (its own
 *   index, `tq_groups_until`, brings it back).
 * Its rate's state is a GCRA "theoretical arrival time", `groups.tq_tat`, kept in `tq_rates` while
 * its row is gone (a group that empties keeps its pace).
 */
import type { GroupFlow, QueueFlow, RateLimit } from "../types.js";
import { NOW, type Plan, plan, rowsOf, stmt } from "./plan.js";

/** The group states of `groups.tq_busy` (see above). */
export const HELD = 1;
export const PAUSED = 2;
export const RATED = 4;

/** Whether any setting differs from the defaults (the queue's row exists): one key looked up. */
export const FLOW_ON = "EXISTS (SELECT 1 FROM tq_settings WHERE id = 1)";

/**
 * What a write made as if no flow setting were in force (a publish's group rows, a claim's walks)
 * fails with when one is: SQLite's own error for `json()` of text that is not JSON, raised on purpose
 * (SQL has no other way to abort a statement outside a trigger), so that the batch changes nothing.
 */
const FLOW_TURNED_ON = "malformed JSON";
/** `value`, or a failure while flow settings are in force. */
export const unlessFlowOn = (value: string) => `CASE WHEN ${FLOW_ON} THEN json('${FLOW_TURNED_ON}') ELSE ${value} END`;

/** Whether a write failed because flow settings were found in force: make it again as they ask. */
export function flowTurnedOn(e: unknown): boolean {
  return e instanceof Error && e.message.includes(FLOW_TURNED_ON);
}
/** Whether the queue is paused. */
export const QUEUE_PAUSED = "coalesce((SELECT paused FROM tq_settings WHERE id = 1), 0)";

/**
 * The clock inside triggers: the spec's Python transports may run them on SQLite 3.40, which has
 * no `unixepoch('subsec')`. The same clock, in milliseconds.
 */
export const TRIGGER_NOW = "((julianday('now') - 2440587.5) * 86400.0)";

const queue = (col: string) => `(SELECT ${col} FROM tq_settings WHERE id = 1)`;
const own = (col: string, gid: string) => `(SELECT ${col} FROM tq_group_settings WHERE group_id = ${gid})`;

/** The group's concurrency: its own, else the queue's, else 1. */
export const concurrencyOf = (gid: string) => `coalesce(${own("concurrency", gid)}, ${queue("concurrency")}, 1)`;
/** The group's emission interval (`period / limit` seconds; 0: no rate), its own rate's or the queue's. */
export const intervalOf = (gid: string) => `coalesce(${own("rate_interval", gid)}, ${queue("rate_interval")}, 0)`;
/** How far ahead of now its theoretical arrival time may be for a claim to go: `(burst - 1) × interval`. */
export const toleranceOf = (gid: string) =>
  `coalesce(CASE WHEN ${own("rate_interval", gid)} IS NOT NULL THEN ${own("rate_tolerance", gid)} ELSE ${queue("rate_tolerance")} END, 0)`;
const pausedOf = (gid: string) => `coalesce(${own("paused", gid)}, 0)`;

/** Messages of the group before message `m` (its place in the group, from 0). */
const placeOf = (m: string) =>
  `(SELECT count(*) FROM messages f WHERE f.group_id = ${m}.group_id AND f.seq < ${m}.seq)`;

/** Whether message `m` lies in its group's window (the first `concurrency`): for 1, it is the first. */
export const inWindow = (m: string) =>
  `CASE WHEN ${concurrencyOf(`${m}.group_id`)} = 1
        THEN ${m}.seq = (SELECT f.seq FROM messages f WHERE f.group_id = ${m}.group_id ORDER BY f.seq LIMIT 1)
        ELSE ${placeOf(m)} < ${concurrencyOf(`${m}.group_id`)} END`;

/**
 * The message a claim would lease in group `gid`: the first of its window that is free or whose
 * lock ended; NULL when there is none. Reads a row per message before it in the group.
 */
export const windowHead = (gid: string) =>
  `CASE WHEN ${concurrencyOf(gid)} = 1
        THEN (SELECT CASE WHEN m.locked_by IS NULL OR m.lock_expiry < ${NOW} THEN m.seq END
                FROM messages m WHERE m.group_id = ${gid} ORDER BY m.seq LIMIT 1)
        ELSE (SELECT CASE WHEN ${placeOf("m")} < ${concurrencyOf(gid)} THEN m.seq END
                FROM messages m WHERE m.group_id = ${gid} AND (m.locked_by IS NULL OR m.lock_expiry < ${NOW})
               ORDER BY m.seq LIMIT 1) END`;

/** Whether group `gid`'s window holds a free message (no lock at all). */
const windowFree = (gid: string) =>
  `coalesce((SELECT ${placeOf("m")} < ${concurrencyOf(gid)}
     FROM messages m WHERE m.group_id = ${gid} AND m.locked_by IS NULL ORDER BY m.seq LIMIT 1), 0)`;

/** When group `g` (a groups row) may next be claimed by its rate: its theoretical arrival time less the tolerance. */
const nextByRate = (g: string) => `(coalesce(${g}.tq_tat, 0) - ${toleranceOf(`${g}.group_id`)})`;
/** Whether its rate holds group `g` at time `t`. */
const rateHolds = (g: string, t: string) => `(${intervalOf(`${g}.group_id`)} > 0 AND ${nextByRate(g)} > ${t})`;

/** Whether group `g`'s rate lets a claim go at time `t` (for the lock index's path: a lapsed lease taken again). */
export const rateAllows = (g: string, t: string) => `NOT ${rateHolds(g, t)}`;

/** What a claim at stamp `t` makes of group `g`'s rate state: its new theoretical arrival time. */
const tatAfterClaim = (g: string, t: string) =>
  `CASE WHEN ${intervalOf(`${g}.group_id`)} > 0 THEN max(coalesce(${g}.tq_tat, 0), ${t}) + ${intervalOf(`${g}.group_id`)} END`;

/**
 * The state group `g` should be in at time `t`, from scratch: PAUSED, HELD (no free message in its
 * window), RATED, or NULL.
 */
export const stateOf = (g: string, t: string) =>
  `CASE WHEN ${pausedOf(`${g}.group_id`)} THEN ${PAUSED}
        WHEN NOT ${windowFree(`${g}.group_id`)} THEN ${HELD}
        WHEN ${rateHolds(g, t)} THEN ${RATED} END`;

/** The row update that puts group `gid` (held by locks) back once a message of its window is free. */
function freedUpdate(gid: string, extra = ""): string {
  return `UPDATE groups SET
    tq_busy = CASE WHEN ${rateHolds("groups", TRIGGER_NOW)} THEN ${RATED} END,
    tq_until = CASE WHEN ${rateHolds("groups", TRIGGER_NOW)} THEN ${nextByRate("groups")} END
  WHERE group_id = ${gid} AND tq_busy = ${HELD}${extra} AND ${windowFree(gid)}`;
}

/**
 * The flow-aware triggers, each the twin of one of the schema's that runs while no setting is in
 * force (src/core/schema.ts), made by the first settings write (FLOW_TRIGGER_STEPS).
 */
const FLOW_TRIGGERS = [
  // A claim: stamp the group, advance its rate, and keep it out of the free index while its window
  // is full (HELD) or its rate holds it (RATED, until its next claim may go).
  `CREATE TRIGGER IF NOT EXISTS tq_flow_leased AFTER UPDATE OF tq_lease ON messages
  WHEN NEW.tq_lease IS NOT NULL AND ${FLOW_ON} BEGIN
  UPDATE groups SET last_claimed_at = NEW.tq_claimed_at,
    tq_tat = ${tatAfterClaim("groups", "NEW.tq_claimed_at")},
    tq_busy = CASE WHEN NOT ${windowFree("NEW.group_id")} THEN ${HELD}
                   WHEN ${intervalOf("NEW.group_id")} > 0
                    AND ${tatAfterClaim("groups", "NEW.tq_claimed_at")} - ${toleranceOf("NEW.group_id")} > NEW.tq_claimed_at
                   THEN ${RATED} END,
    tq_until = CASE WHEN ${windowFree("NEW.group_id")} AND ${intervalOf("NEW.group_id")} > 0
                     AND ${tatAfterClaim("groups", "NEW.tq_claimed_at")} - ${toleranceOf("NEW.group_id")} > NEW.tq_claimed_at
                    THEN ${tatAfterClaim("groups", "NEW.tq_claimed_at")} - ${toleranceOf("NEW.group_id")} END
  WHERE group_id = NEW.group_id;
END`,
  `CREATE TRIGGER IF NOT EXISTS tq_flow_released AFTER UPDATE OF locked_by ON messages
  WHEN NEW.locked_by IS NULL AND ${FLOW_ON} BEGIN
  ${freedUpdate("NEW.group_id")};
END`,
  // A delete (an ack, a purge, the spec's ack): a group that empties goes, keeping its rate's state
  // in tq_rates while that still holds (expired ones go); one that stays may be free again.
  `CREATE TRIGGER IF NOT EXISTS tq_flow_deleted AFTER DELETE ON messages WHEN ${FLOW_ON} BEGIN
  INSERT INTO tq_rates (group_id, tat)
  SELECT group_id, tq_tat FROM groups WHERE group_id = OLD.group_id AND tq_tat > ${TRIGGER_NOW}
     AND NOT EXISTS (SELECT 1 FROM messages WHERE group_id = OLD.group_id)
  ON CONFLICT (group_id) DO UPDATE SET tat = excluded.tat;
  DELETE FROM groups WHERE group_id = OLD.group_id AND NOT EXISTS (SELECT 1 FROM messages WHERE group_id = OLD.group_id);
  DELETE FROM tq_rates WHERE tat <= ${TRIGGER_NOW};
  ${freedUpdate("OLD.group_id")};
END`,
];

/**
 * What a publish stores in a group row it creates, while flow settings are in force: its pause, and
 * its rate's state if it kept one while its row was gone (`gid` names it; `delayed` is true when
 * its first message is delayed). Lookups of absent keys: nothing is read while the switch is off.
 */
export const newGroupState = (gid: string, delayed: string) =>
  `CASE WHEN ${pausedOf(gid)} THEN ${PAUSED} WHEN ${delayed} THEN ${HELD}
        WHEN ${intervalOf(gid)} > 0 AND ${keptTat(gid)} - ${toleranceOf(gid)} > ${NOW} THEN ${RATED} END`;
const keptTat = (gid: string) => `coalesce((SELECT tat FROM tq_rates WHERE group_id = ${gid}), 0)`;
export const newGroupTat = (gid: string) => `(SELECT tat FROM tq_rates WHERE group_id = ${gid})`;
export const newGroupUntil = (gid: string, delayed: string) =>
  `CASE WHEN NOT ${pausedOf(gid)} AND NOT (${delayed}) AND ${intervalOf(gid)} > 0
         AND ${keptTat(gid)} - ${toleranceOf(gid)} > ${NOW} THEN ${keptTat(gid)} - ${toleranceOf(gid)} END`;

/**
 * After a publish into groups whose concurrency is above 1: a group whose window was full may now
 * hold a free message (sent only where flow settings are in force: see publishPlan).
 */
export function wakeGroupsStmt(groupIds: string[]) {
  const args: Record<string, string> = {};
  const names = groupIds.map((g, i) => {
    args[`w${i}`] = g;
    return `:w${i}`;
  });
  return stmt(
    `UPDATE groups SET
    tq_busy = CASE WHEN ${rateHolds("groups", NOW)} THEN ${RATED} END,
    tq_until = CASE WHEN ${rateHolds("groups", NOW)} THEN ${nextByRate("groups")} END
  WHERE group_id IN (${names.join(", ")}) AND tq_busy = ${HELD} AND ${concurrencyOf("groups.group_id")} > 1
    AND ${windowFree("groups.group_id")}`,
    args,
  );
}

// ---------------------------------------------------------------------------------------------
// the setters

/** A rate as stored: what was given, and its GCRA parameters. */
function rateColumns(rate: RateLimit | null | undefined) {
  if (rate === undefined) return { limit: null, period: null, burst: null, interval: null, tolerance: null };
  // A group's explicit "no rate" over the queue's: interval 0.
  if (rate === null) return { limit: 0, period: null, burst: null, interval: 0, tolerance: 0 };
  const interval = rate.period / rate.limit;
  const burst = rate.burst ?? 1;
  return { limit: rate.limit, period: rate.period, burst, interval, tolerance: (burst - 1) * interval };
}

function rateOf(row: Record<string, unknown>): RateLimit | null | undefined {
  if (row.rate_limit === null || row.rate_limit === undefined) return undefined;
  if (Number(row.rate_limit) === 0) return null;
  return { limit: Number(row.rate_limit), period: Number(row.rate_period), burst: Number(row.rate_burst) };
}

const COLUMNS = "concurrency, rate_limit, rate_period, rate_burst, rate_interval, rate_tolerance, paused";

/**
 * Puts every group back in the state its settings say (`where`: which groups, on `g`), and drops
 * the rate state of groups no rate applies to. Reads each group it looks at and its window; writes
 * only the groups whose state changes.
 */
function reconcile(where: string, args: Record<string, string | number | null> = {}) {
  return stmt(
    `UPDATE groups SET tq_busy = c.state, tq_until = c.until, tq_tat = c.tat
  FROM (SELECT s.group_id, s.state, CASE WHEN s.state = ${RATED} THEN s.next END AS until,
               CASE WHEN s.rated THEN s.tat END AS tat
          FROM (SELECT g.group_id, ${stateOf("g", NOW)} AS state, ${nextByRate("g")} AS next,
                       ${intervalOf("g.group_id")} > 0 AS rated, g.tq_tat AS tat
                  FROM groups g WHERE ${where}) AS s) AS c
 WHERE groups.group_id = c.group_id
   AND (groups.tq_busy IS NOT c.state OR groups.tq_until IS NOT c.until OR groups.tq_tat IS NOT c.tat)`,
    args,
  );
}

/**
 * The flow-aware triggers are made by a settings write, not by the schema: SQLite builds a table's
 * triggers into every statement that writes it, so each ack and claim of a queue that never used flow
 * control would pay to compile them. Made once (IF NOT EXISTS: later writes change nothing), they stay;
 * switched off, they read nothing.
 */
const FLOW_TRIGGER_STEPS = FLOW_TRIGGERS.map((sql, i) => [`trigger${i}`, stmt(sql)] as const);

/** The switch follows the settings: the queue's row is there while any setting (its own or a group's) is. */
const SWITCH = [
  `INSERT INTO tq_settings (id, updated_at) SELECT 1, ${NOW} WHERE EXISTS (SELECT 1 FROM tq_group_settings)
  ON CONFLICT (id) DO NOTHING`,
  `DELETE FROM tq_settings WHERE id = 1 AND concurrency IS NULL AND rate_limit IS NULL AND coalesce(paused, 0) = 0
   AND NOT EXISTS (SELECT 1 FROM tq_group_settings)`,
];

export interface QueueSettingsPatch {
  groupConcurrency?: number | undefined;
  /** null: no rate. */
  groupRate?: RateLimit | null | undefined;
  paused?: boolean | undefined;
}

/**
 * Changes the queue's settings (what is given; the rest stays), then the groups' states when their
 * concurrency or rate changed (every group is read once). Answers the settings after.
 */
export function setQueueSettingsPlan(p: QueueSettingsPatch): Plan<QueueFlow> {
  const rate = rateColumns(p.groupRate === null ? undefined : p.groupRate);
  const sets: string[] = [];
  const args: Record<string, string | number | null> = {};
  if (p.groupConcurrency !== undefined) {
    sets.push("concurrency = :conc");
    args.conc = p.groupConcurrency === 1 ? null : p.groupConcurrency;
  }
  if (p.groupRate !== undefined) {
    sets.push(
      "rate_limit = :limit, rate_period = :period, rate_burst = :burst, rate_interval = :interval, rate_tolerance = :tolerance",
    );
    Object.assign(args, rate);
  }
  if (p.paused !== undefined) {
    sets.push("paused = :paused");
    args.paused = p.paused ? 1 : null;
  }
  const changesGroups = p.groupConcurrency !== undefined || p.groupRate !== undefined;
  return plan(
    [
      ...FLOW_TRIGGER_STEPS,
      ["ensure", stmt(`INSERT INTO tq_settings (id, updated_at) VALUES (1, ${NOW}) ON CONFLICT (id) DO NOTHING`)],
      [
        "set",
        sets.length > 0
          ? stmt(`UPDATE tq_settings SET ${sets.join(", ")}, updated_at = ${NOW} WHERE id = 1`, args)
          : undefined,
      ],
      ["on", stmt(SWITCH[0] as string)],
      ["off", stmt(SWITCH[1] as string)],
      ["groups", changesGroups ? reconcile("true") : undefined],
      [
        "rates",
        changesGroups
          ? stmt(`DELETE FROM tq_rates WHERE NOT ${FLOW_ON} OR ${intervalOf("tq_rates.group_id")} = 0`)
          : undefined,
      ],
      ["after", stmt(`SELECT ${COLUMNS} FROM tq_settings WHERE id = 1`)],
    ],
    (r) => queueSettingsOf(rowsOf(r.after)[0]),
  );
}

function queueSettingsOf(row: Record<string, unknown> | undefined): QueueFlow {
  const rate = row === undefined ? undefined : rateOf(row);
  return {
    groupConcurrency: row?.concurrency == null ? 1 : Number(row.concurrency),
    groupRate: rate ?? null,
    paused: Number(row?.paused ?? 0) === 1,
  };
}

/** The queue's settings (the defaults when it has none). */
export function queueSettingsPlan(): Plan<QueueFlow> {
  return plan([["row", stmt(`SELECT ${COLUMNS} FROM tq_settings WHERE id = 1`)]], (r) =>
    queueSettingsOf(rowsOf(r.row)[0]),
  );
}

export interface GroupSettingsPatch {
  concurrency?: number | undefined;
  /** null: no rate, whatever the queue's. */
  rate?: RateLimit | null | undefined;
  paused?: boolean | undefined;
}

const GROUP_READ = `SELECT ${COLUMNS} FROM tq_group_settings WHERE group_id = :group`;

/** Sets a group's own settings (what is given; the rest stays), then its state. Answers what applies after. */
export function setGroupSettingsPlan(groupId: string, p: GroupSettingsPatch): Plan<GroupFlow> {
  const rate = rateColumns(p.rate);
  const args: Record<string, string | number | null> = {
    group: groupId,
    conc: p.concurrency ?? null,
    ...rate,
    paused: p.paused === undefined ? null : p.paused ? 1 : 0,
  };
  const keep = (col: string, given: boolean, value: string) => `${col} = ${given ? value : `tq_group_settings.${col}`}`;
  const rateGiven = p.rate !== undefined;
  return plan(
    [
      ...FLOW_TRIGGER_STEPS,
      [
        "set",
        stmt(
          `INSERT INTO tq_group_settings (group_id, ${COLUMNS}, updated_at)
  VALUES (:group, :conc, :limit, :period, :burst, :interval, :tolerance, :paused, ${NOW})
  ON CONFLICT (group_id) DO UPDATE SET ${[
    keep("concurrency", p.concurrency !== undefined, "excluded.concurrency"),
    keep("rate_limit", rateGiven, "excluded.rate_limit"),
    keep("rate_period", rateGiven, "excluded.rate_period"),
    keep("rate_burst", rateGiven, "excluded.rate_burst"),
    keep("rate_interval", rateGiven, "excluded.rate_interval"),
    keep("rate_tolerance", rateGiven, "excluded.rate_tolerance"),
    keep("paused", p.paused !== undefined, "excluded.paused"),
  ].join(", ")}, updated_at = excluded.updated_at`,
          args,
        ),
      ],
      ...groupAfter(groupId),
    ],
    (r) => groupFlowOf(groupId, r),
  );
}

/** Drops a group's own settings: the queue's apply again. */
export function resetGroupSettingsPlan(groupId: string): Plan<GroupFlow> {
  return plan(
    [
      ["removed", stmt("DELETE FROM tq_group_settings WHERE group_id = :group", { group: groupId })],
      ...groupAfter(groupId),
    ],
    (r) => groupFlowOf(groupId, r),
  );
}

/** What applies to a group: its own settings, the queue's, and its state. */
export function groupSettingsPlan(groupId: string): Plan<GroupFlow> {
  return plan(groupReads(groupId), (r) => groupFlowOf(groupId, r));
}

/** After a group's settings changed: drop an empty row, flip the switch, put the group in its state. */
function groupAfter(groupId: string) {
  return [
    [
      "empty",
      stmt(
        `DELETE FROM tq_group_settings WHERE group_id = :group AND concurrency IS NULL AND rate_limit IS NULL
   AND coalesce(paused, 0) = 0`,
        { group: groupId },
      ),
    ],
    ["on", stmt(SWITCH[0] as string)],
    ["off", stmt(SWITCH[1] as string)],
    ["state", reconcile("g.group_id = :group", { group: groupId })],
    ["rates", stmt(`DELETE FROM tq_rates WHERE group_id = :group AND ${intervalOf(":group")} = 0`, { group: groupId })],
    ...groupReads(groupId),
  ] as const;
}

function groupReads(groupId: string) {
  return [
    ["own", stmt(GROUP_READ, { group: groupId })],
    ["queue", stmt(`SELECT ${COLUMNS} FROM tq_settings WHERE id = 1`)],
    [
      "group",
      stmt(`SELECT tq_busy AS state, tq_until AS until, ${NOW} AS now FROM groups WHERE group_id = :group`, {
        group: groupId,
      }),
    ],
  ] as const;
}

function groupFlowOf(groupId: string, r: Record<string, import("@libsql/client").ResultSet>): GroupFlow {
  const ownRow = rowsOf(r.own)[0];
  const q = queueSettingsOf(rowsOf(r.queue)[0]);
  const g = rowsOf(r.group)[0];
  const ownRate = ownRow === undefined ? undefined : rateOf(ownRow);
  const own = {
    ...(ownRow?.concurrency != null ? { concurrency: Number(ownRow.concurrency) } : {}),
    ...(ownRate !== undefined ? { rate: ownRate } : {}),
    ...(ownRow?.paused != null && Number(ownRow.paused) === 1 ? { paused: true } : {}),
  };
  const state = g?.state == null ? null : Number(g.state);
  return {
    groupId,
    own,
    concurrency: own.concurrency ?? q.groupConcurrency,
    rate: ownRate === undefined ? q.groupRate : ownRate,
    paused: own.paused === true,
    queuePaused: q.paused,
    rateLimitedUntil: state === RATED && g?.until != null ? Number(g.until) : null,
  };
}
