/** Push subscriptions over the API: create/update/list/delete, and hostile input (400 naming the field, nothing stored). */
import fc from "fast-check";
import { beforeEach, expect, it } from "vitest";
import type * as T from "../../src/contract/types.js";
import { api, EMPTY, resetDatabase, rowCounts } from "./support.js";

beforeEach(resetDatabase);

const put = (name: string, json: unknown) =>
  api<T.SubscriptionAnswer & T.ErrorAnswer>(`/v1/subscriptions/${name}`, { method: "PUT", json });

it("creates, updates (keeping the secret), lists without secrets, deletes", async () => {
  const a = await put("orders", { url: "http://127.0.0.1:9/hook", max_in_flight: 3 });
  expect(a.status).toBe(200);
  expect(a.body).toMatchObject({
    name: "orders",
    url: "http://127.0.0.1:9/hook",
    min_priority: 0,
    max_in_flight: 3,
    visibility: 30,
  });
  expect(a.body.signing_secret).toMatch(/^[0-9a-f]{64}$/);
  const b = await put("orders", { url: "https://example.com/x", min_priority: 2, visibility: 5 });
  expect(b.body).toMatchObject({ url: "https://example.com/x", min_priority: 2, max_in_flight: 10, visibility: 5 });
  expect(b.body.signing_secret).toBe(a.body.signing_secret);
  const list = await api<T.SubscriptionList>("/v1/subscriptions");
  expect(list.body.subscriptions).toEqual([
    { name: "orders", url: "https://example.com/x", min_priority: 2, max_in_flight: 10, visibility: 5 },
  ]);
  expect((await api("/v1/subscriptions/orders", { method: "DELETE" })).status).toBe(204);
  expect((await api("/v1/subscriptions/orders", { method: "DELETE" })).status).toBe(404);
  expect((await api<T.SubscriptionList>("/v1/subscriptions")).body.subscriptions).toEqual([]);
});

it.each([
  ["bad name", "a b", { url: "https://x.test" }, "name"],
  ["long name", "x".repeat(65), { url: "https://x.test" }, "name"],
  ["ftp url", "a", { url: "ftp://x.test/" }, "url"],
  ["credentials", "a", { url: "https://u:p@x.test/" }, "url"],
  ["priority", "a", { url: "https://x.test", min_priority: 5 }, "min_priority"],
  ["max_in_flight", "a", { url: "https://x.test", max_in_flight: 101 }, "max_in_flight"],
  ["visibility", "a", { url: "https://x.test", visibility: 0 }, "visibility"],
  ["unknown field", "a", { url: "https://x.test", urll: 1 }, '"urll"'],
])("refuses %s with a 400 naming the field", async (_, name, body, field) => {
  const r = await put(encodeURIComponent(name), body);
  expect(r.status).toBe(400);
  expect(r.body.error.message.startsWith(`${field}: `)).toBe(true);
  expect(await rowCounts()).toEqual(EMPTY);
});

it("hostile subscription input is a 400 and stores nothing", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.record({
        name: fc.oneof(fc.string(), fc.constantFrom("a b", "", "x".repeat(65), "é", "../x")),
        url: fc.oneof(fc.string(), fc.constantFrom("javascript:alert(1)", "file:///etc/passwd", "https://a:b@x.test")),
        max_in_flight: fc.oneof(fc.constant(undefined), fc.constantFrom(0, 101, 1.5, "3", null)),
      }),
      async ({ name, url, max_in_flight }) => {
        const validName = /^[A-Za-z0-9_-]{1,64}$/.test(name);
        const validUrl =
          URL.canParse(url) &&
          /^https?:$/.test(new URL(url).protocol) &&
          !new URL(url).username &&
          !new URL(url).password;
        fc.pre(!(validName && validUrl && max_in_flight === undefined));
        const r = await put(encodeURIComponent(name) || "%20", {
          url,
          ...(max_in_flight === undefined ? {} : { max_in_flight }),
        });
        expect([400, 404, 405]).toContain(r.status);
        expect(await rowCounts()).toEqual(EMPTY);
      },
    ),
    { numRuns: 60 },
  );
});
