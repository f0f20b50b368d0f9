/**
 * Schedules across a real eviction of the QueueWriter (its workerd process stopped and started
 * again on the same storage, scripts/support/miniflare.ts), with a second firer running at the same
 * time (the library's `runSchedules()`, as a Cron Trigger of another Worker would): every tick is
 * published once, none while nobody fires them, and after the downtime one catch-up tick, not one
 * per tick missed, with no request arriving.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, inject, it } from "vitest";
import { type ServedWorker, serveWorker } from "../../scripts/support/miniflare.js";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { resetDatabase } from "../support/db.js";
import { waitFor } from "../support/wait.js";

const TOKEN = "schedule-test-token-0123456789";
let worker: ServedWorker | undefined;
let t: LibsqlTransport | undefined;

afterEach(async () => {
  await worker?.stop();
  if (t) {
    await resetDatabase(clientOf(t));
    t.close();
  }
  worker = t = undefined;
});

/** The ticks published so far (from their idempotency keys), and the messages they stored. */
async function published(q: LibsqlTransport): Promise<{ ticks: number[]; messages: number }> {
  const c = clientOf(q);
  const keys = (await c.execute("SELECT key FROM tq_idempotency WHERE key LIKE 'schedule:every:%'")).rows;
  const n = (await c.execute("SELECT count(*) AS n FROM messages WHERE group_id = 'ticks'")).rows[0]?.n;
  return { ticks: keys.map((k) => Number(String(k.key).split(":").at(-1))).sort((a, b) => a - b), messages: Number(n) };
}

it("an every-second schedule: once per tick across an eviction and a second firer; one catch-up tick", async () => {
  t = await LibsqlTransport.create(inject("sqldUrl"));
  await resetDatabase(clientOf(t));
  const dir = mkdtempSync(join(tmpdir(), "turso-queue-writer-"));
  const serve = () => serveWorker({ databaseUrl: inject("sqldUrl"), queueToken: TOKEN, persist: dir });
  worker = await serve();
  const put = await fetch(`${worker.url}/v1/schedules/every`, {
    method: "PUT",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ group_id: "ticks", event: { kind: "tick" }, every: 1 }),
  });
  expect(put.status).toBe(201);
  // A second firer, as fast as it goes, the whole time.
  let firing = true;
  const q = t;
  const second = (async () => {
    while (firing) {
      await q.runSchedules();
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  await waitFor(async () => (await published(q)).ticks.length >= 3, { what: "three ticks", timeoutMs: 20_000 });
  firing = false;
  await second;
  await worker.stop();
  worker = undefined;
  const before = await published(q);
  // Gone for a few ticks: nobody fires them.
  await new Promise((r) => setTimeout(r, 3_500));
  expect((await published(q)).ticks).toEqual(before.ticks);

  // Back, with no request: the alarm it left fires one catch-up tick, then it goes on each second.
  worker = await serve();
  const after = await waitFor(
    async () => {
      const p = await published(q);
      return p.ticks.length >= before.ticks.length + 3 && p;
    },
    { what: "ticks after the restart", timeoutMs: 20_000 },
  );
  expect(after.messages).toBe(after.ticks.length);
  expect(new Set(after.ticks).size).toBe(after.ticks.length);
  const gaps = after.ticks.slice(1).map((tick, i) => tick - (after.ticks[i] as number));
  // One gap for the downtime (a single catch-up tick covered it); every other tick one second apart.
  expect(gaps.filter((g) => g !== 1)).toHaveLength(1);
  expect(Math.max(...gaps)).toBeGreaterThanOrEqual(3);
});
