/**
 * Named queues (src/core/queues.ts) on a real sqld with namespaces: each queue is a database of its
 * own, made on demand with its schema, listed in the catalog, refused a new shard count, and
 * deleted only when empty unless forced. The Turso provider is checked against a loopback server
 * that answers as the Platform API documents (no account here); the static map by itself.
 */
import { createServer } from "node:http";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type Database, sqldNamespaces, staticDatabases, tursoDatabases } from "../../src/core/databases.js";
import { QueueCatalog } from "../../src/core/queues.js";
import { LibsqlTransport } from "../../src/index.js";

const provider = () => sqldNamespaces({ url: inject("nsSqldUrl"), adminUrl: inject("nsAdminUrl") });
const open = (db: Database) => LibsqlTransport.create(db.url, { namespace: db.namespace });
/** Whether sqld knows the namespace: a request to one it does not know is a 404. */
const exists = async (namespace: string) => {
  const res = await fetch(`${inject("nsSqldUrl")}/v2/pipeline`, {
    method: "POST",
    headers: { "x-namespace-bin": btoa(namespace).replace(/=+$/, ""), "content-type": "application/json" },
    body: JSON.stringify({ requests: [{ type: "close" }] }),
  });
  await res.text();
  return res.status === 200;
};

let home: LibsqlTransport;
let catalog: QueueCatalog;
const run = Date.now().toString(36);
const name = (n: string) => `${n}-${run}`;

beforeAll(async () => {
  const homeDb = await provider().create(`home-${run}`);
  home = await open(homeDb);
  catalog = new QueueCatalog({ home, defaultDatabase: homeDb, provider: provider(), open });
});
afterAll(() => home?.close());

describe("the catalog of named queues", () => {
  it("makes a queue's database with its schema, lists it, and answers the same queue when made again", async () => {
    const { queue, created } = await catalog.put(name("emails"));
    expect(created).toBe(true);
    expect(queue).toMatchObject({ name: name("emails"), shards: 1, databases: [{ namespace: name("emails") }] });
    const t = await open(queue.databases[0] as Database);
    expect(await t.publish("to-ada", { subject: "hi" })).toBe(1);
    t.close();
    expect(await catalog.put(name("emails"))).toMatchObject({ created: false, queue: { shards: 1 } });
    expect((await catalog.list()).map((q) => q.name)).toEqual(["default", name("emails")]);
    const counted = await catalog.listWithCounts();
    expect(counted.find((q) => q.name === name("emails"))?.stats).toMatchObject({ ready: 1, groups: 1 });
  });

  it("makes one database per shard, and refuses to change a queue's shard count", async () => {
    const { queue } = await catalog.put(name("billing"), { shards: 3, locationHint: "weur" });
    expect(queue.databases.map((d) => d.namespace)).toEqual([0, 1, 2].map((i) => `${name("billing")}--${i}`));
    for (const i of [0, 1, 2]) expect(await exists(`${name("billing")}--${i}`)).toBe(true);
    const err = await catalog.put(name("billing"), { shards: 4 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "INVALID_ARGUMENT", field: "shards" });
    expect((err as Error).message).toMatch(/cannot change from 3 to 4/);
    // The location hint may change; the rest stays.
    expect(await catalog.put(name("billing"), { locationHint: "enam" })).toMatchObject({
      created: false,
      queue: { shards: 3, locationHint: "enam" },
    });
  });

  it("refuses a bad name or setting naming the field, and makes nothing", async () => {
    for (const bad of ["", "Emails", "a--b", "-a", "a-", "x".repeat(41), "a b", "a/b", "ümlaut"]) {
      const err = await catalog.put(bad).catch((e: unknown) => e);
      expect(err, bad).toMatchObject({ code: "INVALID_ARGUMENT", field: "queue" });
    }
    await expect(catalog.put(name("zero"), { shards: 0 })).rejects.toMatchObject({ field: "shards" });
    await expect(catalog.put(name("many"), { shards: 17 })).rejects.toMatchObject({ field: "shards" });
    await expect(catalog.put(name("hint"), { locationHint: "mars" })).rejects.toMatchObject({ field: "location_hint" });
    for (const n of ["zero", "many", "hint"]) expect(await exists(name(n))).toBe(false);
    expect(await catalog.get(name("zero"))).toBeUndefined();
  });

  it("refuses to delete a queue holding messages unless forced, then drops its databases", async () => {
    const { queue } = await catalog.put(name("temp"), { shards: 2 });
    const t = await open(queue.databases[1] as Database);
    await t.publish("g", 1);
    t.close();
    const err = await catalog.delete(name("temp")).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "QUEUE_NOT_EMPTY", field: "queue" });
    expect(await catalog.get(name("temp"))).toBeDefined();
    expect(await catalog.delete(name("temp"), { force: true })).toBe(true);
    expect(await catalog.get(name("temp"))).toBeUndefined();
    for (const i of [0, 1]) expect(await exists(`${name("temp")}--${i}`)).toBe(false);
    expect(await catalog.delete(name("temp"))).toBe(false);
    await expect(catalog.delete("default")).rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "queue" });
  });

  it("deletes an empty queue without force", async () => {
    await catalog.put(name("empty"));
    expect(await catalog.delete(name("empty"))).toBe(true);
    expect(await exists(name("empty"))).toBe(false);
  });
});

describe("the static map", () => {
  it("answers the databases it lists and refuses the others, naming the queue", async () => {
    const p = staticDatabases({
      emails: "libsql://emails-me.turso.io",
      billing: { url: "http://127.0.0.1:1", authToken: "t" },
    });
    expect(await p.create("emails")).toEqual({ url: "libsql://emails-me.turso.io" });
    expect(await p.create("billing")).toEqual({ url: "http://127.0.0.1:1", authToken: "t" });
    await expect(p.create("orders")).rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "queue" });
  });
});

describe("the Turso Platform API", () => {
  it("creates a database in the group (or finds the one there), drops it, and reaches it with the group token", async () => {
    const calls: string[] = [];
    const known = new Set(["exists"]);
    const server = createServer(async (req, res) => {
      let body = "";
      for await (const c of req) body += c;
      calls.push(`${req.method} ${req.url} ${req.headers.authorization} ${body}`);
      const m = /^\/v1\/organizations\/acme\/databases(?:\/([a-z0-9-]+))?$/.exec(req.url ?? "");
      const reply = (status: number, json: unknown) =>
        res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(json));
      if (!m) return reply(404, { error: "not found" });
      const db = m[1] ?? (JSON.parse(body || "{}") as { name: string }).name;
      if (req.method === "POST") {
        if (known.has(db)) return reply(409, { error: `database ${db} already exists` });
        known.add(db);
        return reply(200, { database: { DbId: "x", Hostname: `${db}-acme.turso.io`, Name: db } });
      }
      if (req.method === "GET")
        return known.has(db) ? reply(200, { database: { Hostname: `${db}-acme.turso.io` } }) : reply(404, {});
      if (req.method === "DELETE")
        return known.delete(db) ? reply(200, { database: db }) : reply(404, { error: "not found" });
      reply(405, {});
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const p = tursoDatabases({
        organization: "acme",
        group: "queues",
        apiToken: "api-token",
        databaseToken: "group-token",
        apiUrl: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
      });
      expect(await p.create("emails")).toEqual({ url: "libsql://emails-acme.turso.io", authToken: "group-token" });
      expect(await p.create("exists")).toEqual({ url: "libsql://exists-acme.turso.io", authToken: "group-token" });
      expect(await p.drop("emails")).toBe(true);
      expect(await p.drop("emails")).toBe(false);
      expect(calls[0]).toBe(
        'POST /v1/organizations/acme/databases Bearer api-token {"name":"emails","group":"queues"}',
      );
      expect(calls.filter((c) => c.startsWith("GET"))).toEqual([
        "GET /v1/organizations/acme/databases/exists Bearer api-token ",
      ]);
    } finally {
      server.close();
    }
  });
});
