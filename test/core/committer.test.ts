/**
 * The write path against a real sqld: writes submitted together ride one batch, and when the
 * database rejects one statement of a coalesced batch, only the write it belongs to fails; the
 * others go again together, in one more request.
 */
import { createClient, type ResultSet } from "@libsql/client";
import { afterEach, describe, expect, inject, it } from "vitest";
import { Committer } from "../../src/core/committer.js";
import { QueueError } from "../../src/core/errors.js";
import { httpWriter } from "../../src/core/hrana.js";

const opts = { maxInFlight: 1, maxBatchStatements: 800, requestTimeoutMs: 10_000, timeoutMs: 30_000 };

let close = () => {};
afterEach(() => close());

/** A client, and the committer's way to send a batch: the client's own, or hrana.ts (as over HTTP). */
function counting(via: "client" | "httpWriter") {
  let requests = 0;
  const countingFetch = ((input: RequestInfo | URL, init?: RequestInit) => {
    requests++;
    return fetch(input, init);
  }) as typeof fetch;
  const client = createClient({ url: inject("sqldUrl"), fetch: countingFetch });
  close = () => client.close();
  const send = via === "httpWriter" ? httpWriter({ url: inject("sqldUrl"), fetch: countingFetch }) : undefined;
  return { client, send, requests: () => requests };
}

const write = (sql: string, read = (rs: ResultSet[]) => rs[0]?.rows[0]?.v) => ({
  stmts: [{ sql, args: [] }],
  read,
  idempotent: true,
});

describe.each(["client", "httpWriter"] as const)("sending through %s", (via) => {
  it("writes submitted in one tick travel in one request, each getting its own answer", async () => {
    const { client, send, requests } = counting(via);
    const c = new Committer(client, opts, send);
    const answers = await Promise.all([1, 2, 3].map((n) => c.submit(write(`SELECT ${n} AS v`))));
    expect(answers).toEqual([1, 2, 3]);
    expect(requests()).toBe(1);
    expect(c.stats).toMatchObject({ batches: 1, writes: 3 });
  });

  it("a statement the database rejects fails only its own write; the rest are applied in one more request", async () => {
    const { client, send, requests } = counting(via);
    await client.execute("CREATE TABLE IF NOT EXISTS committer_t (k INTEGER PRIMARY KEY)");
    await client.execute("DELETE FROM committer_t");
    const before = requests();
    const c = new Committer(client, opts, send);
    const results = await Promise.allSettled([
      c.submit(write("INSERT INTO committer_t (k) VALUES (1) RETURNING k AS v")),
      c.submit(write("INSERT INTO no_such_table (k) VALUES (2)")),
      c.submit(write("INSERT INTO committer_t (k) VALUES (3) RETURNING k AS v")),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(QueueError);
    expect(((results[1] as PromiseRejectedResult).reason as QueueError).code).toBe("DATABASE");
    // The first batch rolled back as a whole; the two good writes went again, together.
    expect(requests() - before).toBe(2);
    const rows = (await client.execute("SELECT k FROM committer_t ORDER BY k")).rows.map((r) => Number(r.k));
    expect(rows).toEqual([1, 3]);
  });
});
