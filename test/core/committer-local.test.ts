/**
 * A local file goes through the same write engine as a database over the network: the writes of a
 * tick share one transaction, a statement the database rejects fails only its own write, BUSY from
 * another process is retried with backoff until the call's deadline, and a plan's `when` skips what
 * would change nothing.
 */
import type { Client, ResultSet } from "@libsql/client";
import { afterEach, describe, expect, it } from "vitest";
import { Committer } from "../../src/core/committer.js";
import { QueueError } from "../../src/core/errors.js";
import { localOf, openLocal } from "../../src/core/local.js";
import { tempFile } from "../support/db.js";

const opts = { maxInFlight: 1, maxBatchStatements: 800, requestTimeoutMs: 10_000, timeoutMs: 30_000 };

const closing: Array<() => void> = [];
afterEach(() => {
  for (const close of closing.splice(0)) close();
});

async function local(path = tempFile(), o = opts) {
  const client = await openLocal(path);
  const engine = localOf(client);
  if (engine === undefined) throw new Error("not a local client");
  const c = new Committer(client, o, engine);
  closing.push(() => {
    c.close();
    client.close();
  });
  await client.execute("CREATE TABLE t (k INTEGER PRIMARY KEY)");
  return { client, c, path };
}

const write = (sql: string, read = (rs: ResultSet[]) => rs[0]?.rows[0]?.v) => ({
  stmts: [{ sql, args: [] }],
  read,
  idempotent: true,
});

const keys = async (client: Client) =>
  (await client.execute("SELECT k FROM t ORDER BY k")).rows.map((r) => Number(r.k));

describe("the write engine over a local file (in-process)", () => {
  it("writes submitted in one tick commit in one transaction, each getting its own answer", async () => {
    const { client, c } = await local();
    const answers = await Promise.all(
      [1, 2, 3].map((n) => c.submit(write(`INSERT INTO t (k) VALUES (${n}) RETURNING k AS v`))),
    );
    expect(answers).toEqual([1, 2, 3]);
    expect(c.stats).toMatchObject({ batches: 1, writes: 3, statements: 3, retries: 0 });
    expect(await keys(client)).toEqual([1, 2, 3]);
  });

  it("a statement the database rejects fails only its own write; the rest commit together after", async () => {
    const { client, c } = await local();
    const results = await Promise.allSettled([
      c.submit(write("INSERT INTO t (k) VALUES (1) RETURNING k AS v")),
      c.submit(write("INSERT INTO no_such_table (k) VALUES (2)")),
      c.submit(write("INSERT INTO t (k) VALUES (3) RETURNING k AS v")),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(((results[1] as PromiseRejectedResult).reason as QueueError).code).toBe("DATABASE");
    expect(c.stats).toMatchObject({ batches: 1, writes: 2 });
    expect(await keys(client)).toEqual([1, 3]);
  });

  it("another process holding the lock (BUSY) is waited out with backoff; the write then commits once", async () => {
    const { client, c, path } = await local();
    const other = await openLocal(path);
    closing.push(() => other.close());
    // A second connection takes the write lock and keeps it a while.
    await other.execute("BEGIN IMMEDIATE");
    const w = c.submit(write("INSERT INTO t (k) VALUES (7) RETURNING k AS v"));
    const started = Date.now();
    while (c.stats.busy < 2 && Date.now() - started < 10_000) await new Promise((r) => setTimeout(r, 10));
    expect(c.stats.busy).toBeGreaterThanOrEqual(2);
    await other.execute("COMMIT");
    expect(await w).toBe(7);
    expect(c.stats.retries).toBe(c.stats.busy);
    expect(await keys(client)).toEqual([7]);
  });

  it("BUSY past the call's deadline fails the write with BUSY, and nothing is stored", async () => {
    const { client, c, path } = await local(tempFile(), { ...opts, timeoutMs: 200 });
    const other = await openLocal(path);
    closing.push(() => other.close());
    await other.execute("BEGIN IMMEDIATE");
    const err = await c.submit(write("INSERT INTO t (k) VALUES (8)")).catch((e: unknown) => e);
    await other.execute("ROLLBACK");
    expect(err).toBeInstanceOf(QueueError);
    expect((err as QueueError).code).toBe("BUSY");
    expect((err as QueueError).outcomeUnknown).toBe(false);
    expect(await keys(client)).toEqual([]);
  });

  it("a statement its plan says would change nothing is not run", async () => {
    const { client, c } = await local();
    const answer = await c.submit({
      stmts: [
        { sql: "INSERT INTO t (k) VALUES (1) RETURNING k", args: [] },
        { sql: "INSERT INTO t (k) VALUES (2)", args: [] },
      ],
      // The second runs only when the first inserted nothing.
      when: [undefined, (earlier: ResultSet[]) => (earlier[0]?.rows.length ?? 0) === 0],
      read: (rs: ResultSet[]) => rs.map((r) => r.rows.length + r.rowsAffected),
      idempotent: true,
    });
    expect(answer).toEqual([1, 0]);
    expect(await keys(client)).toEqual([1]);
  });

  it("a write whose retry comes after close() fails with CLOSED", async () => {
    const { c, path } = await local();
    const other = await openLocal(path);
    closing.push(() => other.close());
    await other.execute("BEGIN IMMEDIATE");
    const w = c.submit(write("INSERT INTO t (k) VALUES (9)")).catch((e: unknown) => e);
    const started = Date.now();
    while (c.stats.busy < 1 && Date.now() - started < 10_000) await new Promise((r) => setTimeout(r, 5));
    c.close();
    const err = await w;
    await other.execute("ROLLBACK");
    expect((err as QueueError).code).toBe("CLOSED");
  });
});
