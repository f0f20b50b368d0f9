/** Schedules (`tq_schedules`): publishes on a clock, each tick's publish keyed so that it is stored once. */
import { NOW, type Plan, plan, rowsOf, stmt } from "./plan.js";

/** A schedule as stored. */
export interface ScheduleRow {
  name: string;
  groupId: string;
  /** The event, as JSON text. */
  event: string;
  priority: number;
  cron: string | null;
  timeZone: string | null;
  every: number | null;
  paused: boolean;
  /** Its next tick (epoch seconds), or null while paused. */
  nextAt: number | null;
  /** Its last tick published, or null. */
  lastAt: number | null;
  /** Ticks published. */
  runs: number;
  createdAt: number;
  updatedAt: number;
}

const COLUMNS =
  "name, group_id, event, priority, cron, time_zone, every, paused, next_at, last_at, runs, created_at, updated_at";

function toRow(r: Record<string, unknown>): ScheduleRow {
  const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return {
    name: String(r.name),
    groupId: String(r.group_id),
    event: String(r.event),
    priority: Number(r.priority),
    cron: r.cron === null ? null : String(r.cron),
    timeZone: r.time_zone === null ? null : String(r.time_zone),
    every: num(r.every),
    paused: Number(r.paused) === 1,
    nextAt: num(r.next_at),
    lastAt: num(r.last_at),
    runs: Number(r.runs),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

/** The database's clock. */
export function clockPlan(): Plan<number> {
  return plan([["now", stmt(`SELECT ${NOW} AS now`)]], (r) => Number(rowsOf(r.now)[0]?.now));
}

/**
 * Makes or replaces a schedule (its count of runs and creation time stay on a replace; its next
 * tick is the one given). Answers it as stored.
 */
export function putSchedulePlan(
  s: Omit<ScheduleRow, "lastAt" | "runs" | "createdAt" | "updatedAt">,
): Plan<{ schedule: ScheduleRow; created: boolean }> {
  return plan(
    [
      ["existed", stmt("SELECT 1 AS x FROM tq_schedules WHERE name = :name", { name: s.name })],
      [
        "put",
        stmt(
          `INSERT INTO tq_schedules (${COLUMNS})
  VALUES (:name, :group, :event, :priority, :cron, :tz, :every, :paused, :next, NULL, 0, ${NOW}, ${NOW})
  ON CONFLICT (name) DO UPDATE SET group_id = excluded.group_id, event = excluded.event, priority = excluded.priority,
    cron = excluded.cron, time_zone = excluded.time_zone, every = excluded.every, paused = excluded.paused,
    next_at = excluded.next_at, updated_at = excluded.updated_at`,
          {
            name: s.name,
            group: s.groupId,
            event: s.event,
            priority: s.priority,
            cron: s.cron,
            tz: s.timeZone,
            every: s.every,
            paused: s.paused ? 1 : 0,
            next: s.nextAt,
          },
        ),
      ],
      ["row", stmt(`SELECT ${COLUMNS} FROM tq_schedules WHERE name = :name`, { name: s.name })],
    ],
    (r) => ({
      schedule: toRow(rowsOf(r.row)[0] as Record<string, unknown>),
      created: rowsOf(r.existed).length === 0,
    }),
  );
}

export function listSchedulesPlan(): Plan<ScheduleRow[]> {
  return plan([["rows", stmt(`SELECT ${COLUMNS} FROM tq_schedules ORDER BY name LIMIT 1000`)]], (r) =>
    rowsOf(r.rows).map((row) => toRow(row as Record<string, unknown>)),
  );
}

export function getSchedulePlan(name: string): Plan<ScheduleRow | undefined> {
  return plan([["row", stmt(`SELECT ${COLUMNS} FROM tq_schedules WHERE name = :name`, { name })]], (r) => {
    const row = rowsOf(r.row)[0];
    return row === undefined ? undefined : toRow(row as Record<string, unknown>);
  });
}

export function deleteSchedulePlan(name: string): Plan<boolean> {
  return plan(
    [["deleted", stmt("DELETE FROM tq_schedules WHERE name = :name", { name })]],
    (r) => r.deleted.rowsAffected > 0,
  );
}

/** The schedules due now (their next tick passed), oldest first, with the database's clock. */
export function dueSchedulesPlan(limit: number): Plan<{ due: ScheduleRow[]; now: number }> {
  return plan(
    [
      [
        "due",
        stmt(
          `SELECT ${COLUMNS} FROM tq_schedules WHERE next_at IS NOT NULL AND next_at <= ${NOW} ORDER BY next_at LIMIT :limit`,
          { limit },
        ),
      ],
      ["now", stmt(`SELECT ${NOW} AS now`)],
    ],
    (r) => ({
      due: rowsOf(r.due).map((row) => toRow(row as Record<string, unknown>)),
      now: Number(rowsOf(r.now)[0]?.now),
    }),
  );
}

/**
 * A tick published: the next one is set, unless another firer moved it first (the next tick as
 * read, `expected`, no longer stands). Answers whether this one did.
 */
export function advanceSchedulePlan(name: string, expected: number, tick: number, next: number | null): Plan<boolean> {
  return plan(
    [
      [
        "advanced",
        stmt(
          "UPDATE tq_schedules SET next_at = :next, last_at = :tick, runs = runs + 1 WHERE name = :name AND next_at = :expected",
          { name, expected, tick, next },
        ),
      ],
    ],
    (r) => r.advanced.rowsAffected > 0,
  );
}

/** The earliest next tick of a schedule that is not paused. */
export function nextSchedulePlan(): Plan<number | null> {
  return plan([["next", stmt("SELECT min(next_at) AS next FROM tq_schedules WHERE next_at IS NOT NULL")]], (r) => {
    const v = rowsOf(r.next)[0]?.next;
    return v === null || v === undefined ? null : Number(v);
  });
}
