/** Shared by the pages: escaping, the page frame, and the headers every page is served with. */

export function esc(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

export function page(title: string, body: string, script?: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title><link rel="stylesheet" href="/assets/style.css"></head>
<body>${body}${script ? `<script src="${esc(script)}"></script>` : ""}</body></html>`;
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
