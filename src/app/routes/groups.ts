/** One group's messages: its next ones, without claiming them, and a purge of them all. */
import { Hono } from "hono";
import { GroupPath, PeekAnswer, PeekQuery, PurgeAnswer } from "../../contract/schemas.js";
import type * as T from "../../contract/types.js";
import { queuedToWire } from "../../contract/wire.js";
import type { AppEnv } from "../context.js";
import { defineRoute, handle } from "../route.js";

export const peek = defineRoute({
  method: "get",
  path: "/v1/groups/{group_id}/messages",
  operationId: "peek",
  tag: "Inspect",
  summary: "A group's next messages, without claiming them",
  description:
    "In the order they will be delivered, each with its state (leased, parked, delayed or queued), attempts and publish time; nothing changes. Reads `limit` rows.",
  scope: "read",
  request: { params: GroupPath, query: PeekQuery },
  responses: {
    200: {
      description: "Up to `limit` messages; none when the group is empty.",
      schema: PeekAnswer,
      example: {
        messages: [
          {
            seq: 41,
            group_id: "orders",
            event: { order: 7 },
            state: "in_flight",
            until: 1796230530.1,
            attempts: 1,
            published_at: 1796230490.4,
          },
          {
            seq: 44,
            group_id: "orders",
            event: { order: 8 },
            state: "queued",
            until: null,
            attempts: 0,
            published_at: 1796230495.9,
          },
        ],
      },
    },
  },
});

export const purge = defineRoute({
  method: "delete",
  path: "/v1/groups/{group_id}/messages",
  operationId: "purge",
  tag: "Inspect",
  summary: "Purge a group",
  description:
    "Deletes the group's messages, the one in flight included (its lease's ack then answers 404 LEASE_NOT_FOUND); a message published while the purge runs is kept. Its dead letters stay. A deep group is deleted in several writes: a purge cut short can be sent again.",
  scope: "manage",
  audit: ["purged"],
  request: { params: GroupPath },
  responses: {
    200: { description: "Deleted.", schema: PurgeAnswer, example: { purged: 12 } },
  },
});

export const groupMessages = new Hono<AppEnv>();

handle(groupMessages, peek, async (c) => {
  const list = await (await c.var.queue()).peek(c.req.valid("param").group_id, { limit: c.req.valid("query").limit });
  return c.json({ messages: list.map(queuedToWire) } satisfies T.PeekAnswer, 200);
});

handle(groupMessages, purge, async (c) => {
  const purged = await (await c.var.queue()).purge(c.req.valid("param").group_id);
  return c.json({ purged } satisfies T.PurgeAnswer, 200);
});
