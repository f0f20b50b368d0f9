/**
 * The dashboard's flow controls in a real browser (Chromium, playwright-core) against the Worker
 * under `wrangler dev` and the real sqld: the paused badge and the pause/resume button of the queue
 * and of a group (what the API then says), a group's concurrency and rate, the schedules with their
 * next run.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { type RunningWorker, startWorker } from "../../scripts/support/worker.js";
import type * as T from "../../src/contract/types.js";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { apiAt } from "../support/api.js";
import { launchChromium } from "../support/chromium.js";
import { resetDatabase } from "../support/db.js";

const TOKEN = "browser-flow-token-0123456789";

let admin: LibsqlTransport;
let worker: RunningWorker;
let browser: Browser;
let page: Page;

const api = apiAt(() => worker.url, TOKEN);

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
  if (admin) await resetDatabase(clientOf(admin));
  admin?.close();
});

it("pauses and resumes the queue and a group, and shows settings and schedules", async () => {
  await api("/v1/groups/orders/messages", "POST", { event: { order: 1 } });
  await api("/v1/groups/orders", "PUT", { concurrency: 3, rate: { limit: 2, period: 1 } });
  await api("/v1/schedules/nightly", "PUT", { group_id: "reports", event: "run", cron: "0 2 * * *" });

  await page.goto(`${worker.url}/dashboard`);
  await page.fill("#token", TOKEN);
  await page.click("#login button[type=submit]");
  await page.locator("#board").waitFor({ state: "visible" });
  expect(await page.locator("#paused-badge").isHidden()).toBe(true);
  await page.locator("#flow-settings").filter({ hasText: "1 at once, no rate" }).waitFor();
  const row = page.locator('#schedules tr[data-schedule="nightly"]');
  await row.waitFor();
  expect(await row.locator("td").nth(2).textContent()).toBe("0 2 * * * (UTC)");
  expect(await row.locator(".next-run").textContent()).not.toBe("never");

  // The queue: paused by the button, as the API then says; resumed by it.
  await page.click("#pause-queue");
  await page.locator("#paused-badge").waitFor({ state: "visible" });
  expect((await api<T.QueueSettings>("/v1/settings")).body.paused).toBe(true);
  expect(await page.locator("#pause-queue").textContent()).toBe("Resume queue");
  await page.click("#pause-queue");
  await page.locator("#paused-badge").waitFor({ state: "hidden" });
  expect((await api<T.QueueSettings>("/v1/settings")).body.paused).toBe(false);

  // A group: its settings, and its pause.
  await page.click('#groups tr[data-group="orders"]');
  await page.locator("#group-settings").filter({ hasText: "3 at once, 2 per 1 s" }).waitFor();
  await page.click("#pause-group");
  await page.locator("#group-paused-badge").waitFor({ state: "visible" });
  expect((await api<T.GroupSettingsAnswer>("/v1/groups/orders")).body.paused).toBe(true);
  await page.click("#pause-group");
  await page.locator("#group-paused-badge").waitFor({ state: "hidden" });
  expect((await api<T.GroupSettingsAnswer>("/v1/groups/orders")).body.paused).toBe(false);
});
