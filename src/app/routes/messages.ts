/** Publishing: one message into a group, or a batch across groups (all or nothing). */
import { Hono } from "hono";
import { MAX_PUBLISH_BATCH, type PublishInput } from "../../core/transport.js";
import { checkId, checkPriority } from "../../core/validate.js";
import type { AppEnv } from "../app.js";
import { type JsonObject, onlyFields, readJsonObject } from "../body.js";
import { badRequest } from "../errors.js";
import { idempotencyKey, methodNotAllowed, required } from "./common.js";

export const messages = new Hono<AppEnv>();

messages.post("/groups/:groupId/messages", async (c) => {
  const groupId = checkId("group_id", c.req.param("groupId"));
  const options = idempotencyKey(c);
  const body = (await readJsonObject(c, true)) as JsonObject;
  onlyFields(body, ["event", "priority"]);
  const event = required(body, "event");
  const priority = body.priority === undefined ? 0 : checkPriority("priority", body.priority);
  const seq = await (await c.var.queue()).publish(groupId, event, priority, options);
  return c.json({ seq }, 201);
});
messages.all("/groups/:groupId/messages", methodNotAllowed("POST"));

messages.post("/messages", async (c) => {
  const options = idempotencyKey(c);
  const body = (await readJsonObject(c, true)) as JsonObject;
  onlyFields(body, ["messages"]);
  const list = required(body, "messages");
  if (!Array.isArray(list)) throw badRequest("messages", "must be an array");
  if (list.length < 1 || list.length > MAX_PUBLISH_BATCH) {
    throw badRequest("messages", `must hold 1 to ${MAX_PUBLISH_BATCH} messages, got ${list.length}`);
  }
  const inputs: PublishInput[] = list.map((m: unknown, i) => {
    const at = `messages[${i}]`;
    if (typeof m !== "object" || m === null || Array.isArray(m)) throw badRequest(at, "must be an object");
    const item = m as JsonObject;
    onlyFields(item, ["group_id", "event", "priority"], `${at}.`);
    return {
      groupId: checkId(`${at}.group_id`, required(item, "group_id", `${at}.`)),
      event: required(item, "event", `${at}.`),
      priority: item.priority === undefined ? 0 : checkPriority(`${at}.priority`, item.priority),
    };
  });
  const seqs = await (await c.var.queue()).publishMany(inputs, options);
  return c.json({ seqs }, 201);
});
messages.all("/messages", methodNotAllowed("POST"));
