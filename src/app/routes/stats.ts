/** Queue counters. */
import { Hono } from "hono";
import type { AppEnv } from "../app.js";
import { methodNotAllowed } from "./common.js";

export const stats = new Hono<AppEnv>();

stats.get("/stats", async (c) => {
  const s = await (await c.var.queue()).stats();
  return c.json({
    ready: s.ready,
    waiting: s.waiting,
    in_flight: s.inFlight,
    parked: s.parked,
    groups: s.groups,
    dead_letters: s.deadLetters,
    now: s.now,
  });
});
stats.all("/stats", methodNotAllowed("GET"));
