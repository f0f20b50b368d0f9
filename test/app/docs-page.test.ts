/**
 * `GET /docs` shows each route once: the routes a named queue takes too (`/v1/queues/{queue}/...`) are in
 * the OpenAPI document twice, for client generators, and once on the page, under the one paragraph that
 * says what every route may take.
 */
import { beforeAll, expect, it } from "vitest";
import { createApp } from "../../src/app/app.js";
import { IN_NAMED_QUEUE } from "../../src/app/openapi.js";

type Doc = { paths: Record<string, Record<string, { operationId: string; [IN_NAMED_QUEUE]?: string }>> };

// Never called: the pages need no database.
const app = createApp(() => {
  throw new Error("no database in this test");
});
let doc: Doc;
let html: string;

beforeAll(async () => {
  doc = (await (await app.request("/openapi.json")).json()) as Doc;
  const res = await app.request("/docs");
  expect(res.status).toBe(200);
  html = await res.text();
});

const headings = () =>
  [...html.matchAll(/<h3><span class="method [a-z]+">([A-Z]+)<\/span> <code>([^<]+)<\/code><\/h3>/g)].map(
    (m) => `${m[1]} ${m[2]}`,
  );

it("the document marks each route of a named queue with the operation it repeats", () => {
  const ops = Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({ path, method, op })),
  );
  const byId = new Map(ops.map((o) => [o.op.operationId, o]));
  const twins = ops.filter((o) => o.op[IN_NAMED_QUEUE] !== undefined);
  expect(twins.length).toBeGreaterThan(10);
  for (const t of twins) {
    const original = byId.get(t.op[IN_NAMED_QUEUE] as string);
    expect(original, t.path).toBeDefined();
    expect(original?.op[IN_NAMED_QUEUE], t.path).toBeUndefined();
    expect(t.method).toBe(original?.method);
    expect(t.path).toBe(`/v1/queues/{queue}${original?.path.slice(3)}`);
  }
  // Every path under a queue is a twin, but the queues' own routes.
  for (const o of ops.filter((x) => x.path.startsWith("/v1/queues/{queue}/")))
    expect(o.op[IN_NAMED_QUEUE], o.path).toBeDefined();
});

it("shows every other operation once, and none of a named queue's", () => {
  const shown = headings();
  const expected = Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([, op]) => op[IN_NAMED_QUEUE] === undefined)
      .map(([method]) => `${method.toUpperCase()} ${path}`),
  );
  expect(shown.filter((h) => !h.includes("subscription url")).sort()).toEqual([...expected].sort());
  expect(new Set(shown).size).toBe(shown.length);
  expect(shown.filter((h) => h.includes("/v1/queues/{queue}/"))).toEqual([]);
  // The table of contents lists each once too.
  const toc = html.slice(html.indexOf('<ul class="toc">'), html.indexOf("</aside>"));
  expect(toc.match(/<li><a href=/g)?.length).toBe(shown.length);
});

it("says once, at the top, what every route may take: the queue prefix and its parameter", () => {
  const top = html.slice(html.indexOf("<main>"), html.indexOf('<h2 id="tag-'));
  expect(top).toContain("<code>/v1/queues/{queue}</code> in place of <code>/v1</code>");
  expect(top).toContain("<code>POST /v1/queues/emails/claims</code>");
  expect(top).toContain("QUEUE_NOT_FOUND");
  expect(top).toMatch(/<td><code>queue<\/code><\/td><td>path<\/td><td>string, [^<]*<\/td><td>required<\/td>/);
  expect(html.split("/v1/queues/{queue}</code> in place of").length).toBe(2);
});
