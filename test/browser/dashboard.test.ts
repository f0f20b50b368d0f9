/**
 * The dashboard in a real browser: Chromium (Debian's if installed, else the one @sparticuz/chromium
 * ships; test/support/chromium.ts), driven by playwright-core, against the Worker as `wrangler dev`
 * serves it (scripts/support/worker.ts) and the real sqld. (The screenshot in the docs: test/browser/charts.test.ts.)
 */
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type RunningWorker, startWorker } from "../../scripts/support/worker.js";
import type * as T from "../../src/contract/types.js";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { apiAt } from "../support/api.js";
import { launchChromium } from "../support/chromium.js";
import { resetDatabase } from "../support/db.js";

const TOKEN = "browser-test-token-0123456789";

let admin: LibsqlTransport;
let worker: RunningWorker;
let browser: Browser;
let page: Page;

/** A call to the API from Node, as any client would make it. */
const api = apiAt(() => worker.url, TOKEN);

/**
 * Publishes into `group` at priority 4 and nacks until the message is a dead letter (claiming with
 * min_priority 4, so that the other groups' messages are left alone); returns its seq.
 */
async function deadLetter(group: string, event: unknown): Promise<number> {
  const { seq } = (await api<T.PublishAnswer>(`/v1/groups/${group}/messages`, "POST", { event, priority: 4 })).body;
  for (;;) {
    const c = await api<T.Lease>("/v1/claims", "POST", {
      worker_id: "poison-handler",
      visibility: 30,
      min_priority: 4,
    });
    expect(c.status).toBe(200);
    expect(c.body.seq).toBe(seq);
    const res = await fetch(`${worker.url}/v1/leases/${c.body.lease_id}/nack`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    if (res.headers.get("dead-lettered") === "true") return seq;
  }
}

const counter = (name: string) => page.locator(`[data-counter="${name}"] .value`);
/** Waits (no sleep) until the counter shows `value`. */
const counterShows = (name: string, value: number) =>
  counter(name)
    .filter({ hasText: new RegExp(`^${value}$`) })
    .waitFor({ timeout: 15_000 });

beforeAll(async () => {
  admin = await LibsqlTransport.create(inject("sqldUrl"));
  await resetDatabase(clientOf(admin));
  worker = await startWorker({ databaseUrl: inject("sqldUrl"), queueToken: TOKEN });
  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
});

afterAll(async () => {
  await browser?.close();
  await worker?.stop();
  admin?.close();
});

describe("the dashboard", () => {
  it("asks for the token, says when it is wrong, and keeps the right one in sessionStorage only", async () => {
    await page.goto(`${worker.url}/dashboard`);
    await page.locator("#login").waitFor({ state: "visible" });
    expect(await page.locator("#board").isHidden()).toBe(true);

    await page.fill("#token", "not-the-token-at-all");
    await page.click("#login button[type=submit]");
    await page.locator("#login-error").filter({ hasText: "refused this key (401)" }).waitFor();
    expect(await page.evaluate(() => sessionStorage.getItem("turso-queue-token"))).toBe(null);
    expect(await page.locator("#board").isHidden()).toBe(true);

    await page.fill("#token", TOKEN);
    await page.click("#login button[type=submit]");
    await page.locator("#board").waitFor({ state: "visible" });
    await counterShows("ready", 0);
    expect(await page.evaluate(() => sessionStorage.getItem("turso-queue-token"))).toBe(TOKEN);
    expect(await page.context().cookies()).toEqual([]);
    expect(page.url()).toBe(`${worker.url}/dashboard`);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
  });

  it("shows the counts after a publish, refreshed in place, and the busiest groups", async () => {
    await page.evaluate(() => {
      (window as unknown as { notReloaded: boolean }).notReloaded = true;
    });
    const pub = await api<T.PublishBatchAnswer>("/v1/messages", "POST", {
      messages: [
        { group_id: "orders", event: { order: 1 } },
        { group_id: "orders", event: { order: 2 } },
        { group_id: "orders", event: { order: 3 } },
        { group_id: "emails", event: { to: "ada@example.com" }, priority: 2 },
      ],
    });
    expect(pub.status).toBe(201);
    // One lease in "orders": its other two messages wait behind it.
    const c = await api<T.Lease>("/v1/claims", "POST", { worker_id: "w1", visibility: 300 });
    expect(c.body.group_id).toBe("orders");

    await page.click("#refresh");
    await counterShows("in_flight", 1);
    await counterShows("waiting", 2);
    await counterShows("ready", 1);
    await counterShows("groups", 2);
    await counterShows("dead_letters", 0);
    expect(await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded)).toBe(true);

    const rows = page.locator("#groups tbody tr");
    expect(await rows.evaluateAll((trs) => trs.map((tr) => (tr as HTMLElement).dataset.group))).toEqual([
      "orders",
      "emails",
    ]);
    expect(await rows.first().locator("td").nth(1).textContent()).toBe("3");
    expect(await rows.first().locator("td").nth(3).textContent()).toBe("in flight");
    expect((await api<T.Stats>("/v1/stats")).body).toMatchObject({ ready: 1, waiting: 2, in_flight: 1, groups: 2 });
  });

  it("redrives a dead letter from the page, and the API confirms it; deletes another", async () => {
    const poison = await deadLetter("payments", { charge: 42, card: "<b>not markup</b>" });
    const other = await deadLetter("payments-eu", { charge: 7 });
    await page.click("#refresh");
    await counterShows("dead_letters", 2);
    const row = page.locator(`#dead-letters tr[data-seq="${poison}"]`);
    await row.waitFor();
    // Events are shown as text, never as markup.
    expect(await row.locator("td.event").textContent()).toBe('{"charge":42,"card":"<b>not markup</b>"}');
    expect(await row.locator("b").count()).toBe(0);

    await row.locator('button[data-action="redrive"]').click();
    await page
      .locator("#notice")
      .filter({ hasText: `Dead letter ${poison} redriven as message` })
      .waitFor();
    await counterShows("dead_letters", 1);
    const left = (await api<T.DeadLetterPage>("/v1/dead-letters")).body.dead_letters.map((d) => d.seq);
    expect(left).toEqual([other]);
    // Back at the tail of its group, with fresh attempts.
    const again = await api<T.Lease>("/v1/claims", "POST", { worker_id: "w2", visibility: 30, min_priority: 4 });
    expect(again.body).toMatchObject({ group_id: "payments", event: { charge: 42 }, attempts: 1 });
    expect(again.body.seq).toBeGreaterThan(poison);

    page.once("dialog", (d) => void d.accept());
    await page.locator(`#dead-letters tr[data-seq="${other}"] button[data-action="delete"]`).click();
    await page
      .locator("#notice")
      .filter({ hasText: `Dead letter ${other} deleted.` })
      .waitFor();
    await counterShows("dead_letters", 0);
    expect((await api<T.DeadLetterPage>("/v1/dead-letters")).body.dead_letters).toEqual([]);
    expect((await api(`/v1/dead-letters/${other}`, "DELETE")).status).toBe(404);
    await page.screenshot({ path: join(tmpdir(), "turso-queue-dashboard.png") });
  });

  it("lists the push subscriptions and counts them", async () => {
    await page.click("#refresh");
    await counterShows("subscriptions", 0);
    expect(await page.locator("#subscriptions-empty").isVisible()).toBe(true);
    const put = await api("/v1/subscriptions/billing", "PUT", {
      url: "http://127.0.0.1:9/<b>hook</b>",
      max_in_flight: 3,
      visibility: 20,
    });
    expect(put.status).toBe(200);
    try {
      await page.click("#refresh");
      await counterShows("subscriptions", 1);
      const row = page.locator('#subscriptions tbody tr[data-subscription="billing"]');
      expect(await row.locator("td").allTextContents()).toEqual([
        "billing",
        "http://127.0.0.1:9/<b>hook</b>",
        "0",
        "3",
        "20 s",
      ]);
      expect(await row.locator("b").count()).toBe(0);
      expect(await page.locator("#subscriptions-empty").isHidden()).toBe(true);
    } finally {
      expect((await api("/v1/subscriptions/billing", "DELETE")).status).toBe(204);
    }
  });

  it("a token that stops working sends the page back to the form with a message", async () => {
    // The refresh every 10 s would find out by itself, racing the click: this test's click does.
    await page.uncheck("#auto");
    await page.evaluate(() => sessionStorage.setItem("turso-queue-token", "revoked-token-0123456789"));
    await page.click("#refresh");
    await page.locator("#login-error").filter({ hasText: "refused this key (401)" }).waitFor();
    expect(await page.locator("#board").isHidden()).toBe(true);
    expect(await page.evaluate(() => sessionStorage.getItem("turso-queue-token"))).toBe(null);
  });

  it("the docs page renders the OpenAPI document with nothing from elsewhere", async () => {
    const requests: string[] = [];
    page.on("request", (r) => requests.push(r.url()));
    await page.goto(`${worker.url}/docs`);
    await page.locator("#publish").waitFor();
    expect(await page.locator("section.op").count()).toBeGreaterThanOrEqual(11);
    expect(requests.every((u) => u.startsWith(worker.url))).toBe(true);
  });
});

describe("every page", () => {
  it("declares its icon, which is served (a browser asks for no /favicon.ico), and loads with nothing failing", async () => {
    const fresh = await browser.newPage();
    const failed: string[] = [];
    fresh.on("response", (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${new URL(r.url()).pathname}`);
    });
    fresh.on("requestfailed", (r) => failed.push(`failed ${new URL(r.url()).pathname}`));
    fresh.on("console", (m) => {
      if (m.type() === "error") failed.push(`console: ${m.text()}`);
    });
    const icons: Array<{ path: string; href: string | undefined; status: number; type: string | undefined }> = [];
    try {
      for (const path of ["/", "/docs", "/dashboard"]) {
        await fresh.goto(`${worker.url}${path}`, { waitUntil: "networkidle" });
        const href = await fresh.evaluate(() => document.querySelector<HTMLLinkElement>('link[rel="icon"]')?.href);
        // Headless Chromium fetches no icon by itself: fetch it as a headed one would, from the page.
        const got = href ? await fresh.request.get(href) : undefined;
        icons.push({
          path,
          href: href === undefined ? undefined : new URL(href).pathname,
          status: got?.status() ?? 0,
          type: got?.headers()["content-type"],
        });
      }
    } finally {
      await fresh.close();
    }
    expect(failed).toEqual([]);
    expect(icons).toEqual(
      ["/", "/docs", "/dashboard"].map((path) => ({
        path,
        href: "/assets/icon.svg",
        status: 200,
        type: "image/svg+xml",
      })),
    );
  });
});
