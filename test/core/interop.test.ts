/**
 * The spec's Python transports and ours share one database. These tests play the Python side with
 * the spec's own SQL, statement for statement, over a raw client.
 */
import { createClient } from "@libsql/client";
import { describe, expect, it } from "vitest";
import { clientOf } from "../../src/core/internals.js";
import { type Lease, LibsqlTransport } from "../../src/index.js";
import { checkInvariants, tempFile } from "../support/db.js";
import { pyAck, pyClaim, pyPublish, SPEC_SCHEMA } from "../support/python.js";
import { waitFor } from "../support/wait.js";

describe("interop with the spec's Python transports", () => {
  it("consumes, in order, a database the Python transport created and filled", async () => {
    const file = `file:${tempFile()}`;
    const py = createClient({ url: file });
    for (const s of SPEC_SCHEMA) await py.execute(s);
    for (const g of ["exec-1", "exec-2"])
      for (let i = 0; i < 3; i++) await pyPublish(py, g, { g, i }, g === "exec-2" ? 2 : 0);
    const t = await LibsqlTransport.create(file);
    const order: unknown[] = [];
    for (let i = 0; i < 6; i++) {
      const lease = (await t.claim("ts-worker", 30)) as Lease;
      order.push(lease.event);
      await t.ack(lease);
    }
    expect(order).toEqual([
      { g: "exec-1", i: 0 },
      { g: "exec-2", i: 0 },
      { g: "exec-1", i: 1 },
      { g: "exec-2", i: 1 },
      { g: "exec-1", i: 2 },
      { g: "exec-2", i: 2 },
    ]);
    await checkInvariants(clientOf(t));
    t.close();
    py.close();
  });

  it("leaves a database the Python transport can consume: its claim, its ack, our rows", async () => {
    const file = `file:${tempFile()}`;
    const t = await LibsqlTransport.create(file);
    const py = createClient({ url: file });
    await t.publish("g", { n: 1 }, 1);
    await t.publish("g", { n: 2 });
    await t.publish("h", { n: 3 });
    // Our lease is honoured by the Python claim: it skips the group and takes the other one.
    const ours = (await t.claim("ts", 30)) as Lease;
    expect(ours.groupId).toBe("g");
    const theirs = await pyClaim(py, "py", 30);
    expect(theirs).toMatchObject({ groupId: "h", event: { n: 3 } });
    expect(await pyClaim(py, "py", 30)).toBeNull();
    // The stored columns are what Python expects: REAL epoch seconds, JSON text, worker ids.
    const row = (
      await py.execute({
        sql: "SELECT locked_by, lock_expiry, typeof(lock_expiry) AS t, event FROM messages WHERE seq = ?",
        args: [ours.seq],
      })
    ).rows[0];
    expect(row?.locked_by).toBe("ts");
    expect(row?.t).toBe("real");
    expect(row?.event).toBe('{"n":1}');
    const stamp = (await py.execute("SELECT typeof(last_claimed_at) AS t, priority FROM groups WHERE group_id = 'g'"))
      .rows[0];
    expect(stamp).toMatchObject({ t: "real", priority: 1 });
    // Python acks by seq; we ack ours; then Python takes the rest of g.
    await pyAck(py, (theirs as { seq: number }).seq, "h");
    await t.ack(ours);
    expect(await pyClaim(py, "py", 30)).toMatchObject({ groupId: "g", event: { n: 2 } });
    await checkInvariants(clientOf(t));
    t.close();
    py.close();
  });

  it("a group our lapsed lease held goes on after the Python side re-claims, nacks and acks it", async () => {
    const file = `file:${tempFile()}`;
    const t = await LibsqlTransport.create(file);
    const py = createClient({ url: file });
    for (let i = 1; i <= 3; i++) await t.publish("g", { n: i });
    // Our lease lapses; the group is still out of our round-robin index, and the Python claim takes it.
    const ours = (await t.claim("ts", 0.2)) as Lease;
    await waitFor(async () => (await pyClaim(py, "py", 30)) ?? undefined, { what: "the lease to lapse" });
    expect(await t.claim("ts", 30)).toBeNull(); // the Python lease holds the group for us too
    // The Python nack (retry now) frees the group for our claim again.
    await py.execute({
      sql: "UPDATE messages SET locked_by = NULL, lock_expiry = NULL WHERE seq = ?",
      args: [ours.seq],
    });
    await checkInvariants(clientOf(t));
    const again = (await t.claim("ts", 30)) as Lease;
    expect(again.seq).toBe(ours.seq);
    expect(again.attempts).toBe(2);
    await t.ack(again);
    // The Python side claims and acks the next one; we then get the last, in order.
    const theirs = (await pyClaim(py, "py", 30)) as { seq: number; event: unknown };
    expect(theirs.event).toEqual({ n: 2 });
    expect(await t.claim("ts", 30)).toBeNull();
    await pyAck(py, theirs.seq, "g");
    await checkInvariants(clientOf(t));
    const last = (await t.claim("ts", 30)) as Lease;
    expect(last.event).toEqual({ n: 3 });
    await t.ack(last);
    expect(await t.stats()).toMatchObject({ groups: 0, ready: 0, waiting: 0 });
    await checkInvariants(clientOf(t));
    t.close();
    py.close();
  });

  it("the Python claim never delivers a delayed message early (it holds the group for it meanwhile)", async () => {
    const file = `file:${tempFile()}`;
    const t = await LibsqlTransport.create(file);
    const py = createClient({ url: file });
    await t.publish("g", "early");
    await t.publish("g", "delayed", 0, { delay: 0.5 });
    await t.publish("h", "delayed alone", 0, { delay: 0.5 });
    const published = Date.now() / 1000;
    // The spec's claim sees the delayed messages as parked: group g is held as a whole for it.
    expect(await pyClaim(py, "py", 30)).toBeNull();
    const got = await waitFor(async () => (await pyClaim(py, "py", 30)) ?? undefined, { what: "the delay to end" });
    expect(Date.now() / 1000 - published).toBeGreaterThanOrEqual(0.45);
    expect(["early", "delayed alone"]).toContain(got.event);
    await checkInvariants(clientOf(t));
    t.close();
    py.close();
  });

  it("parks with the spec's marker", async () => {
    const file = `file:${tempFile()}`;
    const t = await LibsqlTransport.create(file);
    await t.publish("g", 1);
    await t.nack((await t.claim("w", 30)) as Lease, 60);
    const row = (await clientOf(t).execute("SELECT locked_by, lock_expiry FROM messages")).rows[0];
    expect(row?.locked_by).toBe("__parked__");
    expect(Number(row?.lock_expiry)).toBeGreaterThan(Date.now() / 1000 + 50);
    t.close();
  });
});
