/** Publishing: one message into a group, or a batch across groups (all or nothing). */
import { Hono } from "hono";
import {
  GroupPath,
  IdempotencyHeaders,
  PublishAnswer,
  PublishBatchAnswer,
  PublishBatchBody,
  PublishBody,
} from "../../contract/schemas.js";
import type * as T from "../../contract/types.js";
import { publishInputFromWire } from "../../contract/wire.js";
import type { AppEnv } from "../context.js";
import { badRequest } from "../errors.js";
import { defineRoute, handle } from "../route.js";

export const publishOne = defineRoute({
  method: "post",
  path: "/v1/groups/{group_id}/messages",
  operationId: "publish",
  tag: "Publish",
  summary: "Publish a message into a group",
  description:
    "Appends the event to the tail of its group. A group delivers its messages in order, one at a time (or as many as its concurrency allows). With `delay`, not before that many seconds from now. With `singleton_key`, nothing is stored while a message with that key waits unclaimed: the answer is its seq, `deduplicated`.",
  scope: "publish",
  request: {
    params: GroupPath,
    headers: IdempotencyHeaders,
    body: { schema: PublishBody, required: true, example: { event: { order: 1001, action: "charge" }, priority: 0 } },
  },
  responses: {
    200: {
      description: "With `singleton_key`: a message with the key was waiting; nothing new was stored.",
      schema: PublishAnswer,
      example: { seq: 1, deduplicated: true, replaced: false },
    },
    201: { description: "Stored.", schema: PublishAnswer, example: { seq: 1 } },
  },
  errors: ["IDEMPOTENCY_CONFLICT"],
});

export const publishBatch = defineRoute({
  method: "post",
  path: "/v1/messages",
  operationId: "publishBatch",
  tag: "Publish",
  summary: "Publish a batch across groups",
  description: "Stores every message or none (one bad message is a 400 naming it, and nothing is stored).",
  scope: "publish",
  request: {
    headers: IdempotencyHeaders,
    body: {
      schema: PublishBatchBody,
      required: true,
      example: {
        messages: [
          { group_id: "orders", event: { order: 1001, action: "ship" } },
          { group_id: "emails", event: { to: "ada@example.com" }, priority: 2 },
        ],
      },
    },
  },
  responses: { 201: { description: "Stored, all of them.", schema: PublishBatchAnswer, example: { seqs: [2, 3] } } },
  errors: ["IDEMPOTENCY_CONFLICT"],
});

export const messages = new Hono<AppEnv>();

handle(messages, publishOne, async (c) => {
  const { group_id } = c.req.valid("param");
  const { event, priority, delay, singleton_key, replace } = c.req.valid("json");
  const { "Idempotency-Key": key, traceparent } = c.req.valid("header");
  const options = { idempotencyKey: key, delay, traceparent };
  const queue = await c.var.queue();
  if (singleton_key === undefined && replace !== undefined) throw badRequest("replace", "needs singleton_key");
  if (singleton_key === undefined) {
    const seq = await queue.publish(group_id, event, priority ?? 0, options);
    return c.json({ seq } satisfies T.PublishAnswer, 201);
  }
  const got = await queue.publishSingleton(group_id, event, priority ?? 0, {
    ...options,
    singletonKey: singleton_key,
    replace,
  });
  return c.json(
    { seq: got.seq, deduplicated: got.deduplicated, replaced: got.replaced } satisfies T.PublishAnswer,
    got.deduplicated ? 200 : 201,
  );
});

handle(messages, publishBatch, async (c) => {
  const list = c.req.valid("json").messages;
  const { "Idempotency-Key": key, traceparent } = c.req.valid("header");
  const seqs = await (await c.var.queue()).publishMany(list.map(publishInputFromWire), {
    idempotencyKey: key,
    traceparent,
  });
  return c.json({ seqs } satisfies T.PublishBatchAnswer, 201);
});
