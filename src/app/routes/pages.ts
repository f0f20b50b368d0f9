/**
 * What needs neither the token nor the database: `/healthz`, the OpenAPI document, the docs page,
 * the dashboard and their assets (a stylesheet, a script, an icon), and `/` pointing at them. Served by the edge app as well, so
 * none of it reaches the queue's writer.
 */
import { type Context, Hono } from "hono";
import { Health } from "../../contract/schemas.js";
import { VERSION } from "../../version.js";
import type { AppEnv } from "../context.js";
import { openApiDocument } from "../openapi.js";
import { DASHBOARD_JS, dashboardHtml } from "../pages/dashboard.js";
import { docsPage } from "../pages/docs.js";
import { esc, mountOf, PAGE_HEADERS, page } from "../pages/html.js";
import { ICON_SVG } from "../pages/icon.js";
import { STYLE_CSS } from "../pages/style.js";
import { defineRoute, handle, type RouteSpec } from "../route.js";
import { API_ROUTES } from "./index.js";

const html = (summary: string, path: `/${string}`, operationId: string, description?: string) =>
  defineRoute({
    method: "get",
    path,
    operationId,
    tag: "Service",
    summary,
    ...(description ? { description } : {}),
    scope: "public",
    responses: { 200: { description: "An HTML page.", content: "text/html" } },
  });

export const home = html("Links to the docs, the dashboard and the document", "/", "home");
export const healthz = defineRoute({
  method: "get",
  path: "/healthz",
  operationId: "health",
  tag: "Service",
  summary: "Liveness (no auth, no database)",
  scope: "public",
  responses: { 200: { description: "The Worker runs.", schema: Health, example: { status: "ok" } } },
});
export const openapi = defineRoute({
  method: "get",
  path: "/openapi.json",
  operationId: "openapi",
  tag: "Service",
  summary: "This OpenAPI 3.1 document",
  scope: "public",
  responses: { 200: { description: "The document, generated from the API's schemas." } },
});
export const docs = html("The API reference (this document as a page)", "/docs", "docs");
export const dashboard = html(
  "The dashboard",
  "/dashboard",
  "dashboard",
  "Counters, the last hour in charts (backlog by state, published and acked per minute, oldest age), groups in flight and next in line (a group's next messages, purge), and dead letters (redrive, delete). It asks for the bearer token and uses the /v1 API.",
);
const asset = (path: `/${string}`, operationId: string, content: "text/css" | "text/javascript" | "image/svg+xml") =>
  defineRoute({
    method: "get",
    path,
    operationId,
    tag: "Service",
    summary: `Asset of the pages (${content})`,
    scope: "public",
    responses: { 200: { description: "The file.", content } },
  });
export const styleAsset = asset("/assets/style.css", "styleAsset", "text/css");
export const dashboardAsset = asset("/assets/dashboard.js", "dashboardAsset", "text/javascript");
export const iconAsset = asset("/assets/icon.svg", "iconAsset", "image/svg+xml");

export const PAGE_ROUTES: readonly RouteSpec[] = [
  home,
  healthz,
  openapi,
  docs,
  dashboard,
  styleAsset,
  dashboardAsset,
  iconAsset,
];

/** Built on first use (not at startup), once per isolate and mount point. */
const built = new Map<string, { doc?: Record<string, unknown>; docs?: string; home?: string; dashboard?: string }>();

function cacheFor(base: string) {
  let entry = built.get(base);
  if (entry === undefined) {
    // A handful of mount points at most; never let a stream of odd paths grow it without bound.
    if (built.size >= 16) built.clear();
    entry = {};
    built.set(base, entry);
  }
  return entry;
}

/** The OpenAPI document for the app mounted at `base`. */
export function document(base = ""): Record<string, unknown> {
  const entry = cacheFor(base);
  entry.doc ??= openApiDocument([...API_ROUTES, ...PAGE_ROUTES], VERSION, base);
  return entry.doc;
}

const homeHtml = (base: string) =>
  page(
    "turso-queue",
    `<header><h1>turso-queue</h1></header><div class="dash"><p>A durable message queue with per-group exclusivity, on Turso/libSQL.</p>
<ul><li><a href="${esc(base)}/docs">API docs</a></li><li><a href="${esc(base)}/dashboard">Dashboard</a></li>
<li><a href="${esc(base)}/openapi.json">openapi.json</a></li><li><a href="${esc(base)}/healthz">healthz</a></li></ul>
<p>The API lives under <code>${esc(base)}/v1</code> and needs <code>Authorization: Bearer &lt;QUEUE_TOKEN&gt;</code>.</p></div>`,
    base,
  );

export const pages = new Hono<AppEnv>();

const mount = (c: Context, route: RouteSpec) => mountOf(new URL(c.req.url).pathname, route.path);

handle(pages, home, (c) => {
  const entry = cacheFor(mount(c, home));
  entry.home ??= homeHtml(mount(c, home));
  return c.html(entry.home, 200, PAGE_HEADERS);
});
handle(pages, healthz, (c) => c.json({ status: "ok" } as const, 200));
handle(pages, openapi, (c) => c.json(document(mount(c, openapi)), 200, { "Access-Control-Allow-Origin": "*" }));
handle(pages, docs, (c) => {
  const base = mount(c, docs);
  const entry = cacheFor(base);
  entry.docs ??= docsPage(document(base), base);
  return c.html(entry.docs, 200, PAGE_HEADERS);
});
handle(pages, dashboard, (c) => {
  const base = mount(c, dashboard);
  const entry = cacheFor(base);
  entry.dashboard ??= dashboardHtml(base);
  return c.html(entry.dashboard, 200, PAGE_HEADERS);
});
handle(pages, styleAsset, (c) =>
  c.body(STYLE_CSS, 200, { ...PAGE_HEADERS, "Content-Type": "text/css; charset=utf-8" }),
);
handle(pages, dashboardAsset, (c) =>
  c.body(DASHBOARD_JS, 200, { ...PAGE_HEADERS, "Content-Type": "text/javascript; charset=utf-8" }),
);
handle(pages, iconAsset, (c) =>
  c.body(ICON_SVG, 200, { ...PAGE_HEADERS, "Content-Type": "image/svg+xml", "Cache-Control": "max-age=86400" }),
);
