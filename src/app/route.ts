/**
 * A route is declared once, as data: its method and path, the schemas of its path, query, headers
 * and body (src/contract/schemas.ts), its answers and the error codes it adds. `handle()` mounts it
 * with one middleware that validates every part (400 naming the field) and hands the handler typed
 * values through `c.req.valid(...)`; src/app/openapi.ts turns the same declarations into the
 * OpenAPI document.
 *
 * To add a route: declare it with `defineRoute({...})` next to its handler in src/app/routes/, call
 * `handle(app, route, handler)`, and list it in `API_ROUTES` (src/app/routes/index.ts). The test in
 * test/app/openapi.test.ts fails if the app answers a route the document does not describe.
 * A path never puts a fixed segment where another has a parameter (`/v1/leases/all` beside
 * `/v1/leases/{lease_id}`): Hono's RegExpRouter refuses such a pair, and the whole app falls back to
 * its TrieRouter, which costs every request more CPU (the same test file checks it).
 *
 * Why not Hono's `validator()`: it decodes path and query values leniently (`a%ZZb` stays `a%ZZb`) and
 * reads the body with `c.req.json()`; the API refuses malformed percent-encoding and reads bodies
 * bounded, in strict UTF-8, with 413/415 (src/app/body.ts).
 */
import type { Context, Handler, Hono, MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import * as v from "valibot";
import { type ErrorCode, QueuePath } from "../contract/schemas.js";
import { DEFAULT_QUEUE, type Scope } from "../rules.js";
import { readJsonObject } from "./body.js";
import type { AppEnv } from "./context.js";
import { badRequest } from "./errors.js";

type Schema = v.GenericSchema;
/** A schema of named values (path, query or headers): each entry becomes an OpenAPI parameter. */
type ObjectSchema = Schema & { readonly entries: v.ObjectEntries };

export interface ResponseSpec {
  description: string;
  /** The JSON body's schema; none for an empty body. */
  schema?: Schema;
  /** Media type of a body that is not JSON (the pages). */
  content?: "text/html" | "text/css" | "text/javascript" | "text/plain" | "image/svg+xml";
  headers?: Record<string, { description: string; type: "string" | "boolean" | "integer" }>;
  example?: unknown;
}

export interface RouteSpec {
  method: "get" | "post" | "put" | "delete";
  /** OpenAPI style: `/v1/groups/{group_id}/messages`. */
  path: `/${string}`;
  operationId: string;
  tag: "Publish" | "Consume" | "Push" | "Inspect" | "Dead letters" | "Queues" | "Keys" | "Service";
  summary: string;
  description?: string;
  /**
   * What the request's key must hold (src/app/auth.ts checks it before anything else runs): a scope,
   * on the request's queue (the default one for `/v1/...`, the named one for `/v1/queues/{queue}...`);
   * "any": any valid key; "public": no key at all (the pages).
   */
  scope: Scope | "any" | "public";
  /**
   * For a route about no one queue: "filtered" lets a key limited to some queues call it, and answers
   * only those (the queue list, `/metrics`); "every" needs the scope on every queue (keys, the audit).
   * Such a route has no `/v1/queues/{queue}/...` variant.
   */
  queues?: "filtered" | "every";
  /** For a `manage` route: the fields of its answer that its audit entry records (never a secret). */
  audit?: readonly string[];
  request?: {
    params?: ObjectSchema;
    query?: ObjectSchema;
    headers?: ObjectSchema;
    body?: { schema: Schema; required: boolean; example?: unknown };
  };
  responses: Record<number, ResponseSpec>;
  /** Error codes this route answers with besides those every route of its kind has. */
  errors?: ErrorCode[];
}

export const defineRoute = <const R extends RouteSpec>(route: R): R => route;

type Part<R, K extends string, T extends string> = R extends { request: { [k in K]: infer S extends Schema } }
  ? { [t in T]: v.InferOutput<S> }
  : Record<never, never>;
type BodyPart<R> = R extends { request: { body: { schema: infer S extends Schema } } }
  ? { json: v.InferOutput<S> }
  : Record<never, never>;

/** What `c.req.valid(...)` returns in a route's handler: each declared part's parsed value. */
export type RouteInput<R extends RouteSpec> = {
  out: Part<R, "params", "param"> & Part<R, "query", "query"> & Part<R, "headers", "header"> & BodyPart<R>;
};

export type RouteHandler<R extends RouteSpec> = Handler<AppEnv, string, RouteInput<R>>;

/**
 * A queue's own path for an API route (`/v1/claims` → `/v1/queues/{queue}/claims`); undefined for
 * what is not about one queue (the pages, `/v1/queues` itself, keys). `/v1/...` is the default queue's.
 */
export function scopedPath(route: Pick<RouteSpec, "path" | "queues">): `/${string}` | undefined {
  const { path } = route;
  return path.startsWith("/v1/") && !path.startsWith("/v1/queues") && route.queues === undefined
    ? `/v1/queues/{queue}${path.slice(3)}`
    : undefined;
}

/** Each validation middleware `handle()` mounted: the route it checks, and the path it was mounted at. */
const mounted = new WeakMap<object, { route: RouteSpec; template: string }>();

/** Mounts `route` on `app`, and its queue's variant (`scopedPath`): its validation, then `handler`. */
export function handle<R extends RouteSpec>(app: Hono<AppEnv>, route: R, handler: RouteHandler<R>): void {
  for (const template of [route.path, scopedPath(route)]) {
    if (template === undefined) continue;
    const check = validate(route, template);
    mounted.set(check, { route, template });
    app.on(route.method.toUpperCase(), honoPath(template), check, handler as Handler<AppEnv>);
  }
}

/** A request's route, with its path's values, and the queue it is about (undefined: about no one queue). */
export interface RouteMatch {
  route: RouteSpec;
  /** The path it was mounted at: the route's own, or its queue's variant. */
  template: string;
  params: Record<string, string>;
  queue: string | undefined;
}

/** Each request's match, found once (the key check asks first, the route's validation after). */
const matches = new WeakMap<Request, RouteMatch | null>();

/**
 * The route Hono matched for the request (the first of `handle()`'s: the one that answers), wherever
 * the app is mounted; undefined when none did (a 404 or a 405 follows). Its path's values are decoded
 * strictly (400 naming the value).
 */
export function routeOf(c: Context<AppEnv>): RouteMatch | undefined {
  let match = matches.get(c.req.raw);
  if (match === undefined) {
    match = null;
    for (const { handler } of matchedRoutes(c)) {
      const m = mounted.get(unwrapped(handler));
      if (m === undefined) continue;
      const params = pathParams(c.req.url, m.template);
      const about = m.route.queues === undefined && (m.route.path.startsWith("/v1/") || "queue" in params);
      match = { ...m, params, queue: about ? (params.queue ?? DEFAULT_QUEUE) : undefined };
      break;
    }
    matches.set(c.req.raw, match);
  }
  return match ?? undefined;
}

/** A handler as registered: an app mounted in another with its own error handler has each one wrapped. */
function unwrapped(handler: object): object {
  let h = handler as { __COMPOSED_HANDLER?: object };
  while (h.__COMPOSED_HANDLER !== undefined) h = h.__COMPOSED_HANDLER as typeof h;
  return h;
}

/** `/v1/groups/{group_id}/messages` → `/v1/groups/:group_id/messages`. */
export const honoPath = (path: string) => path.replace(/\{([^}]+)\}/g, ":$1");

function validate(route: RouteSpec, template: string): MiddlewareHandler<AppEnv> {
  const r = route.request ?? {};
  const scoped = template !== route.path;
  return async (c, next) => {
    // Path first, then headers, query and body: the cheapest refusals come before a byte is read.
    const found = routeOf(c);
    const params = found?.template === template ? found.params : pathParams(c.req.url, template);
    if (scoped) {
      const { queue, ...rest } = params;
      c.set("queueName", (parse(QueuePath, { queue }) as { queue: string }).queue);
      if (r.params) c.req.addValidatedData("param", parse(r.params, rest));
    } else {
      if (!template.startsWith("/v1/queues")) c.set("queueName", DEFAULT_QUEUE);
      if (r.params) c.req.addValidatedData("param", parse(r.params, params));
    }
    if (r.headers) {
      const sent: Record<string, string> = {};
      for (const name of Object.keys(r.headers.entries)) {
        const value = c.req.header(name);
        if (value !== undefined) sent[name] = value;
      }
      c.req.addValidatedData("header", parse(r.headers, sent));
    }
    if (r.query) c.req.addValidatedData("query", parse(r.query, queryParams(c.req.url)));
    if (r.body) {
      const body = await readJsonObject(c.req.raw, r.body.required);
      c.req.addValidatedData("json", parse(r.body.schema, body ?? {}));
    }
    await next();
  };
}

/** The schema's output (every request part is an object), or a 400 whose message starts with the field at fault. */
function parse(schema: Schema, input: unknown): object {
  const result = v.safeParse(schema, input, { abortEarly: true });
  if (result.success) return result.output as object;
  const issue = result.issues[0];
  throw badRequest(fieldOf(issue), issue.message);
}

/** `messages[3].priority`; an unknown field is quoted as sent: `messages[3]."prority"`. */
function fieldOf(issue: v.BaseIssue<unknown>): string {
  const path = issue.path ?? [];
  const unknownKey = issue.expected === "never";
  let out = "";
  path.forEach((item, i) => {
    const key = item.key;
    if (typeof key === "number") out += `[${key}]`;
    else {
      const text = String(key);
      const name =
        unknownKey && i === path.length - 1
          ? text.length > 64
            ? `${JSON.stringify(text.slice(0, 64))}...`
            : JSON.stringify(text)
          : text;
      out += out === "" ? name : `.${name}`;
    }
  });
  return out === "" ? "body" : out;
}

/** Strictly decodes one percent-encoded value: malformed encoding is a 400 naming `field`. */
function decode(raw: string, field: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw badRequest(field, "is not valid percent-encoding");
  }
}

/**
 * The path's parameters, from the raw URL (Hono keeps a malformed `%ZZ` as it is). The route's path
 * is the URL path's tail: the app may be mounted under a prefix (`app.route("/queue", api)`).
 */
function pathParams(url: string, template: string): Record<string, string> {
  const raw = rawPath(url).split("/");
  const segments = template.split("/");
  const offset = raw.length - segments.length;
  const out: Record<string, string> = {};
  segments.forEach((segment, i) => {
    const m = /^\{(.+)\}$/.exec(segment);
    if (m) out[m[1] as string] = decode(raw[offset + i] ?? "", m[1] as string);
  });
  return out;
}

/** A URL's path as sent (`http://host/a%2Fb?x` → `/a%2Fb`), without parsing the whole URL. */
function rawPath(url: string): string {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  if (start < 0) return "/";
  const end = url.slice(start).search(/[?#]/);
  return end < 0 ? url.slice(start) : url.slice(start, start + end);
}

/** The query's parameters, strictly decoded; a repeated one becomes an array (which its schema refuses). */
function queryParams(url: string): Record<string, string | string[]> {
  const search = new URL(url).search.slice(1);
  // A Map, not an object: a parameter named `__proto__` must stay a parameter (and be refused).
  const out = new Map<string, string | string[]>();
  for (const pair of search.split("&")) {
    if (pair === "") continue;
    const eq = pair.indexOf("=");
    const name = decode((eq < 0 ? pair : pair.slice(0, eq)).replaceAll("+", " "), "query");
    const value = decode(eq < 0 ? "" : pair.slice(eq + 1).replaceAll("+", " "), name);
    const prev = out.get(name);
    out.set(name, prev === undefined ? value : [...(Array.isArray(prev) ? prev : [prev]), value]);
  }
  return Object.fromEntries(out);
}
