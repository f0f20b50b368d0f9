/** Dead letters: list (paged by seq), redrive to the tail of their group, delete. */
import { Hono } from "hono";
import { checkCount, checkId } from "../../core/validate.js";
import type { AppEnv } from "../app.js";
import { onlyFields, readJsonObject } from "../body.js";
import { badRequest, notFound } from "../errors.js";
import { methodNotAllowed, parseSeq } from "./common.js";

export const deadLetters = new Hono<AppEnv>();

/** Most dead letters one page returns. */
export const MAX_DEAD_LETTER_PAGE = 1000;

deadLetters.get("/dead-letters", async (c) => {
  const query = c.req.queries();
  for (const [k, v] of Object.entries(query)) {
    if (!["group_id", "after_seq", "limit"].includes(k)) {
      throw badRequest(JSON.stringify(k.slice(0, 64)), "unknown query parameter (expected group_id, after_seq, limit)");
    }
    if (v.length > 1) throw badRequest(k, "must be given once");
  }
  const q = (k: string) => query[k]?.[0];
  const groupId = q("group_id") === undefined ? undefined : checkId("group_id", q("group_id"));
  const afterRaw = q("after_seq");
  const afterSeq = afterRaw === undefined || afterRaw === "0" ? 0 : parseSeq("after_seq", afterRaw);
  const limitRaw = q("limit");
  const limit =
    limitRaw === undefined
      ? 100
      : checkCount("limit", /^[0-9]{1,7}$/.test(limitRaw) ? Number(limitRaw) : Number.NaN, MAX_DEAD_LETTER_PAGE);
  const list = await (await c.var.queue()).deadLetters({ groupId, afterSeq, limit });
  return c.json({
    dead_letters: list.map((d) => ({
      seq: d.seq,
      group_id: d.groupId,
      event: d.event,
      priority: d.priority,
      attempts: d.attempts,
      reason: d.reason,
      dead_at: d.deadAt,
    })),
    /** Pass as `after_seq` for the next page; null when this page was the last. */
    next_after_seq: list.length === limit ? (list[list.length - 1]?.seq ?? null) : null,
  });
});
deadLetters.all("/dead-letters", methodNotAllowed("GET"));

deadLetters.post("/dead-letters/:seq/redrive", async (c) => {
  const seq = parseSeq("seq", c.req.param("seq"));
  const body = await readJsonObject(c, false);
  if (body) onlyFields(body, []);
  try {
    const newSeq = await (await c.var.queue()).redrive(seq);
    return c.json({ seq: newSeq }, 201);
  } catch (e) {
    if ((e as { code?: unknown }).code === "LEASE_NOT_FOUND") throw notFound(`seq: no dead letter ${seq}`);
    throw e;
  }
});
deadLetters.all("/dead-letters/:seq/redrive", methodNotAllowed("POST"));

deadLetters.delete("/dead-letters/:seq", async (c) => {
  const seq = parseSeq("seq", c.req.param("seq"));
  const deleted = await (await c.var.queue()).deleteDeadLetter(seq);
  if (!deleted) throw notFound(`seq: no dead letter ${seq}`);
  return c.body(null, 204);
});
deadLetters.all("/dead-letters/:seq", methodNotAllowed("DELETE"));
