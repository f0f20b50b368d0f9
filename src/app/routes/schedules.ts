/** Schedules: publishes on a clock, fired by the queue's writer (or your own `runSchedules()`). */
import { Hono } from "hono";
import { ScheduleAnswer, ScheduleBody, ScheduleList, SchedulePath } from "../../contract/schemas.js";
import type * as T from "../../contract/types.js";
import { scheduleInputFromWire, scheduleToWire } from "../../contract/wire.js";
import type { AppEnv } from "../context.js";
import { HttpError } from "../errors.js";
import { defineRoute, handle } from "../route.js";

const EXAMPLE = {
  name: "nightly-report",
  group_id: "reports",
  event: { kind: "nightly" },
  priority: 0,
  cron: "0 2 * * *",
  time_zone: "Europe/Paris",
  every: null,
  paused: false,
  next_at: 1796259600,
  last_at: 1796173200,
  runs: 12,
};

export const putSchedule = defineRoute({
  method: "put",
  path: "/v1/schedules/{name}",
  operationId: "putSchedule",
  tag: "Queues",
  summary: "Make or replace a schedule",
  description:
    "Publishes `event` into `group_id` on each tick of `cron` (five fields, UTC or `time_zone`) or every `every` seconds. The queue's writer fires it on its alarm: each tick is published once (an idempotency key per schedule and tick), however many fire it, across evictions and retries; after downtime, one catch-up tick. A bad cron is a 400 naming `cron`.",
  scope: "manage",
  request: {
    params: SchedulePath,
    body: {
      schema: ScheduleBody,
      required: true,
      example: { group_id: "reports", event: { kind: "nightly" }, cron: "0 2 * * *" },
    },
  },
  responses: {
    200: { description: "Replaced.", schema: ScheduleAnswer, example: { ...EXAMPLE, created: false } },
    201: { description: "Made.", schema: ScheduleAnswer, example: { ...EXAMPLE, created: true } },
  },
});

export const listSchedules = defineRoute({
  method: "get",
  path: "/v1/schedules",
  operationId: "listSchedules",
  tag: "Queues",
  summary: "The schedules, with their next run",
  scope: "read",
  responses: { 200: { description: "By name.", schema: ScheduleList, example: { schedules: [EXAMPLE] } } },
});

export const deleteSchedule = defineRoute({
  method: "delete",
  path: "/v1/schedules/{name}",
  operationId: "deleteSchedule",
  tag: "Queues",
  summary: "Delete a schedule",
  scope: "manage",
  request: { params: SchedulePath },
  responses: { 204: { description: "Deleted." } },
  errors: ["NOT_FOUND"],
});

export const SCHEDULE_ROUTES = [putSchedule, listSchedules, deleteSchedule] as const;

export const schedules = new Hono<AppEnv>();

handle(schedules, putSchedule, async (c) => {
  const made = await (await c.var.queue()).putSchedule(
    c.req.valid("param").name,
    scheduleInputFromWire(c.req.valid("json")),
  );
  return c.json(
    { ...scheduleToWire(made), created: made.created } satisfies T.ScheduleAnswer,
    made.created ? 201 : 200,
  );
});

handle(schedules, listSchedules, async (c) => {
  const list = await (await c.var.queue()).schedules();
  return c.json({ schedules: list.map(scheduleToWire) } satisfies T.ScheduleList, 200);
});

handle(schedules, deleteSchedule, async (c) => {
  const { name } = c.req.valid("param");
  if (!(await (await c.var.queue()).deleteSchedule(name))) {
    throw new HttpError(404, "NOT_FOUND", `name: no schedule ${name}`);
  }
  return c.body(null, 204);
});
