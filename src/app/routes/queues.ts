/** Named queues: list them with their counts, make one (idempotent), read one, delete one. */
import { type Context, Hono } from "hono";
import {
  QueueAnswer,
  QueueBody,
  QueueDeleteQuery,
  QueueList,
  QueuePath,
  QueueWithSettings,
} from "../../contract/schemas.js";
import type * as T from "../../contract/types.js";
import { queueSettingsToWire, queueToWire, statsToWire } from "../../contract/wire.js";
import { notFound, type QueueInfo } from "../../core/queues.js";
import type { QueueFlow, QueueFlowInput } from "../../core/types.js";
import type { AppEnv } from "../context.js";
import { STATS_EXAMPLE as STATS } from "../examples.js";
import { defineRoute, handle } from "../route.js";
import { queueFlowOf } from "./settings.js";

const EXAMPLE = { name: "emails", shards: 1, location_hint: null, created_at: 1796230500.5 };
const SETTINGS_EXAMPLE = { group_concurrency: 1, group_rate: null, paused: false };

export const listQueues = defineRoute({
  method: "get",
  path: "/v1/queues",
  operationId: "listQueues",
  tag: "Queues",
  summary: "List the queues, with their counts",
  description:
    "The default queue first, then the named ones by name. Each queue's counts are its shards' stats added up: one read per shard. A queue whose databases cannot be reached is listed with `stats: null` and the error: one unreachable queue hides no other.",
  scope: "read",
  queues: "filtered",
  responses: {
    200: {
      description: "Every queue.",
      schema: QueueList,
      example: { queues: [{ ...EXAMPLE, name: "default", created_at: null, stats: STATS }] },
    },
  },
});

export const putQueue = defineRoute({
  method: "put",
  path: "/v1/queues/{queue}",
  operationId: "putQueue",
  tag: "Queues",
  summary: "Make a queue (idempotent)",
  description:
    "Makes the queue's databases (one per shard) with their schema, then lists it; from then on `/v1/queues/{queue}/...` serves it. Asking again answers the queue as it is (200). Its shard count cannot change: make a new queue and drain this one. Publishing to a queue that was never made is 404 QUEUE_NOT_FOUND: a typo creates nothing. `group_concurrency`, `group_rate` and `paused` set its flow settings (as `PUT /v1/settings` does), also for `default`; they are answered in `settings`.",
  scope: "manage",
  audit: ["shards", "created"],
  request: {
    params: QueuePath,
    body: { schema: QueueBody, required: false, example: { shards: 4, location_hint: "weur" } },
  },
  responses: {
    200: {
      description: "It was there already.",
      schema: QueueAnswer,
      example: { ...EXAMPLE, created: false, settings: SETTINGS_EXAMPLE },
    },
    201: {
      description: "Made.",
      schema: QueueAnswer,
      example: { ...EXAMPLE, created: true, settings: SETTINGS_EXAMPLE },
    },
  },
});

export const getQueue = defineRoute({
  method: "get",
  path: "/v1/queues/{queue}",
  operationId: "getQueue",
  tag: "Queues",
  summary: "One queue, with its counts",
  scope: "read",
  request: { params: QueuePath },
  responses: {
    200: {
      description: "The queue.",
      schema: QueueWithSettings,
      example: { ...EXAMPLE, stats: STATS, settings: SETTINGS_EXAMPLE },
    },
  },
  errors: ["QUEUE_NOT_FOUND"],
});

export const deleteQueue = defineRoute({
  method: "delete",
  path: "/v1/queues/{queue}",
  operationId: "deleteQueue",
  tag: "Queues",
  summary: "Delete a queue and its databases",
  description:
    "Refused (409 QUEUE_NOT_EMPTY) while it holds messages or dead letters, unless `force=true`. The default queue cannot be deleted. Its long polls under way end at once with 404 QUEUE_NOT_FOUND, and nothing of it serves a queue made again under the name. A delete and a make of one name never interleave: each answers as if it ran alone.",
  scope: "manage",
  request: { params: QueuePath, query: QueueDeleteQuery },
  responses: { 204: { description: "Deleted, with its databases." } },
  errors: ["QUEUE_NOT_FOUND", "QUEUE_NOT_EMPTY"],
});

export const QUEUE_ROUTES = [listQueues, putQueue, getQueue, deleteQueue] as const;

export const queues = new Hono<AppEnv>();

/**
 * A queue's flow settings, after `patch` (when given), through what serves it: each of its databases'
 * writers (a sharded queue sets every shard) hears the change at once.
 */
async function settingsOf(c: Context<AppEnv>, queue: QueueInfo, patch?: QueueFlowInput): Promise<QueueFlow> {
  c.set("queueName", queue.name);
  const served = await c.var.queue();
  return patch === undefined ? served.queueSettings() : served.setQueue(patch);
}

handle(queues, listQueues, async (c) => {
  const all = await c.var.catalog.listWithCounts(c.var.principal.queues);
  const listed = all.map(
    (q): T.QueueListItem =>
      q.stats === null
        ? { ...queueToWire(q), stats: null, error: { code: q.error.code, message: q.error.message } }
        : { ...queueToWire(q), stats: statsToWire(q.stats) },
  );
  return c.json({ queues: listed } satisfies T.QueueList, 200);
});

handle(queues, putQueue, async (c) => {
  const { queue: name } = c.req.valid("param");
  const body = c.req.valid("json");
  const catalog = c.var.catalog;
  const flow = queueFlowOf(body);
  let made = false;
  for (let attempt = 1; ; attempt++) {
    const { queue, created } = await catalog.put(name, { shards: body.shards, locationHint: body.location_hint });
    made ||= created;
    try {
      const settings = await settingsOf(c, queue, Object.keys(flow).length > 0 ? flow : undefined);
      return c.json(
        { ...queueToWire(queue), created: made, settings: queueSettingsToWire(settings) } satisfies T.QueueAnswer,
        made ? 201 : 200,
      );
    } catch (e) {
      // Deleted between its making and its settings (a delete racing this put): made again, as if
      // this put came after the delete.
      catalog.forget(name);
      if (attempt >= 3 || (await catalog.get(name)) !== undefined) throw e;
    }
  }
});

handle(queues, getQueue, async (c) => {
  const { queue: name } = c.req.valid("param");
  const catalog = c.var.catalog;
  const queue = await catalog.get(name);
  if (queue === undefined) throw notFound(name);
  const [stats, settings] = await Promise.all([catalog.countOf(queue), settingsOf(c, queue)]);
  return c.json(
    {
      ...queueToWire(queue),
      stats: statsToWire(stats),
      settings: queueSettingsToWire(settings),
    } satisfies T.QueueWithSettings,
    200,
  );
});

handle(queues, deleteQueue, async (c) => {
  const { queue: name } = c.req.valid("param");
  if (!(await c.var.catalog.delete(name, { force: c.req.valid("query").force === true }))) throw notFound(name);
  return c.body(null, 204);
});
