/** What is in the queue: counters, and the groups worth watching. */
import { Hono } from "hono";
import { GroupList, GroupsQuery, History, Stats } from "../../contract/schemas.js";
import type * as T from "../../contract/types.js";
import { groupToWire, historyToWire, statsToWire } from "../../contract/wire.js";
import type { AppEnv } from "../context.js";
import { STATS_EXAMPLE } from "../examples.js";
import { defineRoute, handle } from "../route.js";
import { meterOf } from "../writer/meter.js";

export const stats = defineRoute({
  method: "get",
  path: "/v1/stats",
  operationId: "stats",
  tag: "Inspect",
  summary: "Queue counters",
  description:
    "One read. `ready + waiting + in_flight + parked + delayed` is every message in the queue. Counted from the table sizes and the live leases: it reads a few rows per page of the tables and per live lease, never every message.",
  scope: "read",
  responses: {
    200: {
      description: "The counters, on the database's clock.",
      schema: Stats,
      example: STATS_EXAMPLE,
    },
  },
});

export const groups = defineRoute({
  method: "get",
  path: "/v1/groups",
  operationId: "listGroups",
  tag: "Inspect",
  summary: "Groups worth watching",
  description:
    "Groups whose first message holds a live lease, a park or a delay (the latest to end first), then the next groups in round-robin order (the group claimed longest ago first); each with its messages counted up to 1,000. Reads at most about `limit` × 1,000 rows, whatever the depth of the queue.",
  scope: "read",
  request: { query: GroupsQuery },
  responses: {
    200: {
      description: "Up to `limit` groups.",
      schema: GroupList,
      example: {
        groups: [
          {
            group_id: "orders",
            messages: 12,
            priority: 0,
            in_flight: true,
            parked: false,
            last_claimed_at: 1796230530.1,
          },
        ],
      },
    },
  },
});

export const history = defineRoute({
  method: "get",
  path: "/v1/history",
  operationId: "history",
  tag: "Inspect",
  summary: "The queue's state over the last hour",
  description:
    "Samples of the counts and running totals of messages published and acked, kept by the queue's writer (the dashboard's charts draw them); a sharded queue's shards' added up. A sample costs one read of the counts, taken at most once per QUEUE_SAMPLE_SECONDS and only when the queue is written or this is read. A Worker without its QueueWriter keeps none.",
  scope: "read",
  responses: {
    200: {
      description: "The samples, oldest first.",
      schema: History,
      example: {
        sample_seconds: 60,
        samples: [
          {
            at: 1796230500.2,
            ready: 4,
            waiting: 12,
            in_flight: 2,
            parked: 0,
            delayed: 1,
            dead_letters: 0,
            oldest_age: 3.5,
            published: 1200,
            acked: 1181,
          },
        ],
      },
    },
  },
});

export const inspect = new Hono<AppEnv>();

handle(inspect, stats, async (c) => {
  const s = await (await c.var.queue()).stats();
  return c.json(statsToWire(s) satisfies T.Stats, 200);
});

handle(inspect, groups, async (c) => {
  const list = await (await c.var.queue()).groups({ limit: c.req.valid("query").limit });
  return c.json({ groups: list.map(groupToWire) } satisfies T.GroupList, 200);
});

handle(inspect, history, async (c) => {
  const queue = await c.var.queue();
  const kept = "history" in queue ? await queue.history() : await meterOf(queue)?.history();
  const answer = kept ?? { sampleSeconds: c.var.config.sampleMs / 1000, samples: [] };
  return c.json(historyToWire(answer) satisfies T.History, 200);
});
