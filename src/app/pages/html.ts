/** Shared by the pages: escaping, the page frame, and the headers every page is served with. */

export function esc(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/**
 * A page of the app mounted at `base` ("" at the root, "/queue" under `app.route("/queue", ...)`):
 * every link in it is built from `base`, and the body carries it (`data-base`) for the dashboard's
 * script, so that the pages work wherever the app is mounted.
 */
export function page(title: string, body: string, base: string, script?: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title><link rel="icon" href="${esc(base)}/assets/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="${esc(base)}/assets/style.css"></head>
<body data-base="${esc(base)}">${body}${script ? `<script src="${esc(base + script)}"></script>` : ""}</body></html>`;
}

/**
 * Where the app is mounted, from a request to one of its routes: the request's path less the
 * route's own (`/queue/dashboard` for `/dashboard` is mounted at `/queue`).
 */
export function mountOf(pathname: string, routePath: string): string {
  const own = routePath === "/" ? "" : routePath;
  const base = pathname.endsWith(own) ? pathname.slice(0, pathname.length - own.length) : "";
  return base.replace(/\/+$/, "");
}

/**
 * Scripts and styles only from this Worker; the dashboard's fetches only to it. Nothing inline, so
 * an event that carries markup cannot run as script even if a bug rendered it as HTML.
 */
export const PAGE_HEADERS = {
  "Content-Security-Policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "no-cache",
};
