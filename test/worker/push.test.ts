/**
 * Push delivery through the real QueueWriter inside workerd, to a consumer on 127.0.0.1
 * (test/worker/global-setup.ts): signed deliveries acked, the alarm (stored by the object, so it outlives an eviction), the
 * cron that wakes the writer, delete. (Retries, backoff, hanging consumers, max_in_flight and FIFO
 * under load: test/app/writer/pusher.test.ts, on the same pusher in Node.)
 */

import { createScheduledController, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, expect, inject, it } from "vitest";
import { verifySignature } from "../../src/contract/signature.js";
import type * as T from "../../src/contract/types.js";
import type { PushDelivery } from "../../src/contract/types.js";
import { LibsqlTransport } from "../../src/core/transport.js";
import worker from "../../src/worker.js";
import { waitFor } from "../support/wait.js";
import { api, db, post, resetDatabase, writer } from "./support.js";

beforeEach(resetDatabase);
afterEach(async () => {
  const list = await api<T.SubscriptionList>("/v1/subscriptions");
  for (const s of list.body.subscriptions) await api(`/v1/subscriptions/${s.name}`, { method: "DELETE" });
});

let paths = 0;
/** A subscription with a consumer path of its own; answers its secret and what the consumer received. */
async function subscribe(name: string, extra: Record<string, unknown> = {}) {
  const path = `/${name}/${++paths}-${Date.now()}`;
  const res = await api<T.SubscriptionAnswer>(`/v1/subscriptions/${name}`, {
    method: "PUT",
    json: { url: `${inject("consumerUrl")}${path}`, ...extra },
  });
  expect(res.status).toBe(200);
  const received = async () => {
    const r = await fetch(`${inject("consumerLogUrl")}/?path=${encodeURIComponent(path)}`);
    return ((await r.json()) as Array<{ raw: string; signature: string }>).map((x) => ({
      ...x,
      delivery: JSON.parse(x.raw) as PushDelivery,
    }));
  };
  return { secret: res.body.signing_secret, received };
}

const depth = async () => {
  const s = (await api<T.Stats>("/v1/stats")).body;
  return s.ready + s.waiting + s.in_flight + s.parked + s.delayed;
};

it("pushes what is published, signed, and acks it on 200; the alarm is set while a subscription exists", async () => {
  const sub = await subscribe("hooks");
  const published = [];
  for (const [g, e] of [
    ["a", 1],
    ["b", 2],
    ["a", 3],
  ] as const) {
    published.push((await post<T.PublishAnswer>(`/v1/groups/${g}/messages`, { event: e })).body.seq);
  }
  const got = await waitFor(
    async () => {
      const r = await sub.received();
      return r.length === 3 && (await depth()) === 0 && r;
    },
    { what: "three deliveries acked" },
  );
  expect(got.map((r) => r.delivery.seq).sort((a, b) => a - b)).toEqual(published.sort((a, b) => a - b));
  expect(got.filter((r) => r.delivery.group_id === "a").map((r) => r.delivery.event)).toEqual([1, 3]);
  for (const r of got) {
    expect(r.delivery).toMatchObject({ subscription: "hooks", attempts: 1 });
    expect(await verifySignature(sub.secret, r.signature, r.raw)).toBe(true);
    expect(await verifySignature(sub.secret, r.signature, r.raw.replace("hooks", "hookz"))).toBe(false);
  }
  const alarm = await runInDurableObject(writer(), (_o, state) => state.storage.getAlarm());
  expect(alarm).not.toBeNull();
});

it("with no request arriving, the alarm (and the cron) deliver writes that bypassed the writer", async () => {
  const sub = await subscribe("resume");
  // Published straight into the database: the writer hears nothing of it.
  const direct = await LibsqlTransport.fromClient(db());
  await direct.publish("g", "by the alarm");
  expect(await runDurableObjectAlarm(writer())).toBe(true);
  await waitFor(async () => (await sub.received()).some((r) => r.delivery.event === "by the alarm"), {
    what: "the alarm's delivery",
  });
  await direct.publish("h", "by the cron");
  await worker.scheduled(createScheduledController({ cron: "* * * * *" }), env);
  await waitFor(async () => (await sub.received()).some((r) => r.delivery.event === "by the cron"), {
    what: "the cron's delivery",
  });
  direct.close();
});

it("a 500 is nacked with backoff and comes back with attempts + 1", async () => {
  const sub = await subscribe("status-500");
  await post("/v1/groups/g/messages", { event: "retry me" });
  await waitFor(async () => (await sub.received()).length === 1, { what: "the first delivery" });
  await waitFor(async () => (await api<T.Stats>("/v1/stats")).body.parked === 1, { what: "the backoff's park" });
  const got = await waitFor(
    async () => {
      const r = await sub.received();
      return r.length === 2 && r;
    },
    { what: "the retry" },
  );
  expect(got.map((r) => r.delivery.attempts)).toEqual([1, 2]);
});

it("after a delete no delivery starts", async () => {
  const sub = await subscribe("gone");
  await post("/v1/groups/g/messages", { event: 1 });
  await waitFor(async () => (await sub.received()).length === 1 && (await depth()) === 0, { what: "the delivery" });
  expect((await api("/v1/subscriptions/gone", { method: "DELETE" })).status).toBe(204);
  await post("/v1/groups/g/messages", { event: 2 });
  await writer().wake();
  expect(await sub.received()).toHaveLength(1);
  expect((await api<T.Stats>("/v1/stats")).body.ready).toBe(1);
});
