import { afterEach, describe, expect, inject, it, vi } from "vitest";
import { clientOf, internalsOf, writeStatsOf } from "../../src/core/internals.js";
import { type Lease, LibsqlTransport, QueueError } from "../../src/index.js";
import { checkInvariants, resetDatabase, targets } from "../support/db.js";
import { waitFor } from "../support/wait.js";

describe.each(targets)("LibsqlTransport on $name", (target) => {
  let t: LibsqlTransport;
  afterEach(async () => {
    if (t) {
      await checkInvariants(clientOf(t));
      t.close();
    }
  });

  it("delivers a group's messages in FIFO order, one at a time", async () => {
    t = await target.open();
    const seqs = [];
    for (let i = 0; i < 5; i++) seqs.push(await t.publish("order-1", { i }));
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    const got: number[] = [];
    for (let i = 0; i < 5; i++) {
      const lease = await t.claim("w1", 30);
      expect(lease).not.toBeNull();
      // One in flight per group: while this lease lives, the group yields nothing more.
      expect(await t.claim("w2", 30)).toBeNull();
      got.push((lease as Lease<{ i: number }>).event.i);
      await t.ack(lease as Lease);
    }
    expect(got).toEqual([0, 1, 2, 3, 4]);
    expect(await t.claim("w1", 30)).toBeNull();
  });

  it("round-robins across groups: never-claimed groups first (by first seq), then oldest-claimed", async () => {
    t = await target.open();
    for (const g of ["a", "b", "c"]) for (let i = 0; i < 3; i++) await t.publish(g, `${g}${i}`);
    const order: string[] = [];
    for (let i = 0; i < 9; i++) {
      const lease = (await t.claim("w", 30)) as Lease<string>;
      order.push(lease.event);
      await t.ack(lease);
    }
    expect(order).toEqual(["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2"]);
  });

  it("keeps round-robin order when claims come several to a millisecond (the clock's tick)", async () => {
    // Without fsyncs a file claims several times a millisecond.
    t = await target.open({ synchronous: "normal" });
    const groups = Array.from({ length: 12 }, (_, i) => `g${String(i).padStart(2, "0")}`);
    for (const g of groups) for (let i = 0; i < 4; i++) await t.publish(g, i);
    const order: string[] = [];
    for (let i = 0; i < groups.length * 4; i++) {
      const lease = (await t.claim("w", 30)) as Lease;
      order.push(lease.groupId);
      await t.ack(lease);
    }
    expect(order).toEqual([...groups, ...groups, ...groups, ...groups]);
    // Several leases in one claim line up behind the groups served before them.
    for (const g of groups) await t.publish(g, "next");
    const many = await t.claimMany("w", 30, 5);
    const one = (await t.claim("w", 30)) as Lease;
    expect([...many.map((l) => l.groupId), one.groupId]).toEqual(groups.slice(0, 6));
  });

  it("a group that appears later still goes before groups already served", async () => {
    t = await target.open();
    await t.publish("old", 1);
    await t.publish("old", 2);
    await t.ack((await t.claim("w", 30)) as Lease);
    await t.publish("new", 1);
    expect(((await t.claim("w", 30)) as Lease).groupId).toBe("new");
  });

  it("applies the priority floor and keeps a group's first priority", async () => {
    t = await target.open();
    await t.publish("low", 1, 0);
    await t.publish("high", 1, 3);
    await t.publish("high", 2, 0); // the first publish set the priority; this one does not lower it
    const a = (await t.claim("w", 30, 3)) as Lease;
    expect(a.groupId).toBe("high");
    await t.ack(a);
    const b = (await t.claim("w", 30, 3)) as Lease;
    expect(b.groupId).toBe("high");
    expect(b.event).toBe(2);
    await t.ack(b);
    expect(await t.claim("w", 30, 3)).toBeNull();
    expect(await t.claim("w", 30, 4)).toBeNull();
    expect(((await t.claim("w", 30, 0)) as Lease).groupId).toBe("low");
  });

  it("delivers a lapsed lease again, to anyone", async () => {
    t = await target.open();
    await t.publish("g", "job");
    const first = (await t.claim("w1", 0.3)) as Lease;
    expect(await t.claim("w2", 30)).toBeNull();
    const again = await waitFor(() => t.claim("w2", 30), { what: "the lease to lapse" });
    expect(again.seq).toBe(first.seq);
    expect(again.attempts).toBe(2);
    expect(again.id).not.toBe(first.id);
    await t.ack(again);
  });

  it("nack(0) frees the message at once; nack(delay) parks it and blocks its group until the park ends", async () => {
    t = await target.open();
    await t.publish("g", 1);
    await t.publish("g", 2);
    await t.publish("other", "x");
    const l1 = (await t.claim("w", 30)) as Lease;
    expect(l1.groupId).toBe("g");
    expect(await t.nack(l1, 0)).toEqual({ deadLettered: false });
    // "other" was never claimed, so it goes first; then g's first message again, at once.
    const o = (await t.claim("w", 30)) as Lease;
    expect(o.groupId).toBe("other");
    await t.ack(o);
    const l2 = (await t.claim("w", 30)) as Lease;
    expect(l2.seq).toBe(l1.seq);
    await t.nack(l2, 0.5);
    const parked = await t.stats();
    expect(parked.parked).toBe(1);
    expect(await t.claim("w", 30)).toBeNull(); // the park blocks message 2 as well
    const l3 = await waitFor(() => t.claim("w", 30), { what: "the park to end" });
    expect(l3.seq).toBe(l1.seq);
    await t.ack(l3);
    expect(((await t.claim("w", 30)) as Lease).event).toBe(2);
  });

  it("stats: messages behind a live lease or park count as waiting, not ready", async () => {
    t = await target.open();
    for (const g of ["a", "b"]) for (let i = 0; i < 2; i++) await t.publish(g, i);
    await t.publish("c", 0);
    const la = (await t.claim("w", 30)) as Lease;
    const lb = (await t.claim("w", 30)) as Lease;
    await t.nack(lb, 60);
    // a: one leased, one behind it; b: one parked, one behind it; c: one free.
    expect(await t.stats()).toMatchObject({ ready: 1, waiting: 2, inFlight: 1, parked: 1, groups: 3 });
    await t.ack(la);
    expect(await t.stats()).toMatchObject({ ready: 2, waiting: 1, inFlight: 0, parked: 1, groups: 3 });
  });

  it("delayed publish: never before its time, in its group's order, holding back only what follows it", async () => {
    t = await target.open();
    await t.publish("g", "before");
    const [d] = await t.publishMany([{ groupId: "g", event: "delayed", delay: 0.6 }]);
    await t.publish("g", "after");
    await t.publish("solo", "later", 0, { delay: 0.6 });
    expect(await t.stats()).toMatchObject({ ready: 1, waiting: 1, delayed: 2, groups: 2 });
    const due = await t.nextDueAt();
    expect((due.next as number) - due.now).toBeGreaterThan(0.3);
    // What came before the delayed message goes at once; then its group waits for it.
    const first = (await t.claim("w", 30)) as Lease;
    expect(first.event).toBe("before");
    await t.ack(first);
    expect(await t.claim("w", 30)).toBeNull();
    const got: unknown[] = [];
    for (;;) {
      const l = await waitFor(() => t.claim("w", 30), { what: "the delayed messages to come due" });
      expect((await t.stats()).now).toBeGreaterThanOrEqual((due.next as number) - 0.001);
      got.push(l.event);
      await t.ack(l);
      if (got.length === 3) break;
    }
    expect(got.filter((e) => e !== "later")).toEqual(["delayed", "after"]);
    expect(got).toContain("later");
    expect(d).toBeGreaterThan(0);
  });

  it("groups(): the groups holding a lease, park or delay first, then the next in line, counts capped", async () => {
    t = await target.open();
    await t.publishMany([
      { groupId: "a", event: 1 },
      { groupId: "a", event: 2 },
      { groupId: "b", event: 3 },
      { groupId: "c", event: 4, delay: 3600 },
    ]);
    const lease = (await t.claim("w", 30)) as Lease;
    expect(lease.groupId).toBe("a");
    const list = await t.groups({ limit: 10 });
    expect(list.map((g) => [g.groupId, g.messages, g.inFlight, g.parked])).toEqual([
      ["c", 1, false, true],
      ["a", 2, true, false],
      ["b", 1, false, false],
    ]);
    expect((await t.groups({ limit: 1 })).map((g) => g.groupId)).toEqual(["c"]);
    await t.ack(lease);
  });

  it("onChange: told after each write that may free a message, not after claims, extends or refused writes", async () => {
    t = await target.open();
    const seen: string[] = [];
    const off = internalsOf(t).onChange((c) => seen.push(c));
    await t.publish("g", 1);
    await t.publishMany([{ groupId: "g", event: 2 }]);
    const a = (await t.claim("w", 30)) as Lease;
    await t.extend(a, 30);
    await t.nack(a);
    const b = (await t.claim("w", 30)) as Lease;
    await t.ack(b);
    await expect(t.ack(b)).rejects.toThrow(QueueError);
    expect(seen).toEqual(["publish", "publish", "nack", "ack"]);
    off();
    await t.publish("g", 3);
    expect(seen).toHaveLength(4);
  });

  it("onExtend: told after each extend with the lease, its message and its new expiry; not after a refused one", async () => {
    t = await target.open();
    await t.publish("g", 1);
    const seen: Array<[string, number, number]> = [];
    const off = internalsOf(t).onExtend((...args) => seen.push(args));
    const a = (await t.claim("w", 30)) as Lease;
    const moved = await t.extend(a, 120);
    expect(seen).toEqual([[a.id, a.seq, moved.expiresAt]]);
    expect(moved.expiresAt).toBeGreaterThan(a.expiresAt);
    await t.ack(a);
    await expect(t.extend(a, 60)).rejects.toThrow(QueueError);
    expect(seen).toHaveLength(1);
    off();
  });

  it("release gives a lease back as undelivered: claimable at once, its attempt not counted, fenced", async () => {
    t = await target.open();
    await t.publish("g", "first");
    await t.publish("g", "second");
    const seen: string[] = [];
    internalsOf(t).onChange((c) => seen.push(c));
    const a = (await t.claim("w1", 30)) as Lease;
    expect(a.attempts).toBe(1);
    await t.release(a);
    expect(seen).toEqual(["release"]);
    // The same message again (FIFO kept), on its first attempt again.
    const b = (await t.claim("w2", 30)) as Lease;
    expect([b.seq, b.attempts, b.event]).toEqual([a.seq, 1, "first"]);
    // The old lease is fenced off, the new one is not.
    await expect(t.release(a)).rejects.toMatchObject({ code: "LEASE_LOST" });
    await t.release(b);
    const c = (await t.claim("w3", 30)) as Lease;
    await t.ack(c);
    await expect(t.release(c)).rejects.toMatchObject({ code: "LEASE_NOT_FOUND" });
    expect(((await t.claim("w3", 30)) as Lease).event).toBe("second");
  });

  it("ack removes the group row when the group empties", async () => {
    t = await target.open();
    await t.publish("g", 1);
    await t.publish("g", 2);
    const groups = async () => Number((await clientOf(t).execute("SELECT count(*) AS n FROM groups")).rows[0]?.n);
    await t.ack((await t.claim("w", 30)) as Lease);
    expect(await groups()).toBe(1);
    await t.ack((await t.claim("w", 30)) as Lease);
    expect(await groups()).toBe(0);
    expect(await t.stats()).toMatchObject({ ready: 0, inFlight: 0, parked: 0, groups: 0 });
  });

  it("refuses bad arguments before any SQL runs, naming the field, storing nothing", async () => {
    t = await target.open();
    const cases: Array<[() => Promise<unknown>, string]> = [
      [() => t.publish("", 1), "groupId"],
      [() => t.publish(42 as unknown as string, 1), "groupId"],
      [() => t.publish("g", undefined), "event"],
      [() => t.publish("g", { a: () => 1 }), "event.a"],
      [() => t.publish("g", 1n as unknown), "event"],
      [() => t.publish("g", Number.NaN), "event"],
      [() => t.publish("g", 1, 5), "priority"],
      [() => t.publish("g", 1, 1.5), "priority"],
      [() => t.publish("g", 1, -1), "priority"],
      [() => t.claim("", 30), "workerId"],
      [() => t.claim("__parked__", 30), "workerId"],
      [() => t.claim("w", 0), "visibility"],
      [() => t.claim("w", -1), "visibility"],
      [() => t.claim("w", Number.POSITIVE_INFINITY), "visibility"],
      [() => t.claim("w", Number.NaN), "visibility"],
      [() => t.claim("w", 30, 7), "minPriority"],
      [() => t.ack("nonsense"), "lease"],
      [() => t.nack("1.00000000000000000000000000000000", -1), "delay"],
      [() => t.nack("1.00000000000000000000000000000000", Number.POSITIVE_INFINITY), "delay"],
      [
        () =>
          t.publishMany([
            { groupId: "g", event: 1 },
            { groupId: "g", event: undefined },
          ]),
        "messages[1].event",
      ],
    ];
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    cases.push([() => t.publish("g", cyclic), "event.self"]);
    for (const [call, field] of cases) {
      const err = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, field).toBeInstanceOf(QueueError);
      expect((err as QueueError).code, field).toBe("INVALID_ARGUMENT");
      expect((err as QueueError).field, field).toBe(field);
      expect((err as QueueError).message).toContain(field);
    }
    expect((await t.stats()).ready).toBe(0);
  });

  it("serves a burst of 32 concurrent callers on one transport, coalescing them into few batches", async () => {
    t = await target.open();
    const before = writeStatsOf(t).batches;
    const seqs = await Promise.all(Array.from({ length: 32 }, (_, i) => t.publish(`g${i % 8}`, i)));
    expect(new Set(seqs).size).toBe(32);
    expect(writeStatsOf(t).batches - before).toBeLessThan(32);
    const leases = await Promise.all(Array.from({ length: 32 }, (_, i) => t.claim(`w${i}`, 30)));
    const got = leases.filter((l): l is Lease => l !== null);
    // 8 groups: exactly one lease each, never two in one group.
    expect(got).toHaveLength(8);
    expect(new Set(got.map((l) => l.groupId)).size).toBe(8);
    await Promise.all(got.map((l) => t.ack(l)));
  });

  it("reads the claim plan off the database: no full scan of messages", async () => {
    t = await target.open();
    const { claimPlan } = await import("../../src/core/sql/index.js");
    // The claim as flow settings ask, and the default one.
    const claims = [true, false].map((flow) =>
      claimPlan({ token: "x", worker: "w", visibility: 1, n: 8, minPriority: 0, maxAttempts: 5, marker: -7, flow }),
    );
    for (const s of claims.flatMap((claim) => [...claim.stmts, ...(claim.resend?.stmts ?? [])])) {
      const { sql, args } = s as { sql: string; args: unknown[] };
      const plan = await clientOf(t).execute({ sql: `EXPLAIN QUERY PLAN ${sql}`, args: args as never });
      const details = plan.rows.map((r) => String(r.detail));
      for (const d of details) {
        // "SCAN g USING INDEX tq_groups_free" is the round-robin walk; a scan of messages is not allowed.
        expect(d, details.join("\n")).not.toMatch(/^SCAN (m|x|messages)\b(?! USING)/);
        expect(d, details.join("\n")).not.toMatch(/^SCAN messages$/);
      }
    }
  });
});

describe("one operation = one HTTP request", () => {
  it("claim, ack, nack and publish each send exactly one request", async () => {
    let requests = 0;
    const counting = ((input: RequestInfo | URL, init?: RequestInit) => {
      requests++;
      return fetch(input, init);
    }) as typeof fetch;
    const t = await LibsqlTransport.create(inject("sqldUrl"), { fetch: counting });
    await resetDatabase(clientOf(t));
    const count = async (f: () => Promise<unknown>) => {
      requests = 0;
      await f();
      return requests;
    };
    expect(await count(() => t.publish("g", 1))).toBe(1);
    expect(await count(() => t.publish("g", 2))).toBe(1);
    let lease: Lease | null = null;
    expect(await count(async () => (lease = await t.claim("w", 30)))).toBe(1);
    expect(await count(() => t.ack(lease as Lease))).toBe(1);
    expect(await count(async () => (lease = await t.claim("w", 30)))).toBe(1);
    expect(await count(() => t.nack(lease as Lease, 0))).toBe(1);
    expect(await count(() => t.claimMany("w", 30, 8))).toBe(1);
    expect(
      await count(() =>
        t.publishMany([
          { groupId: "x", event: 1 },
          { groupId: "y", event: 2 },
        ]),
      ),
    ).toBe(1);
    t.close();
  });
});

describe("leases are judged by the database's clock", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });
  it("a claimer whose clock runs an hour ahead cannot steal a live lease", async () => {
    const honest = await LibsqlTransport.create(inject("sqldUrl"));
    await resetDatabase(clientOf(honest));
    await honest.publish("g", 1);
    const lease = (await honest.claim("honest", 30)) as Lease;
    const real = Date.now.bind(Date);
    vi.spyOn(Date, "now").mockImplementation(() => real() + 3_600_000);
    const skewed = await LibsqlTransport.create(inject("sqldUrl"));
    expect(await skewed.claim("skewed", 30)).toBeNull();
    const { now } = await skewed.stats();
    expect(lease.expiresAt).toBeGreaterThan(now);
    expect(lease.expiresAt - now).toBeLessThanOrEqual(30);
    vi.restoreAllMocks();
    await honest.ack(lease);
    skewed.close();
    honest.close();
  });
});

/** `fetch`, each request sent `ms` later (a database farther away). */
const delayedFetch = (ms: number) =>
  (async (input: RequestInfo | URL, init?: RequestInit) => {
    await new Promise((r) => setTimeout(r, ms));
    return fetch(input, init);
  }) as typeof fetch;

describe("holdMs over HTTP: which writes a batch waits for", () => {
  it("waits after a claim that got a lease, an ack and a nack; not after an empty claim or a publish", async () => {
    // Every request to sqld takes 10 ms more here, so that a hold (capped by the last batch's
    // duration) has room to start whatever this machine's speed.
    const slow = delayedFetch(10);
    const t = await LibsqlTransport.create(inject("sqldUrl"), { holdMs: 1000, fetch: slow });
    await resetDatabase(clientOf(t));
    const stats = () => writeStatsOf(t);
    /** A hold, if one began after the last answer, has ended for want of anyone coming back. */
    const heldInVain = (n: number) => waitFor(async () => stats().holdsTimedOut === n, { what: `${n} vain holds` });
    try {
      expect(await t.claim("w", 30)).toBeNull();
      await t.publish("g", 1);
      await new Promise((r) => setTimeout(r, 50));
      expect(stats().holds, "a hold after an empty claim or a publish").toBe(0);
      const a = (await t.claim("w", 30)) as Lease;
      await heldInVain(1); // the consumer took its time: holds now pause for one batch
      expect(stats().holds).toBe(1);
      await t.nack(a); // no hold after it: the pause
      const b = (await t.claim("w", 30)) as Lease; // held for; this consumer comes back at once
      await t.ack(b);
      await heldInVain(2); // held for, in vain
      expect(stats()).toMatchObject({ holds: 3, holdsTimedOut: 2 });
    } finally {
      t.close();
    }
  });
});

describe("rideMs over HTTP: an ack nothing waits on rides the next write's batch", () => {
  it("an ack waits for the publish after it and goes in its batch; a publish or a claim never waits", async () => {
    // Every request to sqld takes 40 ms more here (a primary far away), so that the wait (capped by
    // the last batch's duration) has room whatever this machine's speed.
    const far = delayedFetch(40);
    const t = await LibsqlTransport.create(inject("sqldUrl"), { rideMs: 1000, fetch: far });
    await resetDatabase(clientOf(t));
    const stats = () => writeStatsOf(t);
    try {
      await t.publish("g1", 1);
      const lease = (await t.claim("w", 30)) as Lease;
      expect(stats().rides, "a publish or a claim waited").toBe(0);
      const before = stats().batches;
      const acked = t.ack(lease);
      await new Promise((r) => setTimeout(r, 10));
      await t.publish("g2", 2);
      await acked;
      expect(stats().batches - before, "the ack and the publish in one batch").toBe(1);
      expect(stats()).toMatchObject({ rides: 1, ridesInVain: 0 });
      expect(await t.stats()).toMatchObject({ ready: 1, inFlight: 0 });
      // A list settled at once (a consumer stopping) is awaited: it leaves at once.
      const leases = [(await t.claim("w", 30)) as Lease];
      await t.publish("g3", 3);
      leases.push((await t.claim("w", 30)) as Lease);
      const rides = stats().rides;
      const outcomes = await t.settle(leases.map((l) => ({ lease: l, action: "ack" as const })));
      expect(outcomes.map((o) => o.error)).toEqual([undefined, undefined]);
      expect(stats().rides, "the settled list waited for a ride").toBe(rides);
    } finally {
      t.close();
    }
  });
});
