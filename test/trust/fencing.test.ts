/**
 * Fencing, heartbeats, attempts and dead letters: what a stale or slow worker can and cannot do.
 * Leases are made to lapse by giving them a visibility of a few hundred ms and waiting it out.
 */
import { afterEach, describe, expect, it } from "vitest";
import { clientOf } from "../../src/core/internals.js";
import type { Lease, LibsqlTransport } from "../../src/index.js";
import { checkInvariants, targets } from "../support/db.js";
import { expectQueueError, sleep, tableCounts } from "../support/trust.js";

const VIS = 0.3; // seconds
const LAPSE_MS = 450; // > VIS, with margin for a slow CI box

describe.each(targets)("fencing on $name", (target) => {
  let t: LibsqlTransport | undefined;
  afterEach(async () => {
    if (t) {
      await checkInvariants(clientOf(t));
      t.close();
      t = undefined;
    }
  });

  it("a stale worker whose lease lapsed and was re-claimed cannot ack, nack or extend (LEASE_LOST)", async () => {
    t = await target.open();
    const seq = await t.publish("g", { n: 1 });
    await t.publish("g", { n: 2 });
    const stale = (await t.claim("slow-worker", VIS)) as Lease;
    expect(stale.seq).toBe(seq);
    expect(stale.attempts).toBe(1);
    await sleep(LAPSE_MS);
    const fresh = (await t.claim("fast-worker", 30)) as Lease;
    expect(fresh.seq).toBe(seq); // the same message, delivered again
    expect(fresh.attempts).toBe(2);

    const lost = await expectQueueError(t.ack(stale), "LEASE_LOST", "lease");
    expect(lost.message).toMatch(/no longer leased/);
    await expectQueueError(t.nack(stale), "LEASE_LOST", "lease");
    await expectQueueError(t.nack(stale, 60), "LEASE_LOST", "lease");
    await expectQueueError(t.extend(stale, 60), "LEASE_LOST", "lease");
    // A forged token for the same message is refused as well.
    await expectQueueError(t.ack(`${seq}.${"0".repeat(32)}`), "LEASE_LOST", "lease");

    // The fresh holder's lease is untouched: still live, still its own, the group still blocked.
    const s = await t.stats();
    expect(s.inFlight).toBe(1);
    expect(await t.claim("third", 30)).toBeNull();
    const row = (
      await clientOf(t).execute({ sql: "SELECT locked_by, lock_expiry FROM messages WHERE seq = ?", args: [seq] })
    ).rows[0];
    expect(row?.locked_by).toBe("fast-worker");
    expect(Number(row?.lock_expiry)).toBeCloseTo(fresh.expiresAt, 3);
    await t.ack(fresh);
    // Once the message is gone, the stale lease reports that instead.
    await expectQueueError(t.ack(stale), "LEASE_NOT_FOUND", "lease");
    const next = (await t.claim("fast-worker", 30)) as Lease<{ n: number }>;
    expect(next.event).toEqual({ n: 2 });
    await t.ack(next);
    expect(await tableCounts(clientOf(t))).toMatchObject({ messages: 0, groups: 0, leased: 0 });
  });

  it("a lease that lapsed but was not re-claimed can still ack, nack and extend", async () => {
    t = await target.open();
    await t.publish("a", "a1");
    await t.publish("b", "b1");
    await t.publish("c", "c1");
    const la = (await t.claim("w", VIS)) as Lease;
    const lb = (await t.claim("w", VIS)) as Lease;
    const lc = (await t.claim("w", VIS)) as Lease;
    expect([la.groupId, lb.groupId, lc.groupId]).toEqual(["a", "b", "c"]);
    await sleep(LAPSE_MS);
    expect((await t.stats()).inFlight).toBe(0);

    await t.ack(la);
    expect(await t.nack(lb)).toEqual({ deadLettered: false });
    const revived = await t.extend(lc, 30);
    expect(revived.expiresAt).toBeGreaterThan(lc.expiresAt + 20);
    // The extended lease is live again: its group is refused to others; b is free again.
    const other = (await t.claim("w2", 30)) as Lease;
    expect(other.groupId).toBe("b");
    expect(other.attempts).toBe(2);
    expect(await t.claim("w2", 30)).toBeNull();
    await t.ack(other);
    await t.ack(revived);
    expect(await tableCounts(clientOf(t))).toMatchObject({ messages: 0, groups: 0, leased: 0 });
  });

  it("extend keeps a lease alive past its original expiry while another claimer is refused the group", async () => {
    t = await target.open();
    await t.publish("job", 1);
    await t.publish("job", 2);
    let lease = (await t.claim("holder", 0.4)) as Lease<number>;
    const originalExpiry = lease.expiresAt;
    const until = Date.now() + 1300; // three times the original visibility
    while (Date.now() < until) {
      await sleep(150);
      lease = await t.extend(lease, 0.4);
      expect(await t.claim("rival", 30), "a rival got the group of a lease kept alive by extend").toBeNull();
    }
    const now = (await t.stats()).now;
    expect(now).toBeGreaterThan(originalExpiry);
    expect(lease.expiresAt).toBeGreaterThan(now);
    expect(lease.attempts).toBe(1);
    await t.ack(lease); // still ours: no LEASE_LOST
    const next = (await t.claim("rival", 30)) as Lease<number>;
    expect(next.event).toBe(2);
    expect(next.attempts).toBe(1);
    await t.ack(next);
  });

  it("a released or parked lease is fenced too", async () => {
    t = await target.open();
    await t.publish("p", 1);
    const l1 = (await t.claim("w", 30)) as Lease;
    await t.nack(l1, 60); // parked for a minute
    await expectQueueError(t.ack(l1), "LEASE_LOST");
    await expectQueueError(t.extend(l1, 10), "LEASE_LOST");
    expect(await t.claim("w", 30)).toBeNull(); // parked blocks its group
    expect((await t.stats()).parked).toBe(1);
    await clientOf(t).execute("UPDATE messages SET lock_expiry = unixepoch('subsec') - 1"); // end the park
    const l2 = (await t.claim("w", 30)) as Lease;
    expect(l2.attempts).toBe(2);
    await t.nack(l2); // freed at once
    await expectQueueError(t.nack(l2), "LEASE_LOST");
    const l3 = (await t.claim("w", 30)) as Lease;
    expect(l3.attempts).toBe(3);
    await t.ack(l3);
  });

  it("counts attempts and dead-letters after maxAttempts nacks; the group moves on; redrive puts it back", async () => {
    t = await target.open(); // default maxAttempts: 5
    const poison = await t.publish("orders", { poison: true }, 2);
    await t.publish("orders", { ok: 1 });
    for (let i = 1; i <= 4; i++) {
      const l = (await t.claim("w", 30)) as Lease;
      expect(l.seq).toBe(poison);
      expect(l.attempts).toBe(i);
      expect(await t.nack(l)).toEqual({ deadLettered: false });
    }
    const last = (await t.claim("w", 30)) as Lease;
    expect(last.attempts).toBe(5);
    expect(await t.nack(last)).toEqual({ deadLettered: true });
    await expectQueueError(t.ack(last), "LEASE_NOT_FOUND");

    const dead = await t.deadLetters();
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({
      seq: poison,
      groupId: "orders",
      event: { poison: true },
      priority: 2,
      attempts: 5,
      reason: "max_attempts",
    });
    expect((await t.stats()).deadLetters).toBe(1);
    await checkInvariants(clientOf(t));

    // The group moves on to its next message.
    const next = (await t.claim("w", 30)) as Lease;
    expect(next.event).toEqual({ ok: 1 });
    await t.ack(next);
    expect(await tableCounts(clientOf(t))).toMatchObject({ messages: 0, groups: 0, dead_letters: 1 });

    // Redrive: back at the tail of its group, with its priority and a fresh attempt count.
    const again = await t.redrive(poison);
    expect(again).toBeGreaterThan(poison);
    expect(await t.deadLetters()).toEqual([]);
    await expectQueueError(t.redrive(poison), "DEAD_LETTER_NOT_FOUND", "seq");
    const back = (await t.claim("w", 30, 2)) as Lease;
    expect(back).toMatchObject({ seq: again, groupId: "orders", event: { poison: true }, attempts: 1 });
    await t.ack(back);
    expect(await tableCounts(clientOf(t))).toMatchObject({ messages: 0, groups: 0, dead_letters: 0, leased: 0 });
  });

  it("dead-letters a message whose leases keep lapsing, and a stale holder then gets LEASE_NOT_FOUND", async () => {
    t = await target.open({ maxAttempts: 2 });
    const seq = await t.publish("crashy", "boom");
    await t.publish("crashy", "fine");
    await t.publish("other", "x");
    const first = (await t.claim("w1", VIS)) as Lease;
    expect(first).toMatchObject({ seq, attempts: 1 });
    await sleep(LAPSE_MS);
    // Round-robin serves the never-claimed group first, then the lapsed one again.
    const o = (await t.claim("w2", 30)) as Lease;
    expect(o.groupId).toBe("other");
    await t.ack(o);
    const second = (await t.claim("w2", VIS)) as Lease;
    expect(second).toMatchObject({ seq, attempts: 2 });
    await sleep(LAPSE_MS);
    // The third delivery would exceed maxAttempts: the claim dead-letters it and hands out the next one.
    const third = (await t.claim("w3", 30)) as Lease<string>;
    expect(third.event).toBe("fine");
    expect(third.attempts).toBe(1);
    const dead = await t.deadLetters({ groupId: "crashy" });
    expect(dead).toMatchObject([{ seq, event: "boom", attempts: 2, reason: "max_attempts" }]);
    await expectQueueError(t.ack(first), "LEASE_NOT_FOUND");
    await expectQueueError(t.ack(second), "LEASE_NOT_FOUND");
    await expectQueueError(t.extend(second, 10), "LEASE_NOT_FOUND");
    await checkInvariants(clientOf(t));
    await t.ack(third);
    expect(await t.claim("w3", 30)).toBeNull();
    // deleteDeadLetter drops it for good.
    expect(await t.deleteDeadLetter(seq)).toBe(true);
    expect(await t.deleteDeadLetter(seq)).toBe(false);
    expect(await tableCounts(clientOf(t))).toMatchObject({ messages: 0, groups: 0, dead_letters: 0, leased: 0 });
  });

  it("claimMany skips past several poison messages in one call", async () => {
    t = await target.open({ maxAttempts: 1 });
    for (const g of ["a", "b", "c"]) await t.publish(g, `${g}-poison`);
    for (const g of ["a", "b", "c"]) await t.publish(g, `${g}-ok`);
    const leases = await t.claimMany("w", VIS, 3);
    expect(leases.map((l) => l.event)).toEqual(["a-poison", "b-poison", "c-poison"]);
    await sleep(LAPSE_MS);
    const next = await t.claimMany<string>("w", 30, 3);
    expect(next.map((l) => l.event).sort()).toEqual(["a-ok", "b-ok", "c-ok"]);
    expect((await t.deadLetters()).map((d) => d.event)).toEqual(["a-poison", "b-poison", "c-poison"]);
    for (const l of next) await t.ack(l);
  });
});
