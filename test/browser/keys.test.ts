/**
 * The dashboard with keys, in a real browser (Chromium, test/support/chromium.ts) against the Worker
 * as `wrangler dev` serves it and a real sqld: a read key sees the queue but is offered no action it
 * may not take; a key that may not read is told so; the root key manages keys in a panel that shows
 * a new key's secret once, and revokes one.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type RunningWorker, startWorker } from "../../scripts/support/worker.js";
import type * as T from "../../src/contract/types.js";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { apiAt } from "../support/api.js";
import { launchChromium } from "../support/chromium.js";
import { resetDatabase } from "../support/db.js";

const TOKEN = "browser-keys-token-0123456789";

let admin: LibsqlTransport;
let worker: RunningWorker;
let browser: Browser;
const api = apiAt(() => worker.url, TOKEN);

async function makeKey(body: T.KeyRequest): Promise<T.KeyCreated> {
  const res = await api<T.KeyCreated>("/v1/keys", "POST", body);
  expect(res.status).toBe(201);
  return res.body;
}

async function signIn(key: string): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(`${worker.url}/dashboard`);
  await page.locator("#login").waitFor({ state: "visible" });
  await page.fill("#token", key);
  await page.click("#login button[type=submit]");
  return page;
}

beforeAll(async () => {
  admin = await LibsqlTransport.create(inject("sqldUrl"));
  await resetDatabase(clientOf(admin));
  await clientOf(admin).batch(["DELETE FROM tq_keys", "DELETE FROM tq_audit"], "write");
  worker = await startWorker({ databaseUrl: inject("sqldUrl"), queueToken: TOKEN });
  browser = await launchChromium();
  // A group with messages, and a dead letter: what a manage key could act on.
  expect((await api("/v1/groups/orders/messages", "POST", { event: { order: 1 } })).status).toBe(201);
  await admin.publish("poison", { bad: true }, 4);
  for (;;) {
    const lease = await admin.claim("w", 30, 4);
    if (lease === null) break;
    if ((await admin.nack(lease)).deadLettered) break;
  }
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await worker?.stop();
  admin?.close();
});

describe("the dashboard with keys", () => {
  it("a read key sees the queue, and is offered no purge, redrive, delete or keys", async () => {
    const reader = await makeKey({ name: "dashboard viewer", scopes: ["read"] });
    const page = await signIn(reader.key);
    await page.locator("#board").waitFor({ state: "visible" });
    await page.locator('[data-counter="dead_letters"] .value').filter({ hasText: /^1$/ }).waitFor();
    expect(await page.locator("#whoami").textContent()).toBe(`key ${reader.id}: read`);
    // The dead letter is listed, without its buttons.
    await page.locator("#dead-letters tbody tr").first().waitFor();
    expect(await page.locator("#dead-letters button").count()).toBe(0);
    // A group's messages are shown, without the purge.
    await page.locator('#groups tbody tr[data-group="orders"]').click();
    await page.locator("#group").waitFor({ state: "visible" });
    await page.locator("#group-messages tbody tr").first().waitFor();
    expect(await page.locator("#purge").isHidden()).toBe(true);
    expect(await page.locator("#keys-panel").isHidden()).toBe(true);
    await page.close();
  });

  it("a key that may not read is told what it lacks, and kept out", async () => {
    const publisher = await makeKey({ name: "publisher", scopes: ["publish"] });
    const page = await signIn(publisher.key);
    await page.locator("#login-error").filter({ hasText: "may not read queues (it has publish)" }).waitFor();
    expect(await page.locator("#board").isHidden()).toBe(true);
    expect(await page.evaluate(() => sessionStorage.getItem("turso-queue-token"))).toBe(null);
    await page.close();
  });

  it("the root key makes a key in the panel (its secret shown once) and revokes one", async () => {
    const page = await signIn(TOKEN);
    await page.locator("#keys-panel").waitFor({ state: "visible" });
    // The dead letter's actions are offered to a key that may manage.
    expect(await page.locator("#dead-letters button").count()).toBe(2);

    await page.fill("#key-name", "prometheus");
    await page.check('input[name=scope][value="read"]');
    await page.fill("#key-queues", "default");
    await page.click("#new-key-form button[type=submit]");
    await page.locator("#new-key").waitFor({ state: "visible" });
    const secret = (await page.locator("#new-key-secret").textContent()) as string;
    expect(secret).toMatch(/^tq_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
    const id = secret.slice(3, 19);
    await page.locator(`#keys tbody tr[data-key="${id}"]`).waitFor();
    const row = page.locator(`#keys tbody tr[data-key="${id}"] td`);
    expect(await row.allTextContents()).toEqual(
      expect.arrayContaining(["prometheus", id, "read", "default", "never", "Revoke"]),
    );
    // The key works, with what was asked: read on the default queue, nothing else.
    const made = apiAt(() => worker.url, secret);
    expect((await made<T.Stats>("/v1/stats")).status).toBe(200);
    expect((await made("/v1/groups/g/messages", "POST", { event: 1 })).status).toBe(403);
    // Shown once: gone from the page once acknowledged, and never listed.
    await page.click("#new-key-done");
    expect(await page.locator("#new-key").isHidden()).toBe(true);
    expect(await page.content()).not.toContain(secret.slice(20));

    page.once("dialog", (d) => void d.accept());
    await page.locator(`#keys tbody tr[data-key="${id}"] button`).click();
    await page.locator(`#keys tbody tr[data-key="${id}"]`).waitFor({ state: "detached" });
    await page.locator("#notice").filter({ hasText: "Key prometheus revoked." }).waitFor();
    expect((await made("/v1/stats")).status).toBe(401);
    const keys = await api<T.KeyList>("/v1/keys");
    expect(keys.body.keys.map((k) => k.id)).not.toContain(id);
    await page.close();
  });

  it("a bad key request is refused with the field named, and makes nothing", async () => {
    const page = await signIn(TOKEN);
    await page.locator("#keys-panel").waitFor({ state: "visible" });
    const before = (await api<T.KeyList>("/v1/keys")).body.keys.length;
    await page.fill("#key-name", "no scope");
    await page.click("#new-key-form button[type=submit]");
    await page.locator("#key-error").filter({ hasText: "scopes" }).waitFor();
    expect((await api<T.KeyList>("/v1/keys")).body.keys.length).toBe(before);
    expect(await page.locator("#new-key").isHidden()).toBe(true);
    await page.close();
  });
});
