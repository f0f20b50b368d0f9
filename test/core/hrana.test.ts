/**
 * The write path's own request (src/core/hrana.ts) against a real sqld, side by side with
 * `@libsql/client`'s `batch(..., "write")`, which it replaces for writes over HTTP: the same
 * results, the same atomicity, errors that say which statement failed. And `HttpClient`, the
 * Worker's reads and writes without the client: the same answers, errors mapped alike.
 */
import { createClient, type InStatement, type ResultSet } from "@libsql/client";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { QueueError, toQueueError } from "../../src/core/errors.js";
import { HranaError, HttpClient, httpClient, httpUrlOf, httpWriter } from "../../src/core/hrana.js";
import { clientOf, writeStatsOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/core/transport.js";
import { resetDatabase } from "../support/db.js";
import { waitFor } from "../support/wait.js";

const url = inject("sqldUrl");
const client = createClient({ url });
const write = httpWriter({ url, fetch: (input, init) => fetch(input, init) });
const viaClient = (stmts: InStatement[]) => client.batch(stmts, "write");
afterAll(() => client.close());

/** What a reader can see of a result: rows by column name, counts, the last rowid. */
const seen = (results: ResultSet[]) =>
  results.map((rs) => ({
    columns: rs.columns,
    rows: rs.rows.map((row) => Object.fromEntries(rs.columns.map((c) => [c, row[c]]))),
    rowsAffected: rs.rowsAffected,
    lastInsertRowid: rs.lastInsertRowid,
  }));

const script = (t: string): InStatement[] => [
  { sql: `INSERT INTO ${t} (k, f, s, b, n) VALUES (?, ?, ?, x'00ff10', ?) RETURNING *`, args: [3, 2.5, "é ✓", null] },
  { sql: `INSERT INTO ${t} (k, f, s) VALUES (?, ?, ?), (?, ?, ?)`, args: [4, -1, "", 5, 0.1, "x"] },
  { sql: `UPDATE ${t} SET s = s || '!' WHERE k >= ?`, args: [4] },
  { sql: `SELECT k, typeof(k) AS tk, f, s AS k, b, n FROM ${t} ORDER BY 1`, args: [] },
  { sql: `SELECT count(*) AS c, 9007199254740991 AS big FROM ${t}`, args: [] },
];

describe("httpWriter", () => {
  beforeAll(async () => {
    for (const t of ["hw_a", "hw_b", "hw_atomic"]) {
      await client.execute(`DROP TABLE IF EXISTS ${t}`);
      await client.execute(`CREATE TABLE ${t} (k INTEGER PRIMARY KEY, f REAL, s TEXT UNIQUE, b BLOB, n TEXT)`);
    }
  });

  it("returns what client.batch(..., 'write') returns for the same statements", async () => {
    const mine = seen(await write(script("hw_a")));
    const theirs = seen(await viaClient(script("hw_b")));
    expect(mine).toEqual(theirs);
    // Spot checks, so that equality of two wrong answers cannot pass.
    expect(mine[0]?.rows[0]).toMatchObject({ k: 3, f: 2.5, s: "é ✓", n: null });
    expect(new Uint8Array(mine[0]?.rows[0]?.b as ArrayBuffer)).toEqual(new Uint8Array([0, 255, 16]));
    expect(mine[1]?.rowsAffected).toBe(2);
    expect(mine[1]?.lastInsertRowid).toBe(5n);
    expect(mine[2]?.rowsAffected).toBe(2);
    // A JS number goes as the client sends it, and SQLite's affinity stores an integer.
    expect(mine[3]?.rows.map((r) => r.tk)).toEqual(["integer", "integer", "integer"]);
    // Two columns named alike: the first one wins, as with the client.
    expect(mine[3]?.rows[0]?.k).toBe(3);
    expect(mine[4]?.rows[0]).toEqual({ c: 3, big: Number.MAX_SAFE_INTEGER });
  });

  it("a failing statement rolls the whole batch back and names its index", async () => {
    const before = (await client.execute("SELECT count(*) AS c FROM hw_atomic")).rows[0]?.c;
    const err = await write([
      { sql: "INSERT INTO hw_atomic (k, s) VALUES (?, ?)", args: [1, "one"] },
      { sql: "INSERT INTO hw_atomic (k, s) VALUES (?, ?)", args: [2, "two"] },
      { sql: "INSERT INTO hw_atomic (k, s) VALUES (?, ?)", args: [3, "one"] },
      { sql: "INSERT INTO hw_atomic (k, s) VALUES (?, ?)", args: [4, "four"] },
    ]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HranaError);
    expect((err as HranaError).statementIndex).toBe(2);
    expect((err as HranaError).code).toMatch(/^SQLITE_CONSTRAINT/);
    expect((await client.execute("SELECT count(*) AS c FROM hw_atomic")).rows[0]?.c).toBe(before);
    expect(toQueueError(err)).toMatchObject({ code: "DATABASE" });
  });

  it("refuses an integer beyond 2^53 instead of rounding it, as the client does", async () => {
    const big = [{ sql: "SELECT 9007199254740993 AS v", args: [] }];
    await expect(write(big)).rejects.toThrow(RangeError);
    await expect(viaClient(big)).rejects.toThrow(RangeError);
  });

  it("an HTTP error carries its status, mapped like the client's", async () => {
    const wrong = httpWriter({ url: `${url}/no-such-prefix`, fetch: (input, init) => fetch(input, init) });
    const err = await wrong([{ sql: "SELECT 1", args: [] }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HranaError);
    expect(err).toMatchObject({ code: "SERVER_ERROR", status: 404 });
    expect(toQueueError(err)).toBeInstanceOf(QueueError);
  });
});

describe("the write path's stream, kept while batches follow one another", () => {
  type Sent = { baton: string | null; batch: boolean; close: boolean; status: number };
  /** A writer over a fetch that records each request (and may rewrite its baton). */
  const recording = (
    o: {
      keepStream?: boolean;
      keepStreamMs?: number;
      rewrite?: (baton: string | null, i: number) => string | null;
    } = {},
  ) => {
    const sent: Sent[] = [];
    const send = httpWriter({
      url,
      keepStream: o.keepStream,
      // Long enough that writes one after another always follow one another, however loaded the machine.
      keepStreamMs: o.keepStreamMs ?? 60_000,
      fetch: async (input, init) => {
        const body = JSON.parse(String(init?.body)) as { baton: string | null; requests: { type: string }[] };
        const baton = o.rewrite ? o.rewrite(body.baton, sent.length) : body.baton;
        const types = body.requests.map((r) => r.type);
        const entry = { baton, batch: types.includes("batch"), close: types.includes("close"), status: 0 };
        sent.push(entry);
        const res = await fetch(input, { ...init, body: JSON.stringify({ ...body, baton }) });
        entry.status = res.status;
        return res;
      },
    });
    return { send, sent };
  };
  const insert = (k: number): InStatement[] => [{ sql: "INSERT INTO hw_stream (k) VALUES (?) RETURNING k", args: [k] }];
  const shape = (sent: Sent[]) =>
    sent.map((r) => [r.baton === null ? "new" : "kept", r.batch ? "batch" : "-", r.close]);

  beforeAll(async () => {
    await client.execute("DROP TABLE IF EXISTS hw_stream");
    await client.execute("CREATE TABLE hw_stream (k INTEGER PRIMARY KEY)");
  });

  it("a lone write opens and closes its stream; writes that follow keep one, each with the baton its last answer gave", async () => {
    const { send, sent } = recording({ keepStream: true });
    for (let k = 1; k <= 4; k++) expect((await send(insert(k)))[0]?.rows[0]?.k).toBe(k);
    expect(shape(sent)).toEqual([
      ["new", "batch", true],
      ["new", "batch", false],
      ["kept", "batch", false],
      ["kept", "batch", false],
    ]);
    expect(sent.every((r) => r.status === 200)).toBe(true);
    expect(new Set(sent.map((r) => r.baton)).size).toBe(3);
    // Closed, the writer closes its kept stream (a request of its own, with its baton). One left
    // idle is closed the same way (the 300 writers below).
    send.close();
    await waitFor(async () => sent.length === 5 && sent[4]?.status !== 0, { what: "the kept stream's close" });
    expect(shape(sent.slice(4))).toEqual([["kept", "-", true]]);
    expect(sent[4]?.status).toBe(200);
  });

  it("a stream stays kept while writes follow within keepStreamMs, however long that lasts, and is closed once they stop", async () => {
    const { send, sent } = recording({ keepStream: true, keepStreamMs: 300 });
    const started = Date.now();
    let k = 50;
    // Writes 20 ms apart for more than twice keepStreamMs.
    while (Date.now() - started < 700) {
      await send(insert(k++));
      await new Promise((r) => setTimeout(r, 20));
    }
    const writes = sent.length;
    // The first write alone (nothing to follow yet); the second opens the stream the others keep.
    expect(shape(sent)).toEqual([
      ["new", "batch", true],
      ["new", "batch", false],
      ...Array(writes - 2).fill(["kept", "batch", false]),
    ]);
    // Never closed by the writer: idle for keepStreamMs, its stream is closed all the same.
    await waitFor(async () => sent.length === writes + 1 && sent[writes]?.status !== 0, { what: "the idle close" });
    expect(shape(sent.slice(writes))).toEqual([["kept", "-", true]]);
    expect(sent[writes]?.status).toBe(200);
  });

  it("a write sent while another is out goes on a stream of its own, closed with it", async () => {
    const { send, sent } = recording({ keepStream: true });
    await send(insert(10));
    await send(insert(11));
    const got = await Promise.all([send(insert(12)), send(insert(13))]);
    expect(got.map((r) => r[0]?.rows[0]?.k)).toEqual([12, 13]);
    expect(shape(sent.slice(2, 4))).toEqual([
      ["kept", "batch", false],
      ["new", "batch", true],
    ]);
    send.close();
  });

  it("a stream the server no longer knows (400, nothing run) is replaced at once: the write applies once", async () => {
    // The third request's baton is one the server never gave, as after an expiry or a restart.
    const { send, sent } = recording({ keepStream: true, rewrite: (baton, i) => (i === 2 ? `${baton}x` : baton) });
    await send(insert(20));
    await send(insert(21));
    expect((await send(insert(22)))[0]?.rows[0]?.k).toBe(22);
    expect(sent.slice(2, 4).map((r) => [r.baton === null, r.status])).toEqual([
      [false, 400],
      [true, 200],
    ]);
    expect((await client.execute("SELECT count(*) AS n FROM hw_stream WHERE k = 22")).rows[0]?.n).toBe(1);
    send.close();
  });

  it("after a failed request the next opens a new stream", async () => {
    let fail = false;
    const sent: (string | null)[] = [];
    const send = httpWriter({
      url,
      keepStream: true,
      keepStreamMs: 60_000,
      fetch: async (input, init) => {
        sent.push((JSON.parse(String(init?.body)) as { baton: string | null }).baton);
        if (fail) throw new TypeError("fetch failed");
        return fetch(input, init);
      },
    });
    await send(insert(30));
    await send(insert(31));
    fail = true;
    await expect(send(insert(32))).rejects.toThrow("fetch failed");
    fail = false;
    await send(insert(33));
    expect(sent.map((b) => b === null)).toEqual([true, true, false, true]);
    send.close();
  });

  it("writers that stop leave no stream open: 300 of them, one after another, each keeping one a moment", async () => {
    // sqld holds a connection for each open stream, 128 at most (the 129th waits, then gets 429): left
    // open until the server's own 10-second expiry, these would run out of them.
    for (let w = 0; w < 300; w++) {
      const send = httpWriter({ url, keepStream: true, fetch: (input, init) => fetch(input, init) });
      for (let k = 0; k < 3; k++) await send(insert(1000 + w * 3 + k));
    }
    expect((await client.execute("SELECT count(*) AS n FROM hw_stream WHERE k >= 1000")).rows[0]?.n).toBe(900);
  });

  it("keepStream: false (a transport per request) closes every stream with its batch", async () => {
    const { send, sent } = recording({ keepStream: false });
    for (let k = 40; k < 43; k++) await send(insert(k));
    expect(shape(sent)).toEqual([
      ["new", "batch", true],
      ["new", "batch", true],
      ["new", "batch", true],
    ]);
  });
});

describe("the database URL the write path posts to", () => {
  it("reads libsql:// as @libsql/client does, and refuses what is not HTTP", () => {
    expect(httpUrlOf("libsql://db-org.turso.io")).toBe("https://db-org.turso.io/");
    expect(httpUrlOf("libsql://127.0.0.1:8080?tls=0")).toBe("http://127.0.0.1:8080/");
    expect(httpUrlOf("http://127.0.0.1:8080/")).toBe("http://127.0.0.1:8080/");
    expect(httpUrlOf("file:queue.db")).toBeUndefined();
    expect(httpUrlOf("wss://db-org.turso.io")).toBeUndefined();
  });

  it("fromClient writes through a libsql:// URL (tls=0: plain HTTP)", async () => {
    const libsqlUrl = `${url.replace(/^http:/, "libsql:").replace(/\/$/, "")}?tls=0`;
    await LibsqlTransport.fromClient(client); // the schema
    // The client points nowhere (a refused port): a write that arrives went through hrana.ts.
    const nowhere = createClient({ url: "http://127.0.0.1:9" });
    const t = await LibsqlTransport.fromClient(nowhere, { http: { url: libsqlUrl }, ensureSchema: false });
    const before = writeStatsOf(t).batches;
    const seq = await t.publish("hrana-libsql-url", { n: 1 });
    expect(writeStatsOf(t).batches).toBe(before + 1);
    expect(
      (await client.execute({ sql: "SELECT count(*) AS c FROM messages WHERE seq = ?", args: [seq] })).rows[0]?.c,
    ).toBe(1);
    await resetDatabase(client); // the shared sqld, as the next file expects it
  });

  it("fromClient refuses an http option it cannot post to, naming the field", async () => {
    const err = await LibsqlTransport.fromClient(client, { http: { url: "file:queue.db" } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QueueError);
    expect(err).toMatchObject({ code: "INVALID_ARGUMENT", field: "options.http.url" });
  });
});

describe("a server without Hrana 3 (an older sqld)", () => {
  it("the write path falls back to the client's own batch, which speaks what the server does", async () => {
    // sqld with its /v3 paths hidden: what an sqld older than 0.21 answers them (404).
    const { createServer } = await import("node:http");
    const seen: string[] = [];
    const server = createServer(async (req, res) => {
      seen.push(`${req.method} ${req.url}`);
      if (req.url?.startsWith("/v3")) {
        res.writeHead(404).end();
        return;
      }
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const answer = await fetch(`${url}${req.url}`, {
        method: req.method,
        headers: { "content-type": String(req.headers["content-type"] ?? "application/json") },
        body: req.method === "GET" ? undefined : Buffer.concat(chunks),
      });
      res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" });
      res.end(Buffer.from(await answer.arrayBuffer()));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const t = await LibsqlTransport.create(`http://127.0.0.1:${port}`);
      const seq = await t.publish("old-server", { n: 1 });
      const lease = await t.claim("old", 30);
      expect(lease?.seq).toBe(seq);
      await t.ack(lease as NonNullable<typeof lease>);
      t.close();
      // One try of /v3/pipeline, then every write on the client's protocol (v2).
      expect(seen.filter((s) => s.startsWith("POST /v3/pipeline"))).toHaveLength(1);
      expect(seen.filter((s) => s.startsWith("POST /v2/pipeline")).length).toBeGreaterThanOrEqual(3);
      expect(
        (await client.execute({ sql: "SELECT count(*) AS c FROM messages WHERE seq = ?", args: [seq] })).rows[0]?.c,
      ).toBe(0);
    } finally {
      server.close();
    }
  });

  it("an answer that is not a Hrana 3 pipeline result is a protocol error, not a crash", async () => {
    const odd = httpWriter({ url, fetch: async () => new Response(JSON.stringify({ results: {} }), { status: 200 }) });
    const err = await odd([{ sql: "SELECT 1", args: [] }]).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "HRANA_PROTO_ERROR" });
    expect(toQueueError(err)).toMatchObject({ code: "UNAVAILABLE" });
  });
});

describe("HttpClient: reads and writes without @libsql/client", () => {
  /** A client over the shared sqld that records each request's path. */
  const counted = (readTimeoutMs = 5_000) => {
    const paths: string[] = [];
    const c = new HttpClient(
      {
        url,
        fetch: (input, init) => {
          paths.push(new URL(input instanceof Request ? input.url : String(input)).pathname);
          return fetch(input, init);
        },
      },
      readTimeoutMs,
    );
    return { c, paths };
  };

  beforeAll(async () => {
    await client.execute("DROP TABLE IF EXISTS hc_read");
    await client.execute("CREATE TABLE hc_read (k INTEGER PRIMARY KEY, f REAL, s TEXT, b BLOB, n TEXT)");
    await client.execute({ sql: "INSERT INTO hc_read VALUES (?, ?, ?, x'00ff10', ?)", args: [3, 2.5, "é ✓", null] });
  });

  it("execute answers what client.execute answers, in one request", async () => {
    const { c, paths } = counted();
    for (const stmt of [
      { sql: "SELECT k, typeof(k) AS tk, f, s AS k, b, n FROM hc_read WHERE k = ?", args: [3] },
      "SELECT count(*) AS c, 9007199254740991 AS big FROM hc_read",
      { sql: "SELECT * FROM hc_read WHERE k > ?", args: [100] },
    ]) {
      expect(seen([await c.execute(stmt)])).toEqual(seen([await client.execute(stmt)]));
    }
    expect(paths).toEqual(["/v3/pipeline", "/v3/pipeline", "/v3/pipeline"]);
    const rs = await c.execute("SELECT b FROM hc_read");
    expect(new Uint8Array(rs.rows[0]?.b as ArrayBuffer)).toEqual(new Uint8Array([0, 255, 16]));
  });

  it("a statement that fails is the database's error; a closed client refuses at once", async () => {
    const { c, paths } = counted();
    const err = await c.execute("SELECT nope FROM hc_read").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HranaError);
    expect(toQueueError(err)).toMatchObject({ code: "DATABASE" });
    expect((err as Error).message).toMatch(/no such column: nope/);
    c.close();
    expect(toQueueError(await c.execute("SELECT 1").catch((e: unknown) => e))).toMatchObject({ code: "CLOSED" });
    expect(toQueueError(await c.batch(["SELECT 1"], "write").catch((e: unknown) => e))).toMatchObject({
      code: "CLOSED",
    });
    expect(paths).toHaveLength(1);
  });

  it("an answer cut short, a 404 and a read past its time map as the client's do", async () => {
    const cut = new HttpClient(
      { url, fetch: async () => new Response('{"baton":null,"results":[{"ty', { status: 200 }) },
      5_000,
    );
    const cutErr = toQueueError(await cut.execute("SELECT 1").catch((e: unknown) => e));
    expect(cutErr).toMatchObject({ code: "UNAVAILABLE" });
    const missing = new HttpClient({ url: `${url}/no-such-prefix`, fetch: (i, init) => fetch(i, init) }, 5_000);
    expect(toQueueError(await missing.execute("SELECT 1").catch((e: unknown) => e))).toMatchObject({
      code: "UNAVAILABLE",
    });
    // A server that never answers: the read's own deadline abandons its request.
    const hang = new HttpClient(
      {
        url,
        fetch: (_input, init) =>
          new Promise<Response>((_, reject) =>
            init?.signal?.addEventListener("abort", () => reject(init.signal?.reason)),
          ),
      },
      50,
    );
    expect(toQueueError(await hang.execute("SELECT 1").catch((e: unknown) => e))).toMatchObject({ code: "TIMEOUT" });
  });

  it("a transport over it publishes, claims, reads and acks, every request a Hrana 3 pipeline", async () => {
    await resetDatabase(client);
    const { c, paths } = counted();
    const t = await LibsqlTransport.fromClient(c as unknown as Parameters<typeof LibsqlTransport.fromClient>[0]);
    const seq = await t.publish("http-client", { n: 1 });
    expect((await t.stats()).ready).toBe(1);
    const lease = await t.claim("w", 30);
    expect(lease?.seq).toBe(seq);
    await t.ack(lease as NonNullable<typeof lease>);
    expect((await t.stats()).ready).toBe(0);
    expect(new Set(paths)).toEqual(new Set(["/v3/pipeline"]));
    // What tests reach through clientOf: reads and write batches of plain SQL.
    const same = clientOf(t);
    expect((await same.execute("SELECT count(*) AS c FROM messages")).rows[0]?.c).toBe(0);
    await same.batch(["DELETE FROM messages"], "write");
    t.close();
    await resetDatabase(client);
  });

  it("httpClient is an HttpClient where a Client is expected", () => {
    expect(httpClient({ url, fetch }, 1_000)).toBeInstanceOf(HttpClient);
  });
});
