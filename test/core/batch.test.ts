/** claimMany and publishMany: the batch forms of claim and publish, against a local file and a real sqld. */
import { describe, expect, it } from "vitest";
import { clientOf } from "../../src/core/internals.js";
import { type Lease, type LibsqlTransport, MAX_PUBLISH_BATCH, QueueError } from "../../src/index.js";
import { checkInvariants, targets } from "../support/db.js";

const VIS = 60;
const summary = (ls: Lease[]) => ls.map((l) => `${l.groupId}#${l.seq}:${JSON.stringify(l.event)}`);

async function count(t: LibsqlTransport): Promise<number> {
  return Number((await clientOf(t).execute("SELECT count(*) AS n FROM messages")).rows[0]?.n);
}

/**
 * A queue with every kind of state a claim has to order or skip: groups claimed before (in a known
 * round-robin order), never-claimed groups made later (their tie broken by seq), a group with a live
 * lease, a parked group, and groups above a priority floor.
 */
async function mixedQueue(t: LibsqlTransport): Promise<void> {
  for (const g of ["c", "a", "d", "b"]) {
    await t.publishMany([0, 1, 2].map((i) => ({ groupId: g, event: { g, i } })));
  }
  for (let k = 0; k < 3; k++) {
    const l = await t.claim("setup", VIS);
    if (!l) throw new Error("setup: nothing to claim");
    await t.ack(l);
  }
  // Now c, a, d have been claimed once (in that order) and b never: b first, then c, a, d.
  await t.publish("e", { g: "e", i: 0 });
  await t.publish("f", { g: "f", i: 0 });
  await t.publishMany([
    { groupId: "hi1", event: { g: "hi1" }, priority: 3 },
    { groupId: "hi2", event: { g: "hi2" }, priority: 4 },
  ]);
  await t.publishMany([
    { groupId: "held", event: { g: "held", i: 0 } },
    { groupId: "held", event: { g: "held", i: 1 } },
  ]);
  await t.publish("parked", { g: "parked" });
  // Lease "held" and park "parked": both must be skipped by every later claim.
  for (let k = 0; k < 10; k++) {
    const l = await t.claim("setup", VIS);
    if (!l) throw new Error("setup: nothing to claim");
    if (l.groupId === "parked") await t.nack(l, 3600);
    else if (l.groupId === "held") {
      // keep it
    } else await t.nack(l, 0);
  }
}

describe.each(targets)("batch operations ($name)", (target) => {
  it("claimMany gives leases in distinct groups, and no more than there are free groups", async () => {
    const t = await target.open();
    try {
      const msgs = Array.from({ length: 40 }, (_, i) => ({ groupId: `g${i % 5}`, event: { i } }));
      await t.publishMany(msgs);
      const leases = await t.claimMany("w1", VIS, 8);
      expect(leases).toHaveLength(5);
      expect(new Set(leases.map((l) => l.groupId)).size).toBe(5);
      // Each is the head of its group, leased to the caller, with its own id.
      for (const l of leases) {
        expect(l.workerId).toBe("w1");
        expect(l.attempts).toBe(1);
        expect(l.seq).toBe(Number(l.groupId.slice(1)) + 1);
        expect(l.event).toEqual({ i: l.seq - 1 });
      }
      expect(new Set(leases.map((l) => l.id)).size).toBe(5);
      // Every group is busy now: nothing more until an ack.
      expect(await t.claimMany("w2", VIS, 3)).toEqual([]);
      expect(await t.claim("w2", VIS)).toBeNull();
      await t.ack(leases[0] as Lease);
      const next = await t.claimMany("w2", VIS, 3);
      expect(next.map((l) => l.groupId)).toEqual([leases[0]?.groupId]);
      expect(next[0]?.seq).toBe((leases[0]?.seq as number) + 5);
      await checkInvariants(clientOf(t));
    } finally {
      t.close();
    }
  });

  it("claimMany(n) returns what n single claims would, in the same order", async () => {
    const runs: string[][] = [];
    for (const mode of ["many", "single"] as const) {
      const t = await target.open();
      try {
        await mixedQueue(t);
        const got: Lease[] = [];
        if (mode === "many") {
          got.push(...(await t.claimMany("w", VIS, 3, 3)));
          got.push(...(await t.claimMany("w", VIS, 8)));
        } else {
          for (let i = 0; i < 3; i++) {
            const l = await t.claim("w", VIS, 3);
            if (l) got.push(l);
          }
          for (let i = 0; i < 8; i++) {
            const l = await t.claim("w", VIS);
            if (l) got.push(l);
          }
        }
        runs.push(summary(got));
        expect(got.some((l) => l.groupId === "held" || l.groupId === "parked")).toBe(false);
        await checkInvariants(clientOf(t));
      } finally {
        t.close();
      }
    }
    expect(runs[0]).toEqual(runs[1]);
    // Priority floor first (hi1, hi2), then round-robin: never-claimed b, e, f by seq, then c, a, d as served.
    expect(runs[0]?.map((s) => s.split("#")[0])).toEqual(["hi1", "hi2", "b", "e", "f", "c", "a", "d"]);
  });

  it("concurrent claimMany calls never share a group, and each message goes out once", async () => {
    const t = await target.open();
    try {
      const msgs = Array.from({ length: 300 }, (_, i) => ({ groupId: `g${i % 30}`, event: { i } }));
      await t.publishMany(msgs);
      const seen = new Set<number>();
      let rounds = 0;
      while (seen.size < 300 && rounds++ < 200) {
        // Four callers in the same tick: the committer may put them in one batch.
        const results = await Promise.all([1, 2, 3, 4].map((w) => t.claimMany(`w${w}`, VIS, 10)));
        const all = results.flat();
        const groups = all.map((l) => l.groupId);
        expect(new Set(groups).size, "a group leased twice at once").toBe(groups.length);
        for (const l of all) {
          expect(seen.has(l.seq), `seq ${l.seq} delivered twice`).toBe(false);
          seen.add(l.seq);
        }
        await checkInvariants(clientOf(t));
        await Promise.all(all.map((l) => t.ack(l)));
      }
      expect(seen.size).toBe(300);
      expect(await count(t)).toBe(0);
    } finally {
      t.close();
    }
  });

  it("claimMany delivers a group's messages in FIFO order", async () => {
    const t = await target.open();
    try {
      const msgs = Array.from({ length: 60 }, (_, i) => ({ groupId: `g${i % 3}`, event: { i } }));
      const seqs = await t.publishMany(msgs);
      const perGroup = new Map<string, number[]>();
      for (let round = 0; round < 30; round++) {
        const ls = await t.claimMany("w", VIS, 5);
        if (ls.length === 0) break;
        for (const l of ls) perGroup.set(l.groupId, [...(perGroup.get(l.groupId) ?? []), l.seq]);
        await Promise.all(ls.map((l) => t.ack(l)));
      }
      for (let g = 0; g < 3; g++) {
        expect(perGroup.get(`g${g}`)).toEqual(seqs.filter((_, i) => i % 3 === g));
      }
    } finally {
      t.close();
    }
  });

  it("publishMany returns the seqs in order, one per message, and stores each message where it belongs", async () => {
    const t = await target.open();
    try {
      const first = await t.publish("g0", { i: -1 });
      const msgs = Array.from({ length: 50 }, (_, i) => ({
        groupId: `g${i % 4}`,
        event: { i },
        priority: i % 4 === 3 ? 2 : 0,
      }));
      const seqs = await t.publishMany(msgs);
      expect(seqs).toHaveLength(50);
      for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBe((seqs[i - 1] as number) + 1);
      expect(seqs[0]).toBeGreaterThan(first);
      const rows = (await clientOf(t).execute("SELECT seq, group_id, event FROM messages ORDER BY seq")).rows;
      const bySeq = new Map(rows.map((r) => [Number(r.seq), r]));
      msgs.forEach((m, i) => {
        const r = bySeq.get(seqs[i] as number);
        expect(r?.group_id).toBe(m.groupId);
        expect(JSON.parse(String(r?.event))).toEqual(m.event);
      });
      // The first publish of a group set its priority; g3's messages were published with 2.
      const pr = (await clientOf(t).execute("SELECT group_id, priority FROM groups ORDER BY group_id")).rows;
      expect(pr.map((r) => [r.group_id, Number(r.priority)])).toEqual([
        ["g0", 0],
        ["g1", 0],
        ["g2", 0],
        ["g3", 2],
      ]);
      // A second batch follows the first.
      const more = await t.publishMany([
        { groupId: "g9", event: 1 },
        { groupId: "g9", event: 2 },
      ]);
      expect(more[0]).toBe((seqs[49] as number) + 1);
      await checkInvariants(clientOf(t));
    } finally {
      t.close();
    }
  });

  it("publishMany is all or nothing: one invalid message and none is published", async () => {
    const t = await target.open();
    try {
      await t.publish("g0", { keep: true });
      const bad = [
        { groupId: "g1", event: { ok: 1 } },
        { groupId: "g2", event: { ok: 2 } },
        { groupId: "", event: { bad: true } },
      ];
      const err = await t.publishMany(bad).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(QueueError);
      expect((err as QueueError).code).toBe("INVALID_ARGUMENT");
      expect((err as QueueError).field).toBe("messages[2].groupId");
      const badEvent = [
        { groupId: "g1", event: { ok: 1 } },
        { groupId: "g2", event: { f: () => 1 } },
      ];
      const err2 = await t.publishMany(badEvent as never).catch((e: unknown) => e);
      expect((err2 as QueueError).code).toBe("INVALID_ARGUMENT");
      expect((err2 as QueueError).field).toMatch(/^messages\[1\]\.event/);
      const badPriority = [
        { groupId: "g1", event: 1 },
        { groupId: "g2", event: 2, priority: 99 },
      ];
      expect(((await t.publishMany(badPriority).catch((e: unknown) => e)) as QueueError).field).toBe(
        "messages[1].priority",
      );
      const tooMany = Array.from({ length: MAX_PUBLISH_BATCH + 1 }, (_, i) => ({ groupId: "g1", event: i }));
      expect(((await t.publishMany(tooMany).catch((e: unknown) => e)) as QueueError).code).toBe("INVALID_ARGUMENT");
      // Nothing of any refused batch reached the database.
      expect(await count(t)).toBe(1);
      const groups = (await clientOf(t).execute("SELECT group_id FROM groups")).rows.map((r) => r.group_id);
      expect(groups).toEqual(["g0"]);
      await checkInvariants(clientOf(t));
    } finally {
      t.close();
    }
  });

  it("publishMany and claimMany in the same tick each get their own answer", async () => {
    const t = await target.open();
    try {
      await t.publishMany([
        { groupId: "a", event: 1 },
        { groupId: "b", event: 2 },
      ]);
      const [pub, claimed, pub2] = await Promise.all([
        t.publishMany([{ groupId: "c", event: 3 }]),
        t.claimMany("w", VIS, 2),
        t.publishMany([
          { groupId: "d", event: 4 },
          { groupId: "d", event: 5 },
        ]),
      ]);
      expect(pub).toHaveLength(1);
      expect(pub2).toHaveLength(2);
      expect((pub2[1] as number) - (pub2[0] as number)).toBe(1);
      expect(claimed.length).toBeGreaterThanOrEqual(2);
      expect(new Set(claimed.map((l) => l.groupId)).size).toBe(claimed.length);
      await checkInvariants(clientOf(t));
    } finally {
      t.close();
    }
  });
});
