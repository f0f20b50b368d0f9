/**
 * A queue's life through the Worker as `npm start` runs it: the production bundle on Miniflare, named
 * queues in namespaces of a sqld of this file's own (test/trust/named-worker.ts), so that a delete
 * drops the queue's databases and a queue made again gets new ones; and through the app as a
 * long-lived Node server runs it (`createApp(sharedTransports())`) on the same sqld. Deleting a queue
 * ends its long polls at once (404), and a delete racing a make of the same name never leaves a half
 * of each: no 5xx from sqld, no 500 from a writer or transport still serving the dropped database.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../../src/app/app.js";
import { sharedTransports } from "../../src/app/transports.js";
import type * as T from "../../src/contract/types.js";
import { envInt } from "../support/trust.js";
import { type NamedWorker, startNamedWorker } from "./named-worker.js";

const TOKEN = "lifecycle-test-token-0123456789";
const TRIES = envInt("TRUST_LIFECYCLE_TRIES", 10);

let w: NamedWorker;
/** The bundle without its Durable Object: every request serves itself, with transports of its own. */
let bare: NamedWorker;

beforeAll(async () => {
  [w, bare] = await Promise.all([
    startNamedWorker({ token: TOKEN }),
    startNamedWorker({ token: TOKEN, noWriter: true }),
  ]);
}, 180_000);

afterAll(async () => {
  await w?.stop();
  await bare?.stop();
});

/** The server's configuration: one object, read once (as a server's environment is). */
let env: Record<string, string> | undefined;
const serverEnv = () => {
  env ??= {
    TURSO_DATABASE_URL: w.sqld.url,
    QUEUE_TOKEN: TOKEN,
    QUEUE_DATABASES: "namespaces",
    SQLD_ADMIN_URL: w.sqld.adminUrl as string,
  };
  return env;
};

/** The same API served by a long-lived Node server: one transport per database, kept. */
const server = createApp(sharedTransports(), { dbConcurrency: Number.POSITIVE_INFINITY });
const viaServer: NamedWorker["api"] = async <B>(
  path: string,
  c: { method?: string; json?: unknown; signal?: AbortSignal; headers?: Record<string, string> } = {},
) => {
  const res = await server.fetch(
    new Request(`http://server${path}`, {
      method: c.method ?? (c.json === undefined ? "GET" : "POST"),
      headers: {
        authorization: `Bearer ${TOKEN}`,
        ...(c.json === undefined ? {} : { "content-type": "application/json" }),
        ...(c.headers ?? {}),
      },
      body: c.json === undefined ? undefined : JSON.stringify(c.json),
      ...(c.signal ? { signal: c.signal } : {}),
    }),
    serverEnv(),
  );
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as B, text, headers: res.headers };
};

describe.each([
  { via: "the Worker", shards: 1 },
  { via: "the Worker", shards: 4 },
  { via: "a Node server", shards: 1 },
  { via: "a Node server", shards: 4 },
  { via: "the Worker without its Durable Object", shards: 1 },
  { via: "the Worker without its Durable Object", shards: 4 },
])("a queue of $shards shard(s) through $via, deleted and made again", ({ via, shards }) => {
  const name = `life-${shards}${via === "a Node server" ? "-node" : ""}`;
  const q = `/v1/queues/${name}`;
  const api: NamedWorker["api"] = (path, c) =>
    via === "the Worker" ? w.api(path, c) : via === "a Node server" ? viaServer(path, c) : bare.api(path, c);

  it(`a delete racing a make of its name (${TRIES} tries): no 5xx, then it serves whole or is gone`, async () => {
    expect((await api(q, { method: "PUT", json: { shards } })).status).toBe(201);
    const problems: string[] = [];
    const saw = (what: string, a: { status: number; text: string }, ok: number[]) => {
      if (!ok.includes(a.status)) problems.push(`${what}: ${a.status} ${a.text.slice(0, 160)}`);
    };
    for (let i = 0; i < TRIES; i++) {
      saw(`try ${i}: publish before`, await api(`${q}/groups/g/messages`, { json: { event: `old-${i}` } }), [201]);
      const [deleted, made] = await Promise.all([
        api(`${q}?force=true`, { method: "DELETE" }),
        api<T.QueueAnswer>(q, { method: "PUT", json: { shards } }),
      ]);
      saw(`try ${i}: delete`, deleted, [204]);
      saw(`try ${i}: put`, made, [200, 201]);
      const got = await api<T.QueueWithSettings>(q);
      saw(`try ${i}: get`, got, [200, 404]);
      if (got.status === 404) {
        const refused = await api<T.ErrorAnswer>(`${q}/groups/g/messages`, { json: { event: "none" } });
        saw(`try ${i}: publish to a deleted queue`, refused, [404]);
        if (refused.status === 404 && refused.body.error.code !== "QUEUE_NOT_FOUND")
          problems.push(`try ${i}: ${refused.text}`);
        saw(`try ${i}: make it again`, await api(q, { method: "PUT", json: { shards } }), [201]);
      } else if (made.status === 201 && got.body.stats.ready + got.body.stats.waiting > 0) {
        // Made again after the delete: nothing of the old queue is in it.
        problems.push(`try ${i}: the queue made again holds ${JSON.stringify(got.body.stats)}`);
      }
      // Whichever came last, the queue now serves every route, with nothing of what was dropped.
      const pub = await api<T.PublishAnswer>(`${q}/groups/g/messages`, { json: { event: `new-${i}` } });
      saw(`try ${i}: publish`, pub, [201]);
      const peek = await api<T.PeekAnswer>(`${q}/groups/g/messages`);
      saw(`try ${i}: peek`, peek, [200]);
      const lease = await api<T.Lease>(`${q}/claims`, { json: { worker_id: "w", visibility: 30 } });
      saw(`try ${i}: claim`, lease, [200]);
      if (lease.status === 200) {
        saw(`try ${i}: ack`, await api(`${q}/leases/${lease.body.lease_id}/ack`, { method: "POST" }), [204]);
      }
      saw(`try ${i}: stats`, await api(`${q}/stats`), [200]);
    }
    expect(problems).toEqual([]);
  });

  it("deleting it ends its long polls at once with 404; a queue made again under the name gives them nothing", async () => {
    expect([200, 201]).toContain((await api(q, { method: "PUT", json: { shards } })).status);
    const waiting = Array.from({ length: 4 }, (_, i) =>
      api<T.ErrorAnswer>(`${q}/claims`, { json: { worker_id: `old-${i}`, visibility: 30, wait: 20 } }),
    );
    // Held by the writers (nothing from outside says when): a moment to arrive.
    await new Promise((r) => setTimeout(r, 500));
    expect((await api(`${q}?force=true`, { method: "DELETE" })).status).toBe(204);
    // A wait left to run would answer 204 after its 20 s, or a message of the queue made below.
    const remade = api(q, { method: "PUT", json: { shards } }).then(async (made) => {
      expect(made.status).toBe(201);
      const messages = Array.from({ length: 8 }, (_, i) => ({ group_id: `g${i}`, event: i }));
      expect((await api(`${q}/messages`, { json: { messages } })).status).toBe(201);
    });
    const answers = await Promise.all(waiting);
    await remade;
    expect(answers.map((a) => [a.status, a.body?.error?.code, a.status === 200 ? a.text : ""])).toEqual(
      Array(4).fill([404, "QUEUE_NOT_FOUND", ""]),
    );
    // Everything published to the queue made again is there, unclaimed.
    const stats = await api<T.Stats>(`${q}/stats`);
    expect(stats.body).toMatchObject({ ready: 8, in_flight: 0 });
    const got = await api<T.LeaseList>(`${q}/claims`, { json: { worker_id: "new", visibility: 30, max: 8 } });
    expect(got.body.leases.map((l) => l.attempts)).toEqual(Array(8).fill(1));
  });
});
