/**
 * Schedules: a message published on a clock (a cron expression, or every N seconds), kept in the
 * queue's own database (`tq_schedules`, ./sql/schedules.ts).
 *
 * Whoever fires them (the Worker's QueueWriter on its alarm, or your Cron Trigger or timer through
 * `runSchedules()`) publishes each due schedule's latest tick with the idempotency key
 * `schedule:<name>:<created>:<tick>`, then moves its next tick on if nobody did meanwhile. So a
 * tick is stored once however many fire it at once, or again after a crash, an eviction or an
 * alarm's retry; and after downtime a schedule publishes one catch-up tick (its latest), not one
 * per tick missed. Ticks are on the database's clock.
 */
import { Cron } from "croner";
import { describe, everyProblem, scheduleNameProblem, timeZoneProblem } from "../rules.js";
import { invalid, QueueError } from "./errors.js";
import * as sql from "./sql/index.js";
import type { ScheduleRow } from "./sql/schedules.js";
import type { Schedule } from "./types.js";
import { checkBoolean, checkId, checkObject, checkPriority, encodeEvent } from "./validate.js";

/** Schedules fired per run (the rest wait for the next). */
const RUN_LIMIT = 100;

export interface CheckedSchedule {
  name: string;
  groupId: string;
  event: string;
  priority: number;
  cron: string | null;
  timeZone: string | null;
  every: number | null;
  paused: boolean;
}

const FIELDS = ["groupId", "event", "priority", "cron", "timeZone", "every", "paused"];

/** A schedule's name and settings, checked (INVALID_ARGUMENT naming the field). */
export function checkSchedule(name: unknown, input: unknown): CheckedSchedule {
  const problem = scheduleNameProblem(name);
  if (problem !== undefined) throw invalid("name", problem);
  const o = checkObject("schedule", input as object) as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!FIELDS.includes(k))
      throw invalid(`schedule.${k}`, `unknown field (expected ${FIELDS.map((f) => `"${f}"`).join(", ")})`);
  }
  if ((o.cron === undefined) === (o.every === undefined)) {
    throw invalid("cron", "give either cron (five fields) or every (seconds), not both, not neither");
  }
  let every: number | null = null;
  if (o.every !== undefined) {
    const p = everyProblem(o.every);
    if (p !== undefined) throw invalid("every", p);
    every = o.every as number;
    if (o.timeZone !== undefined) throw invalid("timeZone", "goes with cron, not every");
  }
  let timeZone: string | null = null;
  if (o.timeZone !== undefined) {
    const p = timeZoneProblem(o.timeZone);
    if (p !== undefined) throw invalid("timeZone", p);
    timeZone = o.timeZone as string;
  }
  const cron = o.cron === undefined ? null : checkCron(o.cron, timeZone);
  return {
    name: name as string,
    groupId: checkId("groupId", o.groupId),
    event: encodeEvent("event", o.event),
    priority: checkPriority("priority", o.priority ?? 0),
    cron,
    timeZone,
    every,
    paused: o.paused === undefined ? false : checkBoolean("paused", o.paused),
  };
}

/** Five fields, as croner reads them (its own words for what is wrong, after the field's name). */
function checkCron(v: unknown, timeZone: string | null): string {
  if (typeof v !== "string" || v.length > 256)
    throw invalid("cron", `must be a string of five fields, got ${describe(v)}`);
  const fields = v.trim().split(/\s+/);
  if (fields.length !== 5) {
    throw invalid("cron", `must have five fields (minute hour day-of-month month day-of-week), got ${fields.length}`);
  }
  try {
    cronOf(fields.join(" "), timeZone);
  } catch (e) {
    throw invalid("cron", String((e as Error).message).replace(/^CronPattern: /, ""));
  }
  return fields.join(" ");
}

function cronOf(pattern: string, timeZone: string | null): Cron {
  return new Cron(pattern, { paused: true, timezone: timeZone ?? "UTC" });
}

/** The schedule's latest tick at or before `t` (epoch seconds), or null when it has none. */
export function tickAtOrBefore(s: Pick<CheckedSchedule, "cron" | "timeZone" | "every">, t: number): number | null {
  if (s.every !== null) return Math.floor(t / s.every) * s.every;
  const c = cronOf(s.cron as string, s.timeZone);
  const before = c.previousRuns(1, new Date(t * 1000))[0];
  const next = c.nextRun(before ?? new Date((t - 1) * 1000));
  if (next !== null && next.getTime() / 1000 <= t) return next.getTime() / 1000;
  return before === undefined ? null : before.getTime() / 1000;
}

/** The schedule's first tick after `t`, or null when it has none. */
export function tickAfter(s: Pick<CheckedSchedule, "cron" | "timeZone" | "every">, t: number): number | null {
  if (s.every !== null) return (Math.floor(t / s.every) + 1) * s.every;
  const next = cronOf(s.cron as string, s.timeZone).nextRun(new Date(Math.floor(t) * 1000 + 1000 - 1));
  return next === null ? null : next.getTime() / 1000;
}

export function scheduleOf(row: ScheduleRow): Schedule {
  return {
    name: row.name,
    groupId: row.groupId,
    event: JSON.parse(row.event),
    priority: row.priority,
    cron: row.cron,
    timeZone: row.timeZone,
    every: row.every,
    paused: row.paused,
    nextAt: row.nextAt,
    lastAt: row.lastAt,
    runs: row.runs,
  };
}

/** What a queue needs to fire its schedules: read and write its plans, and publish. */
export interface ScheduleHost {
  readPlan<T>(plan: sql.Plan<T>): Promise<T>;
  writePlan<T>(plan: sql.Plan<T>): Promise<T>;
  publish(groupId: string, event: unknown, priority: number, options: { idempotencyKey: string }): Promise<number>;
}

/** What a run did: ticks published, and the next tick to come (epoch seconds, database clock). */
export interface ScheduleRun {
  published: number;
  nextAt: number | null;
}

/**
 * Publishes each due schedule's latest tick (once, whoever else runs at the same time), then moves
 * it on to its next tick.
 */
export async function runSchedules(host: ScheduleHost): Promise<ScheduleRun> {
  const { due, now } = await host.readPlan(sql.dueSchedulesPlan(RUN_LIMIT));
  let published = 0;
  for (const s of due) {
    if (s.nextAt === null) continue;
    const tick = Math.max(s.nextAt, tickAtOrBefore(s, now) ?? s.nextAt);
    try {
      await host.publish(s.groupId, JSON.parse(s.event), s.priority, {
        idempotencyKey: `schedule:${s.name}:${s.createdAt}:${tick}`,
      });
    } catch (e) {
      // The schedule changed between two firers of one tick: the other one published it.
      if (!(e instanceof QueueError && e.code === "IDEMPOTENCY_CONFLICT")) throw e;
    }
    if (await host.writePlan(sql.advanceSchedulePlan(s.name, s.nextAt, tick, tickAfter(s, Math.max(tick, now))))) {
      published++;
    }
  }
  const nextAt = await host.readPlan(sql.nextSchedulePlan());
  return { published, nextAt };
}
