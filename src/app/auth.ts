/**
 * Who may do what, on which queue: one middleware (`requireKey`) in front of every `/v1` route and
 * `/metrics`, run before anything reads a body or a database. It tells who the bearer token is
 * (src/app/keys.ts: the root key, a key made through the API, a JWT), takes the route Hono matched
 * (src/app/route.ts: each declares its scope), and refuses a key that lacks the scope or the queue
 * (403 naming both), so a refused request changes nothing. After a `manage` action succeeded, it
 * records it in the audit.
 */
import type { Context, MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import type { KeyStore } from "../core/keys.js";
import { queueAllowed, queueNameProblem } from "../rules.js";
import type { AppEnv } from "./context.js";
import { type Config, parseEnv } from "./env.js";
import { HttpError } from "./errors.js";
import { KeyChecker, type Principal, Refused } from "./keys.js";
import { type RouteMatch, routeOf } from "./route.js";

export { sameSecret } from "./secrets.js";

const BEARER = /^Bearer[ \t]+([!-~]+)[ \t]*$/i;
const REALM = 'Bearer realm="turso-queue"';

const unauthorized = (message: string, tokenGiven: boolean) =>
  new HttpError(401, "UNAUTHORIZED", message, {
    "WWW-Authenticate": tokenGiven ? `${REALM}, error="invalid_token"` : REALM,
  });

/** The 403 for a key that may not take this route (its scope, or its queue); nothing when it may. */
function refusal(p: Principal, m: RouteMatch): HttpError | undefined {
  const scope = m.route.scope;
  if (scope === "public" || scope === "any") return undefined;
  const limited = p.queues !== undefined ? ` (it is limited to ${p.queues.join(", ")})` : "";
  const forbidden = (message: string) =>
    new HttpError(403, "FORBIDDEN", message, {
      "WWW-Authenticate": `${REALM}, error="insufficient_scope", scope="${scope}"`,
    });
  if (m.queue !== undefined && queueNameProblem(m.queue) !== undefined) return undefined; // the route's own 400
  const on = m.queue === undefined ? (m.route.queues === "every" ? " on every queue" : "") : ` on queue ${m.queue}`;
  if (!p.scopes.includes(scope)) {
    return forbidden(`this key lacks the ${scope} scope${on} (it has ${p.scopes.join(", ")})`);
  }
  if (m.queue !== undefined && !queueAllowed(p.queues, m.queue)) {
    return forbidden(`this key has the ${scope} scope, but not on queue ${m.queue}${limited}`);
  }
  if (m.queue === undefined && m.route.queues === "every" && p.queues !== undefined) {
    return forbidden(`this route needs the ${scope} scope on every queue, and this key has it on some only${limited}`);
  }
  return undefined;
}

/** What an audit entry records of a successful `manage` action: the path's values, and the answer's fields the route names. */
async function auditEntry(c: Context<AppEnv>, m: RouteMatch) {
  const { queue: _queue, ...params } = m.params;
  const detail: Record<string, unknown> = { ...params };
  if (m.route.audit !== undefined && (c.res.headers.get("content-type") ?? "").includes("json")) {
    const answer = (await c.res.clone().json()) as Record<string, unknown>;
    for (const field of m.route.audit) if (field in answer) detail[field] = answer[field];
  }
  return {
    keyId: c.var.principal.id,
    action: m.route.operationId,
    queue: m.queue ?? m.params.queue,
    detail: Object.keys(detail).length > 0 ? detail : undefined,
  };
}

/**
 * Checks every request against its route's declared scope (the route Hono matched, src/app/route.ts),
 * and audits the `manage` actions that succeed. `storeOf` is where the deployment keeps its keys
 * and audit (asked only for a key made through the API, and to record an action).
 */
export function requireKey(storeOf: (c: Context<AppEnv>, config: Config) => KeyStore): MiddlewareHandler<AppEnv> {
  const checker = new KeyChecker();
  return async (c, next) => {
    const parsed = parseEnv(c.env);
    // Misconfigured (QUEUE_TOKEN unset, database URL missing): refuse everything, never run open.
    if (!parsed.ok) throw parsed.error;
    const config = parsed.config;
    c.set("config", config);
    const header = c.req.header("authorization");
    if (header === undefined) {
      throw unauthorized("Authorization: missing (send `Authorization: Bearer <key>`)", false);
    }
    const token = BEARER.exec(header)?.[1];
    if (token === undefined) throw unauthorized("Authorization: invalid bearer token", true);
    let store: KeyStore | undefined;
    const storeFor = () => {
      store ??= storeOf(c, config);
      return store;
    };
    let principal: Principal;
    try {
      principal = await checker.principal(token, config, storeFor);
    } catch (e) {
      if (e instanceof Refused) throw unauthorized(e.message, true);
      throw e;
    }
    const m = routeOf(c);
    if (m === undefined && matchedRoutes(c).some((r) => r.method !== "ALL")) {
      // A route answers that handle() did not mount: no scope to check it against, so it is refused.
      throw new HttpError(500, "INTERNAL", "this route declares no scope");
    }
    const refused = m && refusal(principal, m);
    if (refused !== undefined) throw refused;
    checker.used(config, principal);
    c.set("principal", principal);
    await next();
    if (m?.route.scope !== "manage" || c.res.status >= 300) return;
    if (m.route.path.startsWith("/v1/keys")) checker.forget(config);
    try {
      await storeFor().audit(await auditEntry(c, m));
    } catch (e) {
      // The action is done: its answer stands. The entry is lost, and said so where operators look.
      console.error(`audit: could not record ${m.route.operationId} by ${principal.id}`, e);
    }
  };
}
