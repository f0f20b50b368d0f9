/**
 * What a sceptical user broke at the seams of one database (issue 30 items 4, 5, 6, 8, 9), on a file
 * and on sqld: a redriven message keeps its trace and has an age again; groups() lists a group whose
 * lease, park or delay has ended before any claim touches it; extend(leaseId) answers
 * `{ id, expiresAt }`; local paths follow SQLite's rules; reads after close() fail with CLOSED; an
 * embedded replica whose primary cannot be reached fails with UNAVAILABLE.
 */
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { clientOf } from "../../src/core/internals.js";
import { type Lease, LibsqlTransport, QueueError } from "../../src/index.js";
import { checkInvariants, targets } from "../support/db.js";
import { waitFor } from "../support/wait.js";

const TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

describe.each(targets)("seams of one database on $name", (target) => {
  it("a redriven message keeps the trace it was published in, and its age runs from the redrive", async () => {
    const t = await target.open({ maxAttempts: 1 });
    try {
      await t.publish("r", { n: 1 }, 0, { traceparent: TRACE });
      const lease = (await t.claim("w", 30)) as Lease;
      expect((await t.nack(lease)).deadLettered).toBe(true);
      const [dead] = await t.deadLetters();
      const before = await t.stats();
      const seq = await t.redrive(dead?.seq as number);
      const [queued] = await t.peek("r");
      expect(queued?.seq).toBe(seq);
      // Published (again) at the redrive, on the database's clock.
      expect(queued?.publishedAt).toBeGreaterThanOrEqual(before.now);
      const s = await t.stats();
      expect(s.oldestAge).not.toBeNull();
      expect(s.oldestAge).toBeLessThan(60);
      expect(s.lag.map((l) => l.groupId)).toEqual(["r"]);
      const again = (await t.claim("w", 30)) as Lease;
      expect(again).toMatchObject({ seq, attempts: 1, traceparent: TRACE });
      await t.ack(again);
      await checkInvariants(clientOf(t));
    } finally {
      t.close();
    }
  });

  it("groups() lists a group whose lease, park or delay has ended, before a claim touches it", async () => {
    const t = await target.open();
    try {
      await t.publishMany([
        { groupId: "lapsed", event: 1 },
        { groupId: "parked", event: 2 },
        { groupId: "delayed", event: 3, delay: 0.2 },
      ]);
      const leases = await t.claimMany("crashed", 0.2, 2);
      const parked = leases.find((l) => l.groupId === "parked") as Lease;
      await t.nack(parked, 0.2);
      // Everything held ends within a fraction of a second; nothing claims meanwhile.
      await waitFor(async () => (await t.stats()).ready === 3, { what: "the lease, park and delay ended" });
      const groups = await t.groups();
      expect(groups.map((g) => g.groupId).sort()).toEqual(["delayed", "lapsed", "parked"]);
      expect(groups.every((g) => !g.inFlight && !g.parked && g.messages === 1)).toBe(true);
      // Listed in the order claims take them (longest unclaimed first), as the free index lists groups.
      const order = (await t.claimMany("next", 30, 3)).map((l) => l.groupId);
      expect(groups.map((g) => g.groupId)).toEqual(order);
    } finally {
      t.close();
    }
  });

  it("extend(leaseId) answers { id, expiresAt }; extend(lease) the lease", async () => {
    const t = await target.open();
    try {
      await t.publish("x", 1);
      const lease = (await t.claim("w", 30)) as Lease;
      const byId = await t.extend(lease.id, 60);
      expect(Object.keys(byId).sort()).toEqual(["expiresAt", "id"]);
      expect(byId.id).toBe(lease.id);
      expect(byId.expiresAt).toBeGreaterThan(lease.expiresAt);
      const byLease = await t.extend(lease, 90);
      expect(byLease).toEqual({ ...lease, expiresAt: byLease.expiresAt });
      expect(byLease.expiresAt).toBeGreaterThan(byId.expiresAt);
    } finally {
      t.close();
    }
  });

  it("every call after close() fails with CLOSED, reads included", async () => {
    const t = await target.open();
    await t.publish("c", 1);
    t.close();
    for (const call of [
      () => t.stats(),
      () => t.groups(),
      () => t.peek("c"),
      () => t.deadLetters(),
      () => t.nextDueAt(),
      () => t.publish("c", 2),
      () => t.claim("w", 30),
    ]) {
      await expect(call()).rejects.toMatchObject({ code: "CLOSED" });
    }
  });
});

describe("local paths follow SQLite's rules", () => {
  const dir = () => mkdtempSync(join(tmpdir(), "turso-queue-paths-"));

  it("a bare path is the file name it is: a ? or % is part of it", async () => {
    const d = dir();
    const one = await LibsqlTransport.create(join(d, "jobs?v=1.db"));
    const two = await LibsqlTransport.create(join(d, "jobs?v=2.db"));
    try {
      await one.publish("g", 1);
      expect((await two.stats()).ready).toBe(0);
      expect(existsSync(join(d, "jobs?v=1.db"))).toBe(true);
      expect(existsSync(join(d, "jobs"))).toBe(false);
    } finally {
      one.close();
      two.close();
    }
  });

  it("a file: URI is percent-decoded, may name localhost, and honours ?mode=ro", async () => {
    const d = dir();
    const spaced = await LibsqlTransport.create(`file:${d}/my%20q.db`);
    await spaced.publish("g", 1);
    spaced.close();
    expect(existsSync(join(d, "my q.db"))).toBe(true);

    const local = await LibsqlTransport.create(`file://localhost${d}/my%20q.db`);
    expect((await local.stats()).ready).toBe(1);
    local.close();

    const ro = await LibsqlTransport.create(`file:${d}/my%20q.db?mode=ro`);
    try {
      expect((await ro.stats()).ready).toBe(1);
      await expect(ro.publish("g", 2)).rejects.toBeInstanceOf(QueueError);
    } finally {
      ro.close();
    }
    const rw = await LibsqlTransport.create(`file:${d}/my%20q.db`);
    expect((await rw.stats()).ready).toBe(1);
    rw.close();
  });

  it("refuses a URL of no database, and a file: URI naming another host, saying why", async () => {
    for (const [database, why] of [
      ["ftp://x", "ftp:// is not a database URL"],
      ["s3://bucket/q.db", "s3:// is not a database URL"],
      ["file://db.example.com/tmp/q.db", 'names no host but localhost, got "db.example.com"'],
    ] as const) {
      await expect(LibsqlTransport.create(database)).rejects.toMatchObject({
        code: "INVALID_ARGUMENT",
        field: "database",
        message: expect.stringContaining(why),
      });
    }
  });

  it("an embedded replica whose primary cannot be reached is UNAVAILABLE (retryable), not a bad argument", async () => {
    const replica = join(dir(), "replica.db");
    // Port 9 (discard) is closed on loopback.
    const failed = await LibsqlTransport.create(`file:${replica}`, { syncUrl: "http://127.0.0.1:9" }).catch(
      (e: unknown) => e,
    );
    expect(failed).toBeInstanceOf(QueueError);
    expect(failed).toMatchObject({ code: "UNAVAILABLE" });
  });
});
