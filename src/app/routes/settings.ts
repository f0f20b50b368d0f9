/** Flow control over HTTP: the queue's settings, and a group's own over them. */
import { Hono } from "hono";
import type * as v from "valibot";
import { object } from "../../contract/kit.js";
import { QueueFlowFields } from "../../contract/requests.js";
import { GroupSettingsAnswer, GroupSettingsBody, GroupSettingsPath, QueueSettings } from "../../contract/schemas.js";
import type * as T from "../../contract/types.js";
import { groupFlowInputFromWire, groupFlowToWire, queueSettingsToWire } from "../../contract/wire.js";
import type { AppEnv } from "../context.js";
import { defineRoute, handle } from "../route.js";

const SETTINGS = { group_concurrency: 3, group_rate: { limit: 10, period: 1, burst: 1 }, paused: false };
const GROUP = {
  group_id: "customer-42",
  own: { rate: { limit: 2, period: 1, burst: 1 } },
  concurrency: 3,
  rate: { limit: 2, period: 1, burst: 1 },
  paused: false,
  queue_paused: false,
  rate_limited_until: null,
};

/** The flow settings alone (the body of `PUT /v1/settings`; `PUT /v1/queues/{queue}` takes them too). */
export const SettingsBody = object(QueueFlowFields);

export const getSettings = defineRoute({
  method: "get",
  path: "/v1/settings",
  operationId: "getSettings",
  tag: "Queues",
  summary: "The queue's flow settings",
  description: "Each group's concurrency and rate (unless it has its own), and whether the queue is paused.",
  scope: "read",
  responses: { 200: { description: "The settings.", schema: QueueSettings, example: SETTINGS } },
});

export const putSettings = defineRoute({
  method: "put",
  path: "/v1/settings",
  operationId: "putSettings",
  tag: "Queues",
  summary: "Change the queue's flow settings",
  description:
    "What is given changes; the rest stays. A sharded queue's every shard is set. A change of concurrency or rate reads every group once (to put each in the state it now calls for); a pause or resume reads none. The same fields are accepted by `PUT /v1/queues/{queue}`.",
  scope: "manage",
  request: { body: { schema: SettingsBody, required: true, example: { group_concurrency: 3, paused: true } } },
  responses: { 200: { description: "The settings after.", schema: QueueSettings, example: SETTINGS } },
});

export const getGroupSettings = defineRoute({
  method: "get",
  path: "/v1/groups/{group_id}",
  operationId: "getGroup",
  tag: "Queues",
  summary: "What applies to a group",
  description: "Its own settings, what applies (its own, else the queue's), and whether its rate holds it now.",
  scope: "read",
  request: { params: GroupSettingsPath },
  responses: { 200: { description: "The group's settings.", schema: GroupSettingsAnswer, example: GROUP } },
});

export const putGroupSettings = defineRoute({
  method: "put",
  path: "/v1/groups/{group_id}",
  operationId: "putGroup",
  tag: "Queues",
  summary: "Set a group's own flow settings",
  description:
    "`concurrency`, `rate` and `paused` for this group, over the queue's (what is given changes; the rest stays). `rate: null` is no rate, whatever the queue's. A paused group delivers nothing until resumed; its publishes are accepted.",
  scope: "manage",
  request: {
    params: GroupSettingsPath,
    body: { schema: GroupSettingsBody, required: true, example: { rate: { limit: 2, period: 1 } } },
  },
  responses: { 200: { description: "What applies after.", schema: GroupSettingsAnswer, example: GROUP } },
});

export const deleteGroupSettings = defineRoute({
  method: "delete",
  path: "/v1/groups/{group_id}",
  operationId: "resetGroup",
  tag: "Queues",
  summary: "Drop a group's own flow settings",
  description: "The queue's apply to it again.",
  scope: "manage",
  request: { params: GroupSettingsPath },
  responses: { 200: { description: "What applies after.", schema: GroupSettingsAnswer, example: GROUP } },
});

export const SETTINGS_ROUTES = [
  getSettings,
  putSettings,
  getGroupSettings,
  putGroupSettings,
  deleteGroupSettings,
] as const;

export const settings = new Hono<AppEnv>();

/** The flow-settings part of a body, as the library takes it. */
export const queueFlowOf = (body: v.InferOutput<typeof SettingsBody>) => ({
  ...(body.group_concurrency === undefined ? {} : { groupConcurrency: body.group_concurrency }),
  ...(body.group_rate === undefined ? {} : { groupRate: body.group_rate }),
  ...(body.paused === undefined ? {} : { paused: body.paused }),
});

handle(settings, getSettings, async (c) => {
  const s = await (await c.var.queue()).queueSettings();
  return c.json(queueSettingsToWire(s) satisfies T.QueueSettings, 200);
});

handle(settings, putSettings, async (c) => {
  const s = await (await c.var.queue()).setQueue(queueFlowOf(c.req.valid("json")));
  return c.json(queueSettingsToWire(s) satisfies T.QueueSettings, 200);
});

handle(settings, getGroupSettings, async (c) => {
  const g = await (await c.var.queue()).groupSettings(c.req.valid("param").group_id);
  return c.json(groupFlowToWire(g) satisfies T.GroupSettingsAnswer, 200);
});

handle(settings, putGroupSettings, async (c) => {
  const body = c.req.valid("json");
  const g = await (await c.var.queue()).setGroup(c.req.valid("param").group_id, groupFlowInputFromWire(body));
  return c.json(groupFlowToWire(g) satisfies T.GroupSettingsAnswer, 200);
});

handle(settings, deleteGroupSettings, async (c) => {
  const g = await (await c.var.queue()).resetGroup(c.req.valid("param").group_id);
  return c.json(groupFlowToWire(g) satisfies T.GroupSettingsAnswer, 200);
});
