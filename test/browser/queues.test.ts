/**
 * The pages in a real browser, where the API is not the only app: the dashboard's queue picker
 * against the Worker serving named and sharded queues (sqld namespaces), and every page of the API
 * mounted under a prefix (`app.route("/queue", createApp(...))`) in another Hono app, served over
 * HTTP from Node.
 */
import { createServer, type Server } from "node:http";
import { Hono } from "hono";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type RunningWorker, startWorker } from "../../scripts/support/worker.js";
import { createApp } from "../../src/app/app.js";
import { perRequestTransports } from "../../src/app/transports.js";
import { createClient as createHttpClient } from "../../src/client/index.js";
import { sqldNamespaces } from "../../src/core/databases.js";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { launchChromium } from "../support/chromium.js";
import { resetDatabase } from "../support/db.js";

const TOKEN = "browser-queues-token-0123456789";
let browser: Browser;

beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

const counterOf = (page: Page, name: string) => page.locator(`[data-counter="${name}"] .value`);
const shows = (page: Page, name: string, value: number) =>
  counterOf(page, name)
    .filter({ hasText: new RegExp(`^${value}$`) })
    .waitFor({ timeout: 15_000 });

async function signIn(page: Page, url: string): Promise<void> {
  await page.goto(url);
  await page.locator("#login").waitFor({ state: "visible" });
  await page.fill("#token", TOKEN);
  await page.click("#login button[type=submit]");
  await page.locator("#board").waitFor({ state: "visible" });
}

describe("the dashboard's queue picker", () => {
  let worker: RunningWorker;
  const run = Date.now().toString(36);
  const emails = `emails-${run}`;
  const billing = `billing-${run}`;

  beforeAll(async () => {
    const provider = sqldNamespaces({ url: inject("nsSqldUrl"), adminUrl: inject("nsAdminUrl") });
    await provider.create("default");
    worker = await startWorker({
      databaseUrl: inject("nsSqldUrl"),
      queueToken: TOKEN,
      vars: { QUEUE_DATABASES: "namespaces", SQLD_ADMIN_URL: inject("nsAdminUrl") },
    });
    const api = createHttpClient({ url: worker.url, token: TOKEN });
    await api.createQueue(emails);
    await api.createQueue(billing, { shards: 2 });
    await api.queue(emails).publish("to-ada", { subject: "hi" });
    await api.queue(billing).publishMany(Array.from({ length: 5 }, (_, i) => ({ groupId: `invoice-${i}`, event: i })));
    await api.queue(billing).claim("biller", 300);
  }, 120_000);
  afterAll(async () => {
    const api = createHttpClient({ url: worker.url, token: TOKEN });
    await api.deleteQueue(emails, { force: true });
    await api.deleteQueue(billing, { force: true });
    await worker?.stop();
  });

  it("lists every queue with its counts, and shows the one picked", async () => {
    const page = await browser.newPage();
    await signIn(page, `${worker.url}/dashboard`);
    const options = await page
      .locator("#queue option")
      .evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value));
    expect(options).toEqual(expect.arrayContaining(["default", emails, billing]));
    expect(options[0]).toBe("default");
    expect(await page.locator(`#queue option[value="${billing}"]`).textContent()).toBe(`${billing} (2 shards)`);
    const row = page.locator(`#queues tr[data-queue="${billing}"] td`);
    expect(await row.allTextContents()).toEqual([billing, "2", "4", "0", "1", "0"]);

    await page.selectOption("#queue", billing);
    await shows(page, "in_flight", 1);
    await shows(page, "ready", 4);
    await shows(page, "groups", 5);
    expect(await page.locator("#groups tbody tr").count()).toBe(5);

    await page.selectOption("#queue", emails);
    await shows(page, "ready", 1);
    await shows(page, "in_flight", 0);
    expect(
      await page.locator("#groups tbody tr").evaluateAll((trs) => trs.map((tr) => (tr as HTMLElement).dataset.group)),
    ).toEqual(["to-ada"]);
    // Kept in this tab: a reload shows the same queue.
    await page.reload();
    await shows(page, "ready", 1);
    expect(await page.locator("#queue").inputValue()).toBe(emails);
    await page.close();
  });

  it("shows a queue whose database is gone as unreachable, and every other queue as before", async () => {
    const api = createHttpClient({ url: worker.url, token: TOKEN });
    const gone = `gone-${run}`;
    await api.createQueue(gone);
    // Its database dropped behind the catalog's back.
    expect((await fetch(`${inject("nsAdminUrl")}/v1/namespaces/${gone}`, { method: "DELETE" })).status).toBe(200);
    const page = await browser.newPage();
    await signIn(page, `${worker.url}/dashboard`);
    const row = page.locator(`#queues tr[data-queue="${gone}"] td`);
    await row
      .nth(2)
      .filter({ hasText: /^unreachable: UNAVAILABLE$/ })
      .waitFor({ timeout: 15_000 });
    expect(await page.locator(`#queues tr[data-queue="${billing}"] td`).allTextContents()).toEqual([
      billing,
      "2",
      "4",
      "0",
      "1",
      "0",
    ]);
    await page.selectOption("#queue", emails);
    await shows(page, "ready", 1);
    await page.close();
    await api.deleteQueue(gone, { force: true }).catch(() => undefined);
  });
});

describe("every page of the API mounted under /queue in another app", () => {
  let server: Server;
  let url: string;
  let admin: LibsqlTransport;

  beforeAll(async () => {
    admin = await LibsqlTransport.create(inject("sqldUrl"));
    await resetDatabase(clientOf(admin));
    const app = new Hono();
    app.get("/", (c) => c.text("my own app"));
    app.route("/queue", createApp(perRequestTransports()));
    const env = { TURSO_DATABASE_URL: inject("sqldUrl"), QUEUE_TOKEN: TOKEN };
    // Node's http to the Web's Request and Response, as any Node adapter does.
    server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
      const request = new Request(`http://${req.headers.host}${req.url}`, {
        method: req.method,
        headers,
        body: req.method === "GET" || req.method === "HEAD" ? undefined : Buffer.concat(chunks),
      });
      const answer = await app.fetch(request, env);
      const out: Record<string, string> = {};
      answer.headers.forEach((value, key) => {
        out[key] = value;
      });
      res.writeHead(answer.status, out);
      res.end(Buffer.from(await answer.arrayBuffer()));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    server?.close();
    admin?.close();
  });

  it("the dashboard, its assets and its API calls all stay under the prefix", async () => {
    const page = await browser.newPage();
    const requests: Array<{ url: string; status: number }> = [];
    page.on("response", (r) => requests.push({ url: r.url(), status: r.status() }));
    await signIn(page, `${url}/queue/dashboard`);
    await admin.publish("orders", { order: 1 });
    await page.click("#refresh");
    await shows(page, "ready", 1);
    // The stylesheet applied (the counters are laid out in a grid).
    expect(await page.locator("#counters").evaluate((e) => getComputedStyle(e).display)).toBe("grid");
    const paths = requests.map((r) => new URL(r.url).pathname);
    expect(
      paths.every((p) => p.startsWith("/queue/")),
      paths.join(", "),
    ).toBe(true);
    expect(paths).toEqual(
      expect.arrayContaining(["/queue/assets/style.css", "/queue/assets/dashboard.js", "/queue/v1/stats"]),
    );
    expect(requests.filter((r) => r.status >= 400)).toEqual([]);
    expect(await page.locator("nav a").first().getAttribute("href")).toBe("/queue/docs");
    await page.close();
  });

  it("the docs page and the home page link within the prefix, and the document says where the API is", async () => {
    const page = await browser.newPage();
    const requests: string[] = [];
    page.on("request", (r) => requests.push(new URL(r.url()).pathname));
    await page.goto(`${url}/queue/docs`);
    await page.locator("#publish").waitFor();
    expect(await page.locator("header nav a").evaluateAll((as) => as.map((a) => a.getAttribute("href")))).toEqual([
      "/queue/openapi.json",
      "/queue/dashboard",
    ]);
    expect(requests.every((p) => p.startsWith("/queue/"))).toBe(true);
    // The app's home is the prefix itself (in Hono, `/queue/` is another path).
    await page.goto(`${url}/queue`);
    expect(await page.locator("li a").evaluateAll((as) => as.map((a) => a.getAttribute("href")))).toEqual([
      "/queue/docs",
      "/queue/dashboard",
      "/queue/openapi.json",
      "/queue/healthz",
    ]);
    const doc = (await (await fetch(`${url}/queue/openapi.json`)).json()) as { servers: Array<{ url: string }> };
    expect(doc.servers).toEqual([{ url: "/queue" }]);
    await page.close();
  });
});
