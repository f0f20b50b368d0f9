/**
 * The API's front door when the QueueWriters serve it (src/worker.ts): the pages and the bearer
 * check are answered here, so that a refused request never reaches a database's single writer;
 * then each request goes to the writer of its queue's database.
 *
 * - `/v1/...` is the default queue's; `/v1/queues/{queue}/...` a named queue's, looked up in the
 *   catalog (through the default queue's writer, which keeps it; cached a few seconds per isolate).
 *   The catalog's own routes (`/v1/queues`, `/v1/queues/{queue}`) go to the default queue's writer.
 * - A queue of one database: a claim that does not wait and an ack are validated here and sent to
 *   its writer by RPC; everything else goes on with its body (read here, within the size limit), the
 *   database named in a header only the edge sets.
 * - A sharded queue: served here, by the API over a ShardedQueue whose shards are its writers,
 *   reached with the HTTP client (long polls wait on every shard's writer at once).
 *
 * A forward that fails is a 503 whose outcome is unknown: the request may have been applied before
 * the answer was lost.
 */
import type { Context, Hono } from "hono";
import { createClient } from "../client/client.js";
import type { Database } from "../core/databases.js";
import type { QueueInfo } from "../core/queues.js";
import { ShardedQueue } from "../core/sharded.js";
import { MAX_CLAIM_WAIT, queueNameProblem } from "../rules.js";
import { baseApp, createApp, DATABASE_HEADER } from "./app.js";
import { PRINCIPAL_HEADER, requireKey } from "./auth.js";
import { readBodyBytes } from "./body.js";
import type { AppEnv, ShardOf } from "./context.js";
import type { Bindings, Config } from "./env.js";
import { badRequest, HttpError } from "./errors.js";
import { type KeyPort, keyStoreOver } from "./key-port.js";
import type { Principal } from "./keys.js";
import { lookupQueue, nextTurn } from "./queues.js";
import { handle } from "./route.js";
import { claimAnswer, claimInputOf, claim as claimRoute } from "./routes/claims.js";
import { API_ROUTES } from "./routes/index.js";
import { ack as ackRoute } from "./routes/leases.js";
import { databaseRef, type Outcome, unwrap, type WriterPort } from "./writer/port.js";

/** A database's writer, as the edge reaches it: HTTP for most requests, RPC for the hottest. */
export interface Writer extends WriterPort {
  fetch(request: Request): Promise<Response>;
}

/** The writer of `db`, asked to run where `hint` says (a Durable Object location hint). */
export type WriterOf = (config: Config, env: Bindings, db: Database, hint: string | undefined) => Writer;

export function createEdgeApp(writerOf: WriterOf): Hono<AppEnv> {
  const app = baseApp();
  const defaultWriter = (c: Context<AppEnv>) =>
    writerOf(c.var.config, c.env, c.var.config.database, c.var.config.locationHint);

  /** The queue a request names: the default one, or a named one as the catalog says. */
  const queueOf = (c: Context<AppEnv>, name: string): Promise<QueueInfo> =>
    lookupQueue(c.var.config, name, async (n) => unwrap(await rpc(() => defaultWriter(c).lookup(n))) ?? undefined);
  const writer = (c: Context<AppEnv>, q: QueueInfo) =>
    writerOf(c.var.config, c.env, q.databases[0] as Database, q.locationHint ?? c.var.config.locationHint);

  // A sharded queue's API runs here, over its writers (a ShardedQueue built per request: a Durable
  // Object's stub belongs to the request that made it).
  const sharded = createApp(
    async (config, target, env) => {
      const q = await lookupQueue(config, target.name, async (n) => {
        const w = writerOf(config, env, config.database, config.locationHint);
        return unwrap(await rpc(() => w.lookup(n))) ?? undefined;
      });
      return new ShardedQueue(
        q.databases.map((db, index) =>
          shardClient(writerOf(config, env, db, q.locationHint ?? config.locationHint), db, {
            index,
            count: q.shards,
          }),
        ),
        { turn: nextTurn(q.name) },
      );
    },
    { auth: "forwarded", waits: "native", dbConcurrency: Number.POSITIVE_INFINITY },
  );

  // Keys are kept by the default queue's writer: the edge asks it (src/app/key-port.ts).
  const auth = requireKey(API_ROUTES, (c) => keyStoreOver(() => defaultWriter(c) as unknown as KeyPort));
  app.use("/v1/*", auth);

  handle(app, claimRoute, async (c) => {
    const body = c.req.valid("json");
    const input = claimInputOf(body);
    const q = await queueOf(c, c.var.queueName);
    const json = JSON.stringify(body);
    if (q.shards > 1) return sharded.fetch(rebuilt(c.req.raw, c.var.principal, json), c.env);
    const db = q.databases[0] as Database;
    // A long poll: over HTTP, so that its client's abort reaches the writer's dispatcher.
    if (input.wait > 0) return send(writer(c, q), rebuilt(c.req.raw, c.var.principal, json, db));
    const got = unwrap(await rpc(() => writer(c, q).claim(input, databaseRef(db))));
    return claimAnswer(c, body, got);
  });

  handle(app, ackRoute, async (c) => {
    const q = await queueOf(c, c.var.queueName);
    if (q.shards > 1) return sharded.fetch(rebuilt(c.req.raw, c.var.principal, undefined), c.env);
    const db = databaseRef(q.databases[0] as Database);
    unwrap(await rpc(() => writer(c, q).ack(c.req.valid("param").lease_id, db)));
    return c.body(null, 204);
  });

  const toDefault = async (c: Context<AppEnv>) => {
    // The body is read here (bounded: 413 past the limit), not streamed on: the writer may answer
    // before reading it, and a stream still being pumped after the answer fails in workerd.
    const raw = c.req.raw;
    const body = raw.method === "GET" || raw.method === "HEAD" ? undefined : await readBodyBytes(raw);
    return send(defaultWriter(c), rebuilt(raw, c.var.principal, body, c.var.config.database));
  };
  // The catalog's own routes: its writer, the default queue's.
  app.all("/v1/queues", toDefault);
  app.all("/v1/queues/:queue", toDefault);

  app.all("/v1/queues/:queue/*", async (c) => {
    // From the raw path: Hono decodes leniently, and a name is decoded once, strictly.
    const q = await queueOf(c, validQueue(new URL(c.req.url).pathname.split("/")[3] ?? ""));
    const raw = c.req.raw;
    const body = raw.method === "GET" || raw.method === "HEAD" ? undefined : await readBodyBytes(raw);
    if (q.shards > 1) return sharded.fetch(rebuilt(raw, c.var.principal, body), c.env);
    return send(writer(c, q), rebuilt(raw, c.var.principal, body, q.databases[0] as Database));
  });

  app.all("/v1/*", toDefault);
  // Every queue's counts and counters, gathered by the default queue's writer (it keeps the catalog).
  app.use("/metrics", auth);
  app.get("/metrics", toDefault);
  return app;
}

/**
 * The request again, with its body as read, the client's abort (a long poll whose client left must
 * not keep or strand a lease), and the database header set by the edge alone (or removed).
 */
function rebuilt(raw: Request, principal: Principal, body: BodyInit | undefined, db?: Database): Request {
  const headers = new Headers(raw.headers);
  headers.delete("content-length");
  headers.delete(DATABASE_HEADER);
  if (db !== undefined) headers.set(DATABASE_HEADER, JSON.stringify(databaseRef(db)));
  headers.delete(PRINCIPAL_HEADER);
  // The writer takes a request that names nobody for the root key's (the edge's own calls are).
  if (principal.id !== "root") headers.set(PRINCIPAL_HEADER, JSON.stringify(principal));
  return new Request(raw.url, { method: raw.method, headers, body, signal: raw.signal });
}

/** A shard's writer as the HTTP client sees it: the API, at any URL, over the writer's own fetch. */
function shardClient(w: Writer, db: Database, shard: ShardOf) {
  const header = JSON.stringify({ ...databaseRef(db), shard });
  return createClient({
    url: "http://queue-writer",
    // The writer trusts the edge (it checked the token): any token does.
    token: "edge",
    maxClaimWait: MAX_CLAIM_WAIT,
    // Keys only where the caller gave one, as for a queue of one database (a key costs rows).
    autoIdempotencyKeys: false,
    fetch: (url, init) => {
      const headers = { ...init.headers, [DATABASE_HEADER]: header };
      return w.fetch(new Request(url, { ...init, headers }));
    },
  });
}

/** The path's queue name, strictly decoded and checked (400 naming `queue`). */
function validQueue(raw: string): string {
  let name: string;
  try {
    name = decodeURIComponent(raw);
  } catch {
    throw badRequest("queue", "is not valid percent-encoding");
  }
  const problem = queueNameProblem(name);
  if (problem !== undefined) throw badRequest("queue", problem);
  return name;
}

async function send(w: Writer, request: Request): Promise<Response> {
  try {
    return await w.fetch(request);
  } catch (e) {
    console.error("forward failed", e);
    throw writerGone();
  }
}

/** An RPC that did not come back is what a failed forward is: a 503 whose outcome is unknown. */
async function rpc<T>(call: () => Promise<Outcome<T>>): Promise<Outcome<T>> {
  try {
    return await call();
  } catch (e) {
    console.error("writer call failed", e);
    throw writerGone();
  }
}

const writerGone = () =>
  new HttpError(
    503,
    "UNAVAILABLE",
    "the queue's writer did not answer; the request may have been applied (a publish is safe to retry with the same Idempotency-Key)",
    { "Retry-After": "1" },
  );
