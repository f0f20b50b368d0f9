/**
 * The Worker's production bundle on Miniflare (scripts/support/miniflare.ts) with named queues made as
 * `npm start` makes them: a sqld of the file's own with namespaces (QUEUE_DATABASES = "namespaces"),
 * so that a queue's delete drops its databases and a queue made again gets new ones. Optionally a
 * fault proxy (scripts/support/proxy.ts) between the Worker's writers and sqld, whose faults can be
 * aimed at one database by its namespace header (`onNamespace`).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ServedWorker, serveWorker } from "../../scripts/support/miniflare.js";
import { type Proxy as FaultProxy, startProxy } from "../../scripts/support/proxy.js";
import { type Sqld, startSqld } from "../../scripts/support/sqld.js";
import { NAMESPACE_HEADER, namespaceHeaderValue } from "../../src/core/connect.js";
import { sqldNamespaces } from "../../src/core/databases.js";

export interface Answer<B = unknown> {
  status: number;
  body: B;
  text: string;
  headers: Headers;
}

export interface NamedWorker {
  url: string;
  sqld: Sqld;
  /** Between the writers and sqld, when asked for. */
  proxy: FaultProxy | undefined;
  worker: ServedWorker;
  api<B = unknown>(
    path: string,
    o?: { method?: string; json?: unknown; signal?: AbortSignal; headers?: Record<string, string> },
  ): Promise<Answer<B>>;
  stop(): Promise<void>;
}

/** What a request to the database `namespace` carries (for `proxy.inject(..., { match })`). */
export function onNamespace(namespace: string): (request: string) => boolean {
  const value = namespaceHeaderValue(namespace);
  return (request) =>
    request
      .slice(0, request.indexOf("\r\n\r\n"))
      .split("\r\n")
      .some((line) => {
        const colon = line.indexOf(":");
        return line.slice(0, colon).toLowerCase() === NAMESPACE_HEADER && line.slice(colon + 1).trim() === value;
      });
}

export async function startNamedWorker(o: {
  token: string;
  proxy?: boolean;
  vars?: Record<string, string>;
  /** Served without the QueueWriter (each request serves itself). */
  noWriter?: boolean;
}): Promise<NamedWorker> {
  const dir = mkdtempSync(join(tmpdir(), "turso-queue-named-"));
  const sqld = await startSqld({ dataDir: join(dir, "data.sqld"), namespaces: true });
  await sqldNamespaces({ url: sqld.url, adminUrl: sqld.adminUrl as string }).create("default");
  const proxy = o.proxy ? await startProxy(sqld.port) : undefined;
  const worker = await serveWorker({
    databaseUrl: proxy?.url ?? sqld.url,
    queueToken: o.token,
    persist: join(dir, "objects"),
    ...(o.noWriter ? { noWriter: true } : {}),
    vars: { QUEUE_DATABASES: "namespaces", SQLD_ADMIN_URL: sqld.adminUrl as string, ...(o.vars ?? {}) },
  });
  const named: NamedWorker = {
    url: worker.url,
    sqld,
    proxy,
    worker,
    async api<B>(
      path: string,
      c: { method?: string; json?: unknown; signal?: AbortSignal; headers?: Record<string, string> } = {},
    ) {
      const res = await fetch(`${worker.url}${path}`, {
        method: c.method ?? (c.json === undefined ? "GET" : "POST"),
        headers: {
          authorization: `Bearer ${o.token}`,
          ...(c.json === undefined ? {} : { "content-type": "application/json" }),
          ...(c.headers ?? {}),
        },
        body: c.json === undefined ? undefined : JSON.stringify(c.json),
        signal: c.signal,
      });
      const text = await res.text();
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = undefined;
      }
      return { status: res.status, body: body as B, text, headers: res.headers };
    },
    async stop() {
      await worker.stop();
      await proxy?.close();
      await sqld.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return named;
}
