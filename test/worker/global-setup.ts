/**
 * The workers project's own sqld (separate from the node project's), started once. The Worker
 * under test reaches it through a counting proxy (vitest.config.ts binds `workerSqldUrl`, the
 * proxy's URL), so that a test can count the requests that reach the database, by what they carry:
 * `GET <sqldCounterUrl>/?match=<text>[&match=<text>...]` answers how many requests so far held
 * every one of those texts (counted from the first time that question was asked).
 */
import { createServer } from "node:http";
import type { TestProject } from "vitest/node";
import { startSqld } from "../../scripts/sqld.js";
import { startProxy } from "../support/proxy.js";

import type {} from "./provided.js";

export default async function setup(project: TestProject) {
  const sqld = await startSqld();
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
  project.provide("workerSqldUrl", proxy.url);
  project.provide("sqldCounterUrl", `http://127.0.0.1:${port}`);
  return async () => {
    await new Promise<void>((resolve) => counter.close(() => resolve()));
    await proxy.close();
    await sqld.stop();
  };
}
