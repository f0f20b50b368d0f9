/**
 * "Consuming at the edge" (docs/library.md) as a Workers developer meets it: the packed tarball
 * installed into a fresh project, the page's Worker and wrangler.toml copied in, bundled by wrangler,
 * and run in workerd (Miniflare) against sqld, with a fulfilment service on 127.0.0.1 that records
 * what it is sent. Orders go in through the Worker's own route (the queue's API driven in-process
 * through `app.fetch`); a triggered `scheduled()` drains them: every order fulfilled once, in order per
 * customer, nothing left leased, and the run back well before its budget. An idle run costs two
 * claims; a drain on request (`ctx.waitUntil`) does the same work after its 202.
 */
import { execFile, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type Proxy as FaultProxy, startProxy } from "../../scripts/support/proxy.js";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { checkInvariants, resetDatabase } from "../support/db.js";
import { waitFor } from "../support/wait.js";
import { cleanEnv, docExample, packedTarball, ROOT } from "./tarball.js";

const run = promisify(execFile);
const TOKEN = "edge-consumer-test-token-0123456789";
/** Text only a claim statement carries, once per claim (src/core/sql/claim.ts). */
const CLAIM = "tq_claimed_at AS stamp, tq_trace AS trace";
/** The budget the page's scheduled() gives its drain. */
const CRON_BUDGET_MS = 20_000;

interface Order {
  id: number;
  customer: string;
}
interface Summary {
  stopped: string;
  claimed: number;
  acked: number;
  settleFailed: number;
  leftLeased: unknown[];
}

let work: string;
let mf: Miniflare;
let proxy: FaultProxy;
let admin: LibsqlTransport;
let fulfilment: Server;
const fulfilled: Order[] = [];
const logs: string[] = [];
let claims = 0;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "turso-queue-edge-"));
  const tarball = await packedTarball();
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string> };
  const app = join(work, "app");
  mkdirSync(join(app, "src"), { recursive: true });
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "orders", private: true, type: "module" }));
  await run(
    "npm",
    ["install", tarball, `hono@${pkg.dependencies.hono}`, "--prefer-offline", "--no-audit", "--no-fund"],
    { cwd: app, env: cleanEnv(), timeout: 180_000 },
  );
  writeFileSync(join(app, "src/worker.ts"), docExample("edge-worker"));
  const toml = docExample("edge-wrangler.toml");
  writeFileSync(join(app, "wrangler.toml"), toml);
  // Bundled as `wrangler deploy` would (this repo's wrangler: the project has none of its own).
  const built = spawnSync(join(ROOT, "node_modules/.bin/wrangler"), ["deploy", "--dry-run", "--outdir", "dist"], {
    cwd: app,
    env: cleanEnv({ WRANGLER_SEND_METRICS: "false" }),
    encoding: "utf8",
  });
  if (built.status !== 0) throw new Error(`wrangler deploy --dry-run failed:\n${built.stdout}\n${built.stderr}`);

  admin = await LibsqlTransport.create(inject("sqldUrl"));
  await resetDatabase(clientOf(admin));
  proxy = await startProxy(Number(new URL(inject("sqldUrl")).port));
  proxy.observe = (text) => {
    claims += text.split(CLAIM).length - 1;
  };
  fulfilment = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => {
      body += d.toString();
    });
    req.on("end", () => {
      fulfilled.push(JSON.parse(body) as Order);
      res.writeHead(200).end("ok");
    });
  });
  await new Promise<void>((r) => fulfilment.listen(0, "127.0.0.1", r));
  const { port } = fulfilment.address() as { port: number };

  mf = new Miniflare({
    modulesRoot: join(app, "dist"),
    modules: [{ type: "ESModule", path: join(app, "dist/worker.js") }],
    compatibilityDate: /^compatibility_date\s*=\s*"([^"]+)"/m.exec(toml)?.[1] ?? "2026-04-20",
    bindings: {
      TURSO_DATABASE_URL: proxy.url,
      QUEUE_TOKEN: TOKEN,
      FULFILMENT_URL: `http://127.0.0.1:${port}/orders`,
    },
    handleRuntimeStdio: (stdout, stderr) => {
      for (const stream of [stdout, stderr]) {
        stream.on("data", (d: Buffer) => logs.push(...d.toString().split("\n").filter(Boolean)));
      }
    },
  });
  await mf.ready;
}, 300_000);

afterAll(async () => {
  await mf?.dispose();
  fulfilment?.close();
  await proxy?.close();
  admin?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** The summaries the Worker's drains logged so far. */
const summaries = (): Summary[] =>
  logs.filter((l) => l.includes("drained: ")).map((l) => JSON.parse(l.slice(l.indexOf("drained: ") + 9)) as Summary);

async function order(o: Order): Promise<void> {
  const res = await mf.dispatchFetch("http://orders.test/orders", { method: "POST", body: JSON.stringify(o) });
  expect(res.status).toBe(202);
  await res.arrayBuffer();
}

/** Triggers the Worker's cron, as Cloudflare would; answers how long the invocation took. */
async function cron(): Promise<number> {
  // Miniflare's Fetcher runs the scheduled event (and its waitUntil) like the runtime; its types lack it.
  const worker = (await mf.getWorker()) as unknown as {
    scheduled(o: { cron: string }): Promise<{ outcome: string }>;
  };
  const started = Date.now();
  const result = await worker.scheduled({ cron: "* * * * *" });
  expect(result.outcome).toBe("ok");
  return Date.now() - started;
}

describe("Consuming at the edge (docs/library.md), in workerd from the packed tarball", () => {
  it("a Cron Trigger drains every order, in order per customer, leaves nothing leased, and returns well before its budget", async () => {
    const orders = Array.from({ length: 30 }, (_, i) => ({ id: i + 1, customer: `customer-${i % 5}` }));
    for (const o of orders) await order(o);
    expect((await admin.stats()).ready).toBe(5);

    const took = await cron();
    expect(took).toBeLessThan(CRON_BUDGET_MS / 2);
    expect(fulfilled.map((o) => o.id).sort((a, b) => a - b)).toEqual(orders.map((o) => o.id));
    for (let c = 0; c < 5; c++) {
      const ids = fulfilled.filter((o) => o.customer === `customer-${c}`).map((o) => o.id);
      expect(ids, `customer-${c} in order`).toEqual([...ids].sort((a, b) => a - b));
    }
    const [summary] = summaries();
    expect(summary).toMatchObject({ stopped: "drained", claimed: 30, acked: 30, settleFailed: 0, leftLeased: [] });
    // Nothing left leased, as the Worker's own mounted API reports it.
    const res = await mf.dispatchFetch("http://orders.test/queue/v1/stats", {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(await res.json()).toMatchObject({ ready: 0, waiting: 0, in_flight: 0, groups: 0 });
    await checkInvariants(clientOf(admin));
  });

  it("an idle run costs two claims and returns in well under a second", async () => {
    const before = claims;
    const took = await cron();
    expect(claims - before).toBe(2);
    expect(took).toBeLessThan(1000);
    expect(summaries().at(-1)).toMatchObject({ stopped: "drained", claimed: 0 });
  });

  it("a drain on request answers 202 at once and does the work in ctx.waitUntil", async () => {
    const done = fulfilled.length;
    for (let i = 0; i < 6; i++) await order({ id: 100 + i, customer: `late-${i % 2}` });
    const logged = summaries().length;
    const res = await mf.dispatchFetch("http://orders.test/drain", { method: "POST" });
    expect(res.status).toBe(202);
    await waitFor(async () => summaries().length > logged, { what: "the drain's summary" });
    expect(
      fulfilled
        .slice(done)
        .map((o) => o.id)
        .sort((a, b) => a - b),
    ).toEqual([100, 101, 102, 103, 104, 105]);
    expect(summaries().at(-1)).toMatchObject({ stopped: "drained", acked: 6, leftLeased: [] });
    expect((await admin.stats()).groups).toBe(0);
  });
});
