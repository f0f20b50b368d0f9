/**
 * The dashboard's charts and group browsing in Chromium, against the Worker as `wrangler dev` serves
 * it with a sample a second (QUEUE_SAMPLE_SECONDS=1). The test reads the drawn lines back: each
 * point's height on its chart's scale is the value it claims, and the per-minute rates, integrated
 * over the sample times the backlog chart places, give back the messages published and acked.
 * Set DASHBOARD_SCREENSHOT to a path to keep the screenshot (docs/dashboard.png).
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
import { waitFor } from "../support/wait.js";

const TOKEN = "charts-test-token-0123456789";

let admin: LibsqlTransport;
let worker: RunningWorker;
let browser: Browser;
let page: Page;

const call = apiAt(() => worker.url, TOKEN);

/** A call that must succeed: its answer's body. */
async function api<B>(path: string, method = "GET", json?: unknown): Promise<B> {
  const res = await call<B>(path, method, json);
  expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
  return res.body;
}

/** Waits until the writer's last two samples show `acked` (the queue has been quiet for one sample). */
const settled = (acked: number) =>
  waitFor(
    async () => {
      const h = await api<T.History>("/v1/history");
      const [a, b] = h.samples.slice(-2);
      return a?.acked === acked && b?.acked === acked && h;
    },
    { what: `two samples with ${acked} acked`, timeoutMs: 20_000 },
  );

interface Drawn {
  width: number;
  height: number;
  max: number;
  from: number;
  to: number;
  lines: Record<string, { points: Array<[number, number]>; values: number[] }>;
}

/** What a chart draws: its scale, and each line's points and claimed values. */
async function drawn(chart: string): Promise<Drawn> {
  return page.locator(`#chart-${chart} svg`).evaluate((svg): Drawn => {
    const box = (svg as SVGSVGElement).viewBox.baseVal;
    return {
      width: box.width,
      height: box.height,
      max: Number(svg.getAttribute("data-max")),
      from: Number(svg.getAttribute("data-from")),
      to: Number(svg.getAttribute("data-to")),
      lines: Object.fromEntries(
        Array.from(svg.querySelectorAll("polyline")).map((p) => [
          p.getAttribute("data-series"),
          {
            points: (p.getAttribute("points") ?? "")
              .split(" ")
              .map((xy: string) => xy.split(",").map(Number) as [number, number]),
            values: (p.getAttribute("data-values") ?? "").split(",").map(Number),
          },
        ]),
      ),
    };
  });
}

beforeAll(async () => {
  admin = await LibsqlTransport.create(inject("sqldUrl"));
  await resetDatabase(clientOf(admin));
  worker = await startWorker({
    databaseUrl: inject("sqldUrl"),
    queueToken: TOKEN,
    vars: { QUEUE_SAMPLE_SECONDS: "1" },
  });
  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(`${worker.url}/dashboard`);
  await page.fill("#token", TOKEN);
  await page.click("#login button[type=submit]");
  await page.locator("#board").waitFor({ state: "visible" });
});

afterAll(async () => {
  await browser?.close();
  await worker?.stop();
  admin?.close();
});

describe("the dashboard's charts", () => {
  it("draw the backlog by state, the rates published and acked, and the oldest age, as the writer sampled them", async () => {
    // The page's first look took the first sample: an empty queue.
    await page.locator("#charts").waitFor({ state: "visible" });
    expect((await drawn("backlog")).lines.ready?.values).toEqual([0]);
    await api("/v1/messages", "POST", {
      messages: Array.from({ length: 30 }, (_, i) => ({ group_id: `g${i % 3}`, event: { i } })),
    });
    await settled(0);
    await api("/v1/messages", "POST", { messages: [{ group_id: "g3", event: "late" }] });
    for (let i = 0; i < 6; i++) {
      const lease = await api<T.Lease>("/v1/claims", "POST", { worker_id: "w", visibility: 30 });
      await api(`/v1/leases/${lease.lease_id}/ack`, "POST");
    }
    const h = await settled(6);
    expect(h.samples[0]).toMatchObject({ published: 0, acked: 0, ready: 0, waiting: 0 });
    expect(h.samples.some((x) => x.published === 30 && x.ready === 3 && x.waiting === 27)).toBe(true);

    await page.click("#refresh");
    const backlog = await waitFor(
      async () => {
        const b = await drawn("backlog");
        return (b.lines.ready?.values.length ?? 0) >= h.samples.length && b;
      },
      { what: "the refreshed charts" },
    );
    expect(Object.keys(backlog.lines)).toEqual(["ready", "waiting", "in_flight", "parked", "delayed", "dead_letters"]);
    // Every point sits at the height of the value it claims, on the chart's scale.
    for (const chart of ["backlog", "throughput", "age"]) {
      const c = chart === "backlog" ? backlog : await drawn(chart);
      for (const line of Object.values(c.lines)) {
        expect(line.points).toHaveLength(line.values.length);
        // Within the rounding of a point's position (a hundredth of a unit of the view box).
        line.points.forEach(([, y], i) => {
          const off = Math.abs(((c.height - y) / c.height) * c.max - (line.values[i] as number));
          expect(off).toBeLessThanOrEqual((c.max / c.height) * 0.006 + 0.006);
        });
      }
    }
    const ready = backlog.lines.ready?.values ?? [];
    const waiting = backlog.lines.waiting?.values ?? [];
    expect([ready[0], waiting[0]]).toEqual([0, 0]);
    expect(waiting).toContain(27);
    // 31 published, 6 acked (round-robin: g3's one message among them): 25 left in three groups.
    const now = await api<T.Stats>("/v1/stats");
    expect([now.ready, now.waiting, now.groups]).toEqual([3, 22, 3]);
    expect([ready.at(-1), waiting.at(-1)]).toEqual([now.ready, now.waiting]);
    expect(backlog.lines.in_flight?.values.every((v) => v === 0)).toBe(true);

    // The sample times, read back from where the backlog chart puts its points.
    const times = (backlog.lines.ready?.points ?? []).map(
      ([x]) => backlog.from + (x / backlog.width) * (backlog.to - backlog.from),
    );
    const throughput = await drawn("throughput");
    const total = (key: string) =>
      (throughput.lines[key]?.values ?? []).reduce(
        (sum, perMinute, i) => sum + (perMinute * ((times[i + 1] as number) - (times[i] as number))) / 60,
        0,
      );
    expect(total("published")).toBeCloseTo(31, 1);
    expect(total("acked")).toBeCloseTo(6, 1);
    const age = await drawn("age");
    const ages = age.lines.oldest_age?.values ?? [];
    expect(ages[0]).toBe(0);
    expect(ages.at(-1)).toBeGreaterThan(0);
    expect(await page.locator("#chart-throughput .legend").textContent()).toContain("acked");
  });
});

describe("a group's next messages", () => {
  it("a click on a group shows its next messages without claiming them; Purge asks first, then deletes them", async () => {
    await page.locator('#groups tbody tr[data-group="g1"]').click();
    const rows = page.locator("#group-messages tbody tr");
    await page.locator("#group-name").filter({ hasText: /^g1$/ }).waitFor();
    await waitFor(async () => (await rows.count()) === 8, { what: "g1's eight messages" });
    expect(await rows.first().locator("td").nth(1).textContent()).toBe("queued");
    const peeked = await api<T.PeekAnswer>("/v1/groups/g1/messages");
    expect(await rows.evaluateAll((trs) => trs.map((tr) => Number((tr as HTMLElement).dataset.seq)))).toEqual(
      peeked.messages.map((m) => m.seq),
    );
    expect((await api<T.Stats>("/v1/stats")).in_flight).toBe(0);

    // Dismissed: nothing is deleted.
    page.once("dialog", (d) => void d.dismiss());
    await page.click("#purge");
    expect((await api<T.PeekAnswer>("/v1/groups/g1/messages")).messages).toHaveLength(8);

    let asked = "";
    page.once("dialog", (d) => {
      asked = d.message();
      void d.accept();
    });
    await page.click("#purge");
    await page.locator("#notice").filter({ hasText: "Purged 8 messages from group g1." }).waitFor();
    expect(asked).toContain("g1");
    expect((await api<T.PeekAnswer>("/v1/groups/g1/messages")).messages).toEqual([]);
    await page.locator("#group-empty").waitFor({ state: "visible" });
    expect(await page.locator("#purge").isDisabled()).toBe(true);
    expect((await api<T.Stats>("/v1/stats")).groups).toBe(2);
    if (process.env.DASHBOARD_SCREENSHOT) {
      await page.locator('#groups tbody tr[data-group="g0"]').click();
      await page.locator("#group-name").filter({ hasText: /^g0$/ }).waitFor();
      await page.screenshot({ path: process.env.DASHBOARD_SCREENSHOT, fullPage: true });
    }
  });
});
