/**
 * The workers project's own sqld (separate from the node project's), started once. The Worker
 * under test reaches it through a counting proxy (vitest.config.ts binds `workerSqldUrl`, the
 * proxy's URL), so that a test can count the requests that reach the database, by what they carry:
 * `GET <sqldCounterUrl>/?match=<text>[&match=<text>...]` answers how many requests so far held
 * every one of those texts (counted from the first time that question was asked).
 *
 * Faults: `POST <sqldControlUrl>/inject` puts one between the Worker and its sqld; `shardControlUrl`
 * controls a proxy in front of one shard of the mapped queue `shaky` (shaky--2); `faultSqldUrl`
 * is another way to the same sqld, for the library inside workerd, under `faultControlUrl`
 * (scripts/support/proxy.ts `controlProxy`); `sqldAdminUrl` blocks the database as Turso blocks one
 * over its quota.
 *
 * It also runs a push consumer on 127.0.0.1 (`consumerUrl`): a POST to `<consumerUrl>/<path>` is
 * recorded and answered 200 (or `/status-<code>/...`: that status); `GET <consumerLogUrl>/?path=/<path>`
 * answers what that path received (raw bodies and signatures, in arrival order).
 */
import { createServer } from "node:http";
import type { TestProject } from "vitest/node";
import { startConsumer } from "../../scripts/support/consumer.js";
import { controlProxy, startProxy } from "../../scripts/support/proxy.js";
import { startSqld } from "../../scripts/support/sqld.js";
import { sqldNamespaces } from "../../src/core/databases.js";

import type {} from "./provided.js";

/**
 * The databases the Worker's static map names (QUEUE_DATABASES): namespaces of a second sqld, so that
 * named and sharded queues run here as in production, each in a database of its own.
 */
export const MAPPED = [
  "emails",
  "orders",
  "spare",
  ...[0, 1, 2, 3].map((i) => `billing--${i}`),
  "mixed--0",
  ...[0, 1, 2, 3].map((i) => `shaky--${i}`),
];

export default async function setup(project: TestProject) {
  const [sqld, ns] = await Promise.all([startSqld({ admin: true }), startSqld({ namespaces: true })]);
  const provider = sqldNamespaces({ url: ns.url, adminUrl: ns.adminUrl as string });
  const map = Object.fromEntries(await Promise.all(MAPPED.map(async (n) => [n, await provider.create(n)] as const)));
  // A queue mapped, by mistake, onto another queue's shard (test/worker/shards.test.ts).
  map["mixed--1"] = map["billing--1"] as (typeof map)[string];
  // A sharded queue one of whose shards sits behind a fault proxy (a primary that goes down).
  const shaky = await startProxy(ns.port);
  const shakyControl = await controlProxy(shaky);
  map["shaky--2"] = { ...(map["shaky--2"] as (typeof map)[string]), url: shaky.url };
  project.provide("shardControlUrl", shakyControl.url);
  project.provide("workerQueueDatabases", JSON.stringify(map));
  project.provide("nsSqldUrl", ns.url);
  const proxy = await startProxy(sqld.port);
  const counts = new Map<string, { texts: string[]; n: number }>();
  proxy.observe = (request) => {
    for (const c of counts.values()) if (c.texts.every((t) => request.includes(t))) c.n++;
  };
  const counter = createServer((req, res) => {
    const texts = new URL(req.url ?? "/", "http://x").searchParams.getAll("match");
    const key = JSON.stringify(texts);
    let c = counts.get(key);
    if (c === undefined) {
      c = { texts, n: 0 };
      counts.set(key, c);
    }
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ requests: c.n }));
  });
  await new Promise<void>((resolve) => counter.listen(0, "127.0.0.1", resolve));
  const addr = counter.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  const consumer = await startConsumer((r) => ({ status: Number(/^\/status-([0-9]{3})\//.exec(r.path)?.[1] ?? 200) }));
  const log = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://x").searchParams.get("path");
    const got = consumer.received.filter((r) => r.path === path).map((r) => ({ raw: r.raw, signature: r.signature }));
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify(got));
  });
  await new Promise<void>((resolve) => log.listen(0, "127.0.0.1", resolve));
  const logAddr = log.address();
  project.provide("consumerUrl", consumer.url);
  project.provide("consumerLogUrl", `http://127.0.0.1:${typeof logAddr === "object" && logAddr ? logAddr.port : 0}`);
  project.provide("workerSqldUrl", proxy.url);
  project.provide("sqldCounterUrl", `http://127.0.0.1:${port}`);
  // Faults between the Worker's writer and its sqld, and a second way in for the library inside
  // workerd (test/worker/outages.test.ts), each with its control (scripts/support/proxy.ts).
  const control = await controlProxy(proxy);
  const faulty = await startProxy(sqld.port);
  const faultyControl = await controlProxy(faulty);
  project.provide("sqldControlUrl", control.url);
  project.provide("faultSqldUrl", faulty.url);
  project.provide("faultControlUrl", faultyControl.url);
  project.provide("sqldAdminUrl", sqld.adminUrl as string);
  return async () => {
    await new Promise<void>((resolve) => counter.close(() => resolve()));
    await new Promise<void>((resolve) => log.close(() => resolve()));
    await consumer.close();
    await Promise.all([control.close(), faultyControl.close(), faulty.close(), shakyControl.close(), shaky.close()]);
    await proxy.close();
    await Promise.all([sqld.stop(), ns.stop()]);
  };
}
