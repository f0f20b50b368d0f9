/**
 * `GET /docs`: the OpenAPI document rendered as one HTML page on the server. No script, nothing
 * from a CDN: a table of contents, then each operation with its parameters, body, answers, error
 * codes and examples, all read from the document itself. An operation that is another one in a named
 * queue (`IN_NAMED_QUEUE`) is not shown again: the document's description says what every route may
 * take, and the page adds the `queue` parameter under it.
 */
import { IN_NAMED_QUEUE } from "../openapi.js";
import { esc, page } from "./html.js";

type Json = Record<string, unknown>;
type Schema = Json & {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  $ref?: string;
};

/** Escapes, then renders `code` spans and paragraphs (the document's descriptions use nothing else). */
function md(text: unknown): string {
  if (typeof text !== "string" || text === "") return "";
  return text
    .split(/\n{2,}/)
    .map((p) => `<p>${esc(p).replace(/`([^`]+)`/g, "<code>$1</code>")}</p>`)
    .join("");
}

/** A schema in a few words: `integer, 0 to 4`, `string, 1 to 512 characters`, `array of object`. */
function typeOf(s: Schema | undefined): string {
  if (!s || Object.keys(s).filter((k) => k !== "description" && k !== "examples").length === 0) return "any JSON";
  if (s.$ref) return String(s.$ref).split("/").pop() as string;
  if (s.anyOf) return s.anyOf.map(typeOf).join(" or ");
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (Array.isArray(s.enum)) return `one of ${s.enum.map((e) => JSON.stringify(e)).join(", ")}`;
  const type = Array.isArray(s.type) ? s.type.join(" or ") : (s.type ?? "any");
  const parts: string[] = [type === "array" ? `array of ${typeOf(s.items)}` : type];
  const range = (lo: unknown, hi: unknown, unit = "") => {
    if (lo !== undefined && hi !== undefined) parts.push(`${lo} to ${hi}${unit}`);
    else if (lo !== undefined) parts.push(`at least ${lo}${unit}`);
    else if (hi !== undefined) parts.push(`at most ${hi}${unit}`);
  };
  range(s.minimum, s.maximum);
  if (s.exclusiveMinimum !== undefined) parts.push(`> ${s.exclusiveMinimum}`);
  range(s.minLength, s.maxLength, " characters");
  range(s.minItems, s.maxItems, " items");
  if (typeof s.pattern === "string") parts.push(`matching <code>${esc(s.pattern)}</code>`);
  if (s.not && (s.not as Schema).const !== undefined) parts.push(`not ${JSON.stringify((s.not as Schema).const)}`);
  return parts.join(", ");
}

/** One row per field, nested objects flattened as `messages[].group_id`. */
function fieldRows(s: Schema | undefined, prefix = ""): string {
  if (!s) return "";
  if (s.anyOf) return s.anyOf.map((x) => fieldRows(x, prefix)).join("");
  const obj = s.type === "array" && s.items?.properties ? s.items : s;
  const base = s.type === "array" && s.items?.properties ? `${prefix}[].` : prefix;
  let out = "";
  for (const [name, field] of Object.entries(obj.properties ?? {})) {
    const required = obj.required?.includes(name) ? "required" : "optional";
    out += `<tr><td><code>${esc(base + name)}</code></td><td>${typeOf(field)}</td><td>${required}</td><td>${md(field.description)}</td></tr>`;
    if (field.properties || field.items?.properties) out += fieldRows(field, `${base}${name}`);
  }
  return out;
}

const table = (head: string[], rows: string) =>
  rows
    ? `<table><thead><tr>${head.map((h) => `<th>${h}</th>`).join("")}</tr></thead><tbody>${rows}</tbody></table>`
    : "";
const example = (value: unknown) =>
  value === undefined ? "" : `<pre class="example">${esc(JSON.stringify(value, null, 2))}</pre>`;

const parameterRow = (p: Json) =>
  `<tr><td><code>${esc(String(p.name))}</code></td><td>${esc(String(p.in))}</td><td>${typeOf(p.schema as Schema)}</td><td>${p.required ? "required" : "optional"}</td><td>${md(p.description)}</td></tr>`;
const PARAMETER_HEAD = ["name", "in", "type", "", "meaning"];

function operationHtml(method: string, path: string, op: Json): string {
  const params = (op.parameters as Json[]).map(parameterRow);
  const body = op.requestBody as Json | undefined;
  const media = (x: Json | undefined) => (x?.content as Record<string, Json> | undefined)?.["application/json"];
  let bodyHtml = "";
  if (body) {
    const m = media(body);
    bodyHtml = `<h4>Body${body.required ? "" : " (optional)"}</h4>${md(body.description)}${table(["field", "type", "", "meaning"], fieldRows(m?.schema as Schema))}${example(m?.example)}`;
  }
  const responses = Object.entries(op.responses as Record<string, Json>).map(([status, res]) => {
    const m = media(res);
    const isError = Number(status) >= 400;
    const headers = Object.entries((res.headers as Record<string, Json>) ?? {})
      .map(([h, d]) => `<li>header <code>${esc(h)}</code>: ${md(d.description)}</li>`)
      .join("");
    return `<div class="response ${isError ? "failure" : "ok"}"><h5>${esc(status)}</h5>${md(res.description)}${headers ? `<ul>${headers}</ul>` : ""}${isError ? "" : table(["field", "type", "", "meaning"], fieldRows(m?.schema as Schema))}${example(m?.example)}</div>`;
  });
  const auth =
    ((op.security as unknown[] | undefined) ?? []).length > 0
      ? `<p class="auth">Needs <code>Authorization: Bearer &lt;QUEUE_TOKEN&gt;</code>.</p>`
      : "";
  return `<section class="op" id="${esc(String(op.operationId))}">
<h3><span class="method ${esc(method)}">${esc(method.toUpperCase())}</span> <code>${esc(path)}</code></h3>
<p class="summary">${esc(String(op.summary))}</p>${auth}${md(op.description)}
${params.length ? `<h4>Parameters</h4>${table(PARAMETER_HEAD, params.join(""))}` : ""}
${bodyHtml}<h4>Answers</h4>${responses.join("")}</section>`;
}

export function docsPage(doc: Json, base: string): string {
  const info = doc.info as Json;
  const ops: Array<{ tag: string; method: string; path: string; op: Json }> = [];
  let queueParameter: Json | undefined;
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Json>>)) {
    for (const [method, op] of Object.entries(item)) {
      if (op[IN_NAMED_QUEUE] === undefined) ops.push({ tag: (op.tags as string[])[0] as string, method, path, op });
      else queueParameter ??= (op.parameters as Json[]).find((p) => p.name === "queue" && p.in === "path");
    }
  }
  // What the queue sends, not what it answers: shown under its tag, addressed to the subscriber's URL.
  for (const item of Object.values((doc.webhooks ?? {}) as Record<string, Record<string, Json>>)) {
    for (const [method, op] of Object.entries(item))
      ops.push({ tag: (op.tags as string[])[0] as string, method, path: "<subscription url>", op });
  }
  const tags = doc.tags as Array<{ name: string; description: string }>;
  const toc = tags
    .map(
      (t) =>
        `<li>${esc(t.name)}<ul>${ops
          .filter((o) => o.tag === t.name)
          .map(
            (o) =>
              `<li><a href="#${esc(String(o.op.operationId))}"><span class="method ${esc(o.method)}">${esc(o.method.toUpperCase())}</span> ${esc(o.path)}</a></li>`,
          )
          .join("")}</ul></li>`,
    )
    .join("");
  const sections = tags
    .map(
      (t) =>
        `<h2 id="tag-${esc(t.name.replace(/\s/g, "-"))}">${esc(t.name)}</h2>${md(t.description)}${ops
          .filter((o) => o.tag === t.name)
          .map((o) => operationHtml(o.method, o.path, o.op))
          .join("")}`,
    )
    .join("");
  return page(
    `${String(info.title)} API`,
    `<header><h1>${esc(String(info.title))} <small>API ${esc(String(info.version))}</small></h1>
<nav class="links"><a href="${esc(base)}/openapi.json">openapi.json</a> <a href="${esc(base)}/dashboard">dashboard</a></nav></header>
<div class="docs"><aside><ul class="toc">${toc}</ul></aside><main>${md(info.description)}${queueParameter ? table(PARAMETER_HEAD, parameterRow(queueParameter)) : ""}${sections}</main></div>`,
    base,
  );
}
