/** Dead letters: list (paged by seq), redrive to the tail of their group, delete. */
import { Hono } from "hono";
import { DeadLetterPage, DeadLetterPath, DeadLetterQuery, NoBody, RedriveAnswer } from "../../contract/schemas.js";
import type * as T from "../../contract/types.js";
import { noDeadLetter } from "../../core/errors.js";
import { DEAD_LETTER_PAGE } from "../../rules.js";
import { deadLetterPage } from "../answers.js";
import type { AppEnv } from "../context.js";
import { defineRoute, handle } from "../route.js";

export const listDeadLetters = defineRoute({
  method: "get",
  path: "/v1/dead-letters",
  operationId: "listDeadLetters",
  tag: "Dead letters",
  summary: "List dead letters",
  description: "In seq order, a page at a time: pass `next_after_seq` as `after_seq` until it is null.",
  auth: true,
  request: { query: DeadLetterQuery },
  responses: {
    200: {
      description: "One page.",
      schema: DeadLetterPage,
      example: {
        dead_letters: [
          {
            seq: 7,
            group_id: "orders",
            event: { order: 1001, action: "charge" },
            priority: 0,
            attempts: 5,
            reason: "max_attempts",
            dead_at: 1796230600.5,
          },
        ],
        next_after_seq: null,
      },
    },
  },
});

export const redrive = defineRoute({
  method: "post",
  path: "/v1/dead-letters/{seq}/redrive",
  operationId: "redrive",
  tag: "Dead letters",
  summary: "Redrive a dead letter",
  description: "Puts it back at the tail of its group, with a new seq and fresh attempts.",
  auth: true,
  request: { params: DeadLetterPath, body: { schema: NoBody, required: false } },
  responses: { 201: { description: "Back in the queue.", schema: RedriveAnswer, example: { seq: 12 } } },
  errors: ["DEAD_LETTER_NOT_FOUND"],
});

export const deleteDeadLetter = defineRoute({
  method: "delete",
  path: "/v1/dead-letters/{seq}",
  operationId: "deleteDeadLetter",
  tag: "Dead letters",
  summary: "Delete a dead letter",
  auth: true,
  request: { params: DeadLetterPath },
  responses: { 204: { description: "Deleted." } },
  errors: ["DEAD_LETTER_NOT_FOUND"],
});

export const deadLetters = new Hono<AppEnv>();

handle(deadLetters, listDeadLetters, async (c) => {
  const q = c.req.valid("query");
  const page = await deadLetterPage(await c.var.queue(), {
    groupId: q.group_id,
    afterSeq: q.after_seq ?? 0,
    limit: q.limit ?? DEAD_LETTER_PAGE.default,
  });
  return c.json(page satisfies T.DeadLetterPage, 200);
});

handle(deadLetters, redrive, async (c) => {
  const newSeq = await (await c.var.queue()).redrive(c.req.valid("param").seq);
  return c.json({ seq: newSeq } satisfies T.RedriveAnswer, 201);
});

handle(deadLetters, deleteDeadLetter, async (c) => {
  const { seq } = c.req.valid("param");
  if (!(await (await c.var.queue()).deleteDeadLetter(seq))) {
    throw noDeadLetter(seq);
  }
  return c.body(null, 204);
});
