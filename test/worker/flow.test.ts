/**
 * Flow control through the Worker and its QueueWriter inside workerd: a group's concurrency and
 * rate, pausing a queue and a group (claims, long polls, pushes), schedules fired by the writer's
 * alarm once per tick whoever fires them, singleton publishes, and hostile settings refused.
 */
import { createScheduledController, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, expect, inject, it } from "vitest";
import type * as T from "../../src/contract/types.js";
import worker from "../../src/worker.js";
import { scrape } from "../support/prometheus.js";
import { waitFor } from "../support/wait.js";
import { api, db, EMPTY, post, resetDatabase, rowCounts, writer } from "./support.js";

beforeEach(resetDatabase);
afterEach(async () => {
  const list = await api<T.SubscriptionList>("/v1/subscriptions");
  for (const s of list.body.subscriptions) await api(`/v1/subscriptions/${s.name}`, { method: "DELETE" });
  await resetDatabase();
});

const claim = (worker_id: string, extra: Record<string, unknown> = {}) =>
  post<T.LeaseList>("/v1/claims", { worker_id, visibility: 30, max: 1, ...extra });

/** Live leases per group right now, from the database. */
async function liveByGroup(): Promise<Record<string, number>> {
  const client = db();
  const rs = await client.execute(`SELECT group_id, count(*) AS n FROM messages
    WHERE locked_by IS NOT NULL AND locked_by NOT IN ('__parked__', '__delayed__') AND lock_expiry >= unixepoch('subsec')
    GROUP BY group_id`);
  client.close();
  return Object.fromEntries(rs.rows.map((r) => [String(r.group_id), Number(r.n)]));
}

it("group_concurrency 3 and 64 claimers: never more than 3 leases per group, started in publish order", async () => {
  const put = await api<T.QueueAnswer>("/v1/queues/default", { method: "PUT", json: { group_concurrency: 3 } });
  expect(put.status).toBe(200);
  expect(put.body.settings).toEqual({ group_concurrency: 3, group_rate: null, paused: false });
  expect((await api<T.QueueWithSettings>("/v1/queues/default")).body.settings.group_concurrency).toBe(3);
  const total = 60;
  const messages = Array.from({ length: total }, (_, i) => ({ group_id: i % 2 === 0 ? "even" : "odd", event: i }));
  expect((await post("/v1/messages", { messages })).status).toBe(201);
  const leases: T.Lease[] = [];
  let most = 0;
  let done = 0;
  const claimer = async (w: number) => {
    while (done < total) {
      const got = (await claim(`w${w}`)).body.leases ?? [];
      if (got.length === 0) {
        await new Promise((r) => setTimeout(r, 10));
        continue;
      }
      leases.push(...got);
      const live = await liveByGroup();
      most = Math.max(most, ...Object.values(live));
      for (const l of got) {
        expect((await api(`/v1/leases/${l.lease_id}/ack`, { method: "POST" })).status).toBe(204);
        done++;
      }
    }
  };
  await Promise.all(Array.from({ length: 64 }, (_, w) => claimer(w)));
  expect(most).toBeLessThanOrEqual(3);
  expect(most).toBeGreaterThanOrEqual(2);
  expect(leases).toHaveLength(total);
  for (const g of ["even", "odd"]) {
    const mine = leases.filter((l) => l.group_id === g).sort((a, b) => a.seq - b.seq);
    for (let i = 1; i < mine.length; i++) {
      expect((mine[i] as T.Lease).expires_at).toBeGreaterThanOrEqual((mine[i - 1] as T.Lease).expires_at);
    }
  }
});

it("a rate of 5 per second: a group's claims over 10 s stay within 5 × 10 + the burst", async () => {
  expect(
    (await api("/v1/queues/default", { method: "PUT", json: { group_rate: { limit: 5, period: 1 } } })).status,
  ).toBe(200);
  await post("/v1/messages", { messages: Array.from({ length: 120 }, (_, i) => ({ group_id: "api", event: i })) });
  const at: number[] = [];
  // Claimers as fast as they go for a while; the count is over ten seconds of the database's clock.
  const stop = Date.now() + 12_000;
  const claimer = async () => {
    while (Date.now() < stop) {
      const got = (await claim("w")).body.leases ?? [];
      for (const l of got) {
        at.push(l.expires_at - 30);
        await api(`/v1/leases/${l.lease_id}/ack`, { method: "POST" });
      }
      if (got.length === 0) await new Promise((r) => setTimeout(r, 20));
    }
  };
  await Promise.all([claimer(), claimer(), claimer()]);
  const start = Math.min(...at);
  const within = at.filter((t) => t < start + 10).length;
  expect(within).toBeLessThanOrEqual(5 * 10 + 1);
  expect(within).toBeGreaterThanOrEqual(5);
  const sorted = [...at].sort((a, b) => a - b);
  for (let i = 1; i < sorted.length; i++)
    expect((sorted[i] as number) - (sorted[i - 1] as number)).toBeGreaterThan(0.19);
  expect((await api<T.Stats>("/v1/stats")).body.rate_limited_groups).toBeLessThanOrEqual(1);
}, 60_000);

it("a paused queue delivers nothing (claims, long polls, pushes) until resumed; a paused group likewise", async () => {
  const path = `/paused/${Date.now()}`;
  const received = async () => {
    const r = await fetch(`${inject("consumerLogUrl")}/?path=${encodeURIComponent(path)}`);
    return (await r.json()) as unknown[];
  };
  expect((await api("/v1/settings", { method: "PUT", json: { paused: true } })).status).toBe(200);
  expect(
    (
      await api("/v1/subscriptions/paused", {
        method: "PUT",
        json: { url: `${inject("consumerUrl")}${path}` },
      })
    ).status,
  ).toBe(200);
  expect((await post("/v1/groups/g/messages", { event: "while paused" })).status).toBe(201);
  expect((await claim("w")).body.leases).toEqual([]);
  // A long poll waits it out with nothing.
  expect((await claim("w", { wait: 1 })).body.leases).toEqual([]);
  await writer().wake();
  expect(await received()).toEqual([]);
  expect((await api<T.Stats>("/v1/stats")).body).toMatchObject({ paused: true, ready: 1 });
  expect(scrape((await api("/metrics")).text).value("turso_queue_paused", { queue: "default" })).toBe(1);

  // Resumed: the push goes out without anything else happening.
  expect((await api<T.QueueSettings>("/v1/settings", { method: "PUT", json: { paused: false } })).body.paused).toBe(
    false,
  );
  await waitFor(async () => (await received()).length === 1, { what: "the push after resume" });
  await api("/v1/subscriptions/paused", { method: "DELETE" });

  // A paused group: the others go on; a long poll waiting on it is answered by its resume.
  const g = await api<T.GroupSettingsAnswer>("/v1/groups/slow", { method: "PUT", json: { paused: true } });
  expect(g.body).toMatchObject({ group_id: "slow", paused: true, own: { paused: true } });
  await post("/v1/groups/slow/messages", { event: "held" });
  await post("/v1/groups/fast/messages", { event: "goes" });
  expect((await claim("w", { max: 10 })).body.leases?.map((l) => l.event)).toEqual(["goes"]);
  const m = scrape((await api("/metrics")).text);
  expect(m.value("turso_queue_paused", { queue: "default" })).toBe(0);
  expect(m.value("turso_queue_paused_groups", { queue: "default" })).toBe(1);
  const waiting = claim("w", { wait: 10 });
  await new Promise((r) => setTimeout(r, 200));
  expect((await api<T.GroupSettingsAnswer>("/v1/groups/slow", { method: "DELETE" })).body.paused).toBe(false);
  expect((await waiting).body.leases?.map((l) => l.event)).toEqual(["held"]);
});

it("an every-second schedule publishes once per tick, whoever fires it at once (the alarm, the cron, a wake)", async () => {
  const put = await api<T.ScheduleAnswer>("/v1/schedules/tick", {
    method: "PUT",
    json: { group_id: "ticks", event: { kind: "tick" }, every: 1 },
  });
  expect(put.status).toBe(201);
  expect(put.body).toMatchObject({ name: "tick", every: 1, runs: 0, created: true });
  expect(put.body.next_at).toBeGreaterThan(0);
  const alarm = await runInDurableObject(writer(), (_o, state) => state.storage.getAlarm());
  expect(alarm).not.toBeNull();
  // Several firers at once, again and again, for a few seconds.
  const until = Date.now() + 4_000;
  while (Date.now() < until) {
    await Promise.all([
      runDurableObjectAlarm(writer()),
      worker.scheduled(createScheduledController({ cron: "* * * * *" }), env),
      writer().wake(),
    ]);
    await new Promise((r) => setTimeout(r, 150));
  }
  const client = db();
  const keys = (await client.execute("SELECT key, first_seq FROM tq_idempotency WHERE key LIKE 'schedule:tick:%'"))
    .rows;
  const messages = Number(
    (await client.execute("SELECT count(*) AS n FROM messages WHERE group_id = 'ticks'")).rows[0]?.n,
  );
  client.close();
  const ticks = keys.map((k) => Number(String(k.key).split(":").at(-1))).sort((a, b) => a - b);
  // One message per tick, no tick twice, and ticks one second apart.
  expect(messages).toBe(ticks.length);
  expect(new Set(ticks).size).toBe(ticks.length);
  expect(ticks.length).toBeGreaterThanOrEqual(2);
  for (let i = 1; i < ticks.length; i++) expect((ticks[i] as number) - (ticks[i - 1] as number)).toBe(1);
  const listed = await api<T.ScheduleList>("/v1/schedules");
  expect(listed.body.schedules[0]).toMatchObject({ name: "tick", runs: ticks.length });
  const m = scrape((await api("/metrics")).text);
  expect(m.value("turso_queue_schedule_runs_total", { queue: "default" })).toBeGreaterThanOrEqual(ticks.length);
  expect((await api("/v1/schedules/tick", { method: "DELETE" })).status).toBe(204);
  expect((await api("/v1/schedules/tick", { method: "DELETE" })).status).toBe(404);
});

it("singleton and replace under 32 concurrent publishers of one key", async () => {
  const send = (i: number, replace?: boolean) =>
    post<T.PublishAnswer>("/v1/groups/sync/messages", {
      event: { i },
      singleton_key: "sync-42",
      ...(replace ? { replace } : {}),
    });
  const first = await Promise.all(Array.from({ length: 32 }, (_, i) => send(i)));
  expect(new Set(first.map((a) => a.body.seq)).size).toBe(1);
  expect(first.filter((a) => a.status === 201 && a.body.deduplicated === false)).toHaveLength(1);
  expect(first.filter((a) => a.status === 200 && a.body.deduplicated === true)).toHaveLength(31);
  const replaced = await Promise.all(Array.from({ length: 32 }, (_, i) => send(100 + i, true)));
  expect(replaced.every((a) => a.body.replaced === true && a.body.seq === first[0]?.body.seq)).toBe(true);
  const peek = await api<T.PeekAnswer>("/v1/groups/sync/messages");
  expect(peek.body.messages).toHaveLength(1);
  expect((peek.body.messages[0] as T.QueuedMessage).event).toMatchObject({ i: expect.any(Number) });
  expect(((peek.body.messages[0] as T.QueuedMessage).event as { i: number }).i).toBeGreaterThanOrEqual(100);
  // Claimed: the key is free again.
  expect((await claim("w")).body.leases).toHaveLength(1);
  expect((await send(999)).status).toBe(201);
});

it("hostile settings are 400 naming the field, and change nothing", async () => {
  const refused: Array<[string, string, unknown, string]> = [
    ["/v1/queues/default", "PUT", { group_concurrency: 0 }, "group_concurrency"],
    ["/v1/queues/default", "PUT", { group_concurrency: -1 }, "group_concurrency"],
    ["/v1/queues/default", "PUT", { group_concurrency: 1e9 }, "group_concurrency"],
    ["/v1/settings", "PUT", { group_rate: { limit: 0, period: 1 } }, "group_rate.limit"],
    ["/v1/settings", "PUT", { group_rate: { limit: 5, period: -1 } }, "group_rate.period"],
    ["/v1/settings", "PUT", { group_rate: { limit: 5, period: 1, burst: 6 } }, "group_rate"],
    ["/v1/settings", "PUT", { group_rate: { limit: 1e12, period: 1 } }, "group_rate.limit"],
    ["/v1/settings", "PUT", { paused: "yes" }, "paused"],
    ["/v1/settings", "PUT", { pause: true }, '"pause"'],
    ["/v1/groups/g", "PUT", { concurrency: 1001 }, "concurrency"],
    ["/v1/groups/g", "PUT", { rate: { limit: 1, period: 1, per: 2 } }, 'rate."per"'],
    ["/v1/schedules/s", "PUT", { group_id: "g", event: 1, cron: "61 * * * *" }, "cron"],
    ["/v1/schedules/s", "PUT", { group_id: "g", event: 1, cron: "* * * *" }, "cron"],
    ["/v1/schedules/s", "PUT", { group_id: "g", event: 1, every: 0 }, "every"],
    ["/v1/schedules/s", "PUT", { group_id: "g", event: 1 }, "cron"],
    ["/v1/schedules/s", "PUT", { group_id: "g", event: 1, every: 5, cron: "* * * * *" }, "cron"],
    ["/v1/schedules/s", "PUT", { group_id: "g", event: 1, cron: "* * * * *", time_zone: "Mars/Base" }, "time_zone"],
    ["/v1/schedules/s", "PUT", { group_id: "g", event: 1, every: 5, extra: 1 }, '"extra"'],
    ["/v1/groups/g/messages", "POST", { event: 1, replace: true }, "replace"],
  ];
  for (const [path, method, json, field] of refused) {
    const res = await api(path, { method, json });
    expect(res.status, `${method} ${path} ${JSON.stringify(json)}`).toBe(400);
    expect(res.body.error.message.startsWith(`${field}:`), res.body.error.message).toBe(true);
  }
  expect(await rowCounts()).toEqual(EMPTY);
});
