/**
 * Faults, each against real sqld processes this file starts (never the shared one): a SIGKILL in the
 * middle of a run, a loopback proxy that cuts, drops and delays, 64 concurrent writers, and JWT auth.
 * Every run is bounded in time and count and stops by itself.
 */
import { generateKeyPairSync, type KeyObject, sign } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startProxy, type Proxy as TcpProxy } from "../../scripts/support/proxy.js";
import { type Sqld, startSqld } from "../../scripts/support/sqld.js";
import { clientOf, writeStatsOf } from "../../src/core/internals.js";
import { type Lease, LibsqlTransport, QueueError } from "../../src/index.js";
import { checkInvariants, resetDatabase } from "../support/db.js";
import { envInt, expectQueueError, report, sleep, tableCounts } from "../support/trust.js";

// ---------------------------------------------------------------------------------------------
// SIGKILL during a run

describe("sqld killed with SIGKILL during a run, restarted on the same data", () => {
  const MESSAGES = envInt("TRUST_CRASH_MESSAGES", 600);
  const GROUPS = 20;
  const PUBLISHERS = 4;
  const CLAIMERS = 8;
  const KILLS = 2;
  // About 25-50 messages/s get through on a 2-core box with the kills; scale the budget with the size.
  const BUDGET_MS = Math.max(100_000, MESSAGES * 100);
  let dir: string;
  let sqld: Sqld | undefined;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "turso-queue-crash-"));
  });
  afterAll(async () => {
    await sqld?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it(
    "keeps every acked message gone, delivers every unacked one again, acks nothing twice",
    async () => {
      const dataDir = join(dir, "data.sqld");
      sqld = await startSqld({ dataDir });
      const { port, url } = sqld;
      // Budgets long enough to ride out a restart: calls retry through it instead of failing. A kill
      // resets connections, so the outage shows at once; the request timeout stays at its default
      // because abandoning requests under load can wedge sqld (see test/trust/repro/sqld-stall.ts).
      const opts = { requestTimeoutMs: 10_000, timeoutMs: 30_000, maxAttempts: Number.POSITIVE_INFINITY };
      // Two transports ("processes"): publishers share one, claimers the other. More write batches in
      // flight at once can wedge sqld 0.24's writes under sustained load (docs/guarantees.md, "Open").
      const pubT = await LibsqlTransport.create(url, opts);
      const subT = await LibsqlTransport.create(url, opts);
      const pubs = Array.from({ length: PUBLISHERS }, () => pubT);
      const subs = Array.from({ length: CLAIMERS }, () => subT);

      const published = new Map<number, string>(); // seq -> payload id, as publish answered
      const publishUnknown = new Set<string>(); // publishes that threw: stored once or not at all
      const acked = new Map<number, { lease: string; payload: string }>(); // seq -> the one ack that succeeded
      const ackedLeases = new Set<string>();
      const claimsOf = new Map<number, number>(); // seq -> deliveries seen
      const ackUnknown = new Set<number>();
      const violations: string[] = [];
      const errors: Record<string, number> = {};
      const countError = (e: unknown) => {
        const code = e instanceof QueueError ? e.code : String(e);
        errors[code] = (errors[code] ?? 0) + 1;
      };
      const abandoned = new Set<number>();
      const abandoner = await LibsqlTransport.create(url, opts);
      let publishersDone = false;
      let drained = false;
      const started = Date.now();
      const hardDeadline = started + BUDGET_MS;

      const publisher = async (t: LibsqlTransport, p: number) => {
        for (let i = p; i < MESSAGES; i += PUBLISHERS) {
          const payload = `m${i}`;
          try {
            const seq = await t.publish(`g${i % GROUPS}`, { payload });
            if (published.has(seq)) violations.push(`seq ${seq} returned to two publishes`);
            published.set(seq, payload);
          } catch (e) {
            countError(e);
            publishUnknown.add(payload);
          }
        }
      };
      const claimer = async (t: LibsqlTransport, c: number) => {
        while (!drained && Date.now() < hardDeadline) {
          let lease: Lease<{ payload: string }> | null;
          try {
            lease = await t.claim<{ payload: string }>(`w${c}`, 1.5);
          } catch (e) {
            countError(e);
            continue;
          }
          if (!lease) {
            await sleep(50);
            continue;
          }
          claimsOf.set(lease.seq, (claimsOf.get(lease.seq) ?? 0) + 1);
          if (acked.has(lease.seq)) violations.push(`seq ${lease.seq} delivered again after its ack succeeded`);
          await sleep(Math.random() * 30); // "work", so that kills find leases in flight
          try {
            await t.ack(lease);
            if (ackedLeases.has(lease.id)) violations.push(`lease ${lease.id} acked twice`);
            ackedLeases.add(lease.id);
            const prev = acked.get(lease.seq);
            if (prev) violations.push(`seq ${lease.seq} acked by two leases (${prev.lease}, ${lease.id})`);
            acked.set(lease.seq, { lease: lease.id, payload: lease.event.payload });
          } catch (e) {
            countError(e);
            if (e instanceof QueueError && e.outcomeUnknown) ackUnknown.add(lease.seq);
          }
        }
      };
      const killer = async () => {
        const downtimes: number[] = [];
        for (let k = 1; k <= KILLS; k++) {
          while (published.size < (MESSAGES * k) / (KILLS + 1) && Date.now() < hardDeadline) await sleep(5);
          // Workers that die with the server: they claim and never ack. Their messages must come back.
          try {
            const dying = await abandoner.claimMany<{ payload: string }>("dying-worker", 1.5, 3);
            for (const l of dying) {
              abandoned.add(l.seq);
              claimsOf.set(l.seq, (claimsOf.get(l.seq) ?? 0) + 1);
            }
          } catch (e) {
            countError(e);
          }
          await (sqld as Sqld).kill();
          const down = Date.now();
          await sleep(300);
          sqld = await startSqld({ dataDir, port });
          downtimes.push(Date.now() - down);
          killsDone++;
        }
        return downtimes;
      };
      const drainWatch = async () => {
        const direct = await LibsqlTransport.create(url, opts);
        try {
          while (Date.now() < hardDeadline) {
            await sleep(100);
            if (!publishersDone || killing) continue;
            const s = await direct.stats().catch(() => undefined);
            lastStats = JSON.stringify(s);
            if (s && s.ready + s.inFlight + s.parked === 0) break;
          }
        } finally {
          drained = true;
          direct.close();
        }
      };

      let lastStats = "";
      let killsDone = 0;
      const progress = setInterval(() => {
        const line = `published ${published.size} acked ${acked.size} claims ${[...claimsOf.values()].reduce((a, b) => a + b, 0)} errors ${JSON.stringify(errors)} killing ${killing} ${lastStats}`;
        if (process.env.TRUST_VERBOSE) {
          const t0 = Date.now();
          void fetch(`${url}/v2/pipeline`, {
            method: "POST",
            body: JSON.stringify({ requests: [{ type: "execute", stmt: { sql: "SELECT count(*) FROM messages" } }] }),
            signal: AbortSignal.timeout(1500),
          })
            .then((r) => r.text())
            .then((b) =>
              console.log(
                `[crash +${Date.now() - started} ms] ${line} probe ${Date.now() - t0}ms ${b.slice(0, 200)} pid ${sqld?.process.pid} kills ${killsDone}`,
              ),
            )
            .catch((e) =>
              console.log(
                `[crash +${Date.now() - started} ms] ${line} probe failed ${e} pid ${sqld?.process.pid} kills ${killsDone}`,
              ),
            );
        }
      }, 2000);
      let killing = true;
      const killerRun = killer().finally(() => {
        killing = false;
      });
      const pubRun = Promise.all(pubs.map(publisher)).finally(() => {
        publishersDone = true;
      });
      await Promise.all([pubRun, killerRun, drainWatch(), ...subs.map(claimer)]);
      const downtimes = await killerRun;
      clearInterval(progress);
      const elapsed = Date.now() - started;
      for (const t of [...pubs, ...subs, abandoner]) t.close();

      expect(Date.now(), "the run hit its hard deadline").toBeLessThan(hardDeadline);
      expect(violations).toEqual([]);
      // Every message whose publish answered was delivered and acked (or its ack's outcome is unknown).
      const missing = [...published.keys()].filter((s) => !acked.has(s) && !ackUnknown.has(s));
      expect(missing, "published messages never acked").toEqual([]);
      // Nothing acked that was not published, and no payload stored twice.
      const payloads = new Map<string, number>();
      for (const { payload } of acked.values()) payloads.set(payload, (payloads.get(payload) ?? 0) + 1);
      expect(
        [...payloads].filter(([, n]) => n > 1),
        "payloads stored twice",
      ).toEqual([]);
      for (const [seq, a] of acked) {
        const expected = published.get(seq);
        if (expected !== undefined) expect(a.payload).toBe(expected);
        else expect(publishUnknown.has(a.payload), `seq ${seq} (${a.payload}) was never published`).toBe(true);
      }
      const direct = await LibsqlTransport.create(url, opts);
      expect(await tableCounts(clientOf(direct))).toMatchObject({ messages: 0, groups: 0, leased: 0 });
      await checkInvariants(clientOf(direct));
      direct.close();

      const redelivered = [...claimsOf.values()].filter((n) => n > 1).length;
      report("crash", {
        messages: MESSAGES,
        published: published.size,
        publishOutcomeUnknown: publishUnknown.size,
        acked: acked.size,
        ackOutcomeUnknown: ackUnknown.size,
        redelivered,
        abandonedAtKill: abandoned.size,
        kills: KILLS,
        downtimeMs: downtimes,
        callerErrors: errors,
        elapsedMs: elapsed,
      });
      // The leases of the workers that died with the server were delivered again and acked by others.
      expect(abandoned.size).toBeGreaterThan(0);
      for (const seq of abandoned) {
        expect(claimsOf.get(seq) ?? 0, `abandoned seq ${seq} was not delivered again`).toBeGreaterThanOrEqual(2);
        expect(acked.has(seq) || ackUnknown.has(seq), `abandoned seq ${seq} never acked`).toBe(true);
      }
    },
    BUDGET_MS + 40_000,
  );
});

// ---------------------------------------------------------------------------------------------
// A proxy that cuts, drops and delays

describe("through a loopback proxy that cuts, drops and delays", () => {
  let sqld: Sqld;
  let proxy: TcpProxy;
  let direct: LibsqlTransport;
  const open: LibsqlTransport[] = [];
  const viaProxy = async (o: Record<string, number> = {}) => {
    const t = await LibsqlTransport.create(proxy.url, { requestTimeoutMs: 400, timeoutMs: 2500, ...o });
    open.push(t);
    return t;
  };
  const count = async () => (await tableCounts(clientOf(direct))).messages;

  beforeAll(async () => {
    sqld = await startSqld();
    proxy = await startProxy(sqld.port);
    direct = await LibsqlTransport.create(sqld.url);
  });
  afterEach(async () => {
    proxy.clear();
    for (const k of ["cut", "drop", "hang", "delay"] as const) proxy.stats[k] = 0;
    proxy.latencyMs = 0;
    proxy.refuse = false;
    await checkInvariants(clientOf(direct));
    for (const t of open.splice(0)) t.close();
    await resetDatabase(clientOf(direct));
  });
  afterAll(async () => {
    direct?.close();
    await proxy?.close();
    await sqld?.stop();
  });

  it("a publish whose answer was lost is retried with its automatic key and stored once", async () => {
    const t = await viaProxy();
    proxy.inject({ kind: "drop" }, { match: "INSERT INTO messages" });
    const seq = await t.publish("g", { v: "once" });
    expect(proxy.stats.drop).toBeGreaterThanOrEqual(1);
    expect(proxy.pending()).toBe(0);
    const rows = (await clientOf(direct).execute("SELECT seq, event FROM messages")).rows;
    expect(rows.map((r) => [Number(r.seq), r.event])).toEqual([[seq, '{"v":"once"}']]);
    expect(writeStatsOf(t).retries).toBeGreaterThanOrEqual(1);
  });

  it("a keyed publishMany whose answer was lost is stored once, with the seqs it first got", async () => {
    const t = await viaProxy();
    const batch = Array.from({ length: 25 }, (_, i) => ({ groupId: `g${i % 5}`, event: { i } }));
    proxy.inject({ kind: "drop" }, { match: "INSERT INTO messages", times: 2 });
    const seqs = await t.publishMany(batch, { idempotencyKey: "order-42" });
    expect(proxy.stats.drop).toBe(2);
    const rows = (await clientOf(direct).execute("SELECT seq, event FROM messages ORDER BY seq")).rows;
    expect(rows.map((r) => Number(r.seq))).toEqual(seqs);
    expect(rows.map((r) => JSON.parse(String(r.event)).i)).toEqual(batch.map((b) => b.event.i));
    // The caller retrying by hand with the same key gets the same answer and stores nothing.
    expect(await t.publishMany(batch, { idempotencyKey: "order-42" })).toEqual(seqs);
    expect(await count()).toBe(25);
    // The same key for a different request is refused.
    await expectQueueError(t.publish("g0", { other: true }, 0, { idempotencyKey: "order-42" }), "IDEMPOTENCY_CONFLICT");
    expect(await count()).toBe(25);
  });

  it("a publish cut mid-request, on every try, fails with a typed error and stores nothing", async () => {
    const t = await viaProxy({ timeoutMs: 1200 });
    proxy.inject({ kind: "cut" }, { match: "INSERT INTO messages", times: 1000 });
    const batch = Array.from({ length: 50 }, (_, i) => ({ groupId: "g", event: i }));
    const t0 = Date.now();
    const err = await expectQueueError(t.publishMany(batch), "TIMEOUT");
    expect(Date.now() - t0).toBeLessThan(1200 + 400 + 700);
    expect(err.message).toMatch(/gave up after 1200 ms/);
    expect(proxy.stats.cut).toBeGreaterThanOrEqual(2);
    expect(await count()).toBe(0);
  });

  it("a publish whose every answer is lost: a typed error, and the batch is applied whole, exactly once", async () => {
    const t = await viaProxy({ timeoutMs: 1200 });
    proxy.inject({ kind: "drop" }, { match: "INSERT INTO messages", times: 1000 });
    const batch = Array.from({ length: 50 }, (_, i) => ({ groupId: `g${i % 7}`, event: i }));
    const err = await expectQueueError(t.publishMany(batch, { idempotencyKey: "k" }), "TIMEOUT");
    expect(err.outcomeUnknown).toBe(true);
    expect(proxy.stats.drop).toBeGreaterThanOrEqual(2);
    expect(await count()).toBe(50); // never half, never twice
    proxy.clear();
    // Asking again with the key tells the caller what happened.
    const seqs = await t.publishMany(batch, { idempotencyKey: "k" });
    expect(seqs).toHaveLength(50);
    expect(await count()).toBe(50);
  });

  it("writes coalesced into one cut batch all fail or all succeed together, none half-applied", async () => {
    const t = await viaProxy({ timeoutMs: 1500 });
    for (let i = 0; i < 5; i++) await direct.publish(`c${i}`, i);
    const leases = await direct.claimMany("w", 30, 5);
    // Cut the first batch that carries both a publish and an ack, and keep cutting for the run.
    proxy.inject(
      { kind: "cut" },
      { match: (r) => r.includes("INSERT INTO messages") && r.includes("DELETE FROM messages"), times: 1000 },
    );
    const results = await Promise.allSettled([
      ...leases.map((l) => t.ack(l.id)),
      ...Array.from({ length: 5 }, (_, i) => t.publish(`p${i}`, i)),
    ]);
    // Either the batch never got through (everything failed, typed) or it went through whole.
    const failed = results.filter((r) => r.status === "rejected");
    for (const f of failed) expect((f as PromiseRejectedResult).reason).toBeInstanceOf(QueueError);
    const c = await tableCounts(clientOf(direct));
    const acks = results.slice(0, 5).filter((r) => r.status === "fulfilled").length;
    const pubs = results.slice(5).filter((r) => r.status === "fulfilled").length;
    expect(c.messages).toBe(5 - acks + pubs);
    expect(proxy.stats.cut).toBeGreaterThanOrEqual(1);
  });

  it("a claim whose answer was lost is delivered again once its lease lapses", async () => {
    const t = await viaProxy({ timeoutMs: 1000 });
    await direct.publish("g", "first");
    await direct.publish("g", "second");
    proxy.inject({ kind: "drop" }, { match: "tq_attempts = coalesce(tq_attempts, 0) + 1", times: 1000 });
    const err = await expectQueueError(t.claim("w", 3), "TIMEOUT");
    expect(err.outcomeUnknown).toBe(true);
    proxy.clear();
    // The lost claim holds the group until its visibility ends, and not longer.
    const stranded = (
      await clientOf(direct).execute(
        "SELECT seq, lock_expiry, unixepoch('subsec') AS now FROM messages WHERE locked_by IS NOT NULL",
      )
    ).rows;
    expect(stranded).toHaveLength(1);
    expect(Number(stranded[0]?.lock_expiry) - Number(stranded[0]?.now)).toBeLessThanOrEqual(3);
    expect(await t.claim("w2", 30)).toBeNull();
    await sleep(Math.max(0, (Number(stranded[0]?.lock_expiry) - Number(stranded[0]?.now)) * 1000 + 100));
    const again = (await t.claim("w2", 30)) as Lease<string>;
    expect(again.event).toBe("first");
    expect(again.attempts).toBeGreaterThanOrEqual(2);
    await t.ack(again);
  });

  it("a claim retried after one lost answer returns a clean answer and strands nothing past its visibility", async () => {
    const t = await viaProxy();
    await direct.publish("a", 1);
    await direct.publish("b", 2);
    proxy.inject({ kind: "drop" }, { match: "tq_attempts = coalesce(tq_attempts, 0) + 1" });
    // The library resends the same batch; it must not lease a second message under the same token.
    const got = await t.claimMany("w", 0.5, 1);
    expect(got.length).toBeLessThanOrEqual(1);
    const leased = (await clientOf(direct).execute("SELECT count(*) AS n FROM messages WHERE locked_by = 'w'")).rows[0];
    expect(Number(leased?.n)).toBe(1);
    await sleep(700);
    const all = await t.claimMany<number>("w2", 30, 2);
    // Whatever the retry answered, both messages are deliverable again once that visibility is over.
    expect(all.map((l) => l.event).sort()).toEqual([1, 2]);
    for (const l of all) await t.ack(l);
    expect(await count()).toBe(0);
  });

  it("an ack or nack whose answer was lost is retried and reports success", async () => {
    const t = await viaProxy();
    await direct.publish("g", 1);
    await direct.publish("h", 2);
    const [a, b] = await t.claimMany("w", 30, 2);
    proxy.inject({ kind: "drop" }, { match: "DELETE FROM messages WHERE seq" });
    await t.ack(a as Lease);
    proxy.inject({ kind: "drop" }, { match: "UPDATE messages" });
    expect(await t.nack(b as Lease, 0)).toEqual({ deadLettered: false });
    expect(proxy.stats.drop).toBe(2);
    expect(await count()).toBe(1);
    const again = (await t.claim("w", 30)) as Lease<number>;
    expect(again.event).toBe(2);
    await t.ack(again);
  });

  it("a server that never answers: every call ends by its timeout with TIMEOUT", async () => {
    const t = await viaProxy({ requestTimeoutMs: 300, timeoutMs: 1000 });
    await direct.publish("g", 1);
    proxy.inject({ kind: "hang" }, { times: 100_000 });
    const calls: Array<[string, () => Promise<unknown>]> = [
      ["publish", () => t.publish("g", 2)],
      ["claim", () => t.claim("w", 30)],
      ["ack", () => t.ack(`1.${"a".repeat(32)}`)],
      ["stats", () => t.stats()],
      ["deadLetters", () => t.deadLetters()],
    ];
    const times: Record<string, number> = {};
    await Promise.all(
      calls.map(async ([name, call]) => {
        const t0 = Date.now();
        const err = await expectQueueError(call(), "TIMEOUT");
        times[name] = Date.now() - t0;
        expect(err.message.length).toBeGreaterThan(10);
        // The deadline plus at most one request in flight and one backoff.
        expect(times[name]).toBeLessThan(1000 + 300 + 600);
      }),
    );
    report("hang", { timeoutMs: 1000, requestTimeoutMs: 300, elapsedMs: times });
    proxy.clear();
    expect(await count()).toBeLessThanOrEqual(2); // the publish may have landed (outcome unknown) but only once
  });

  it("slow answers within the request budget still succeed", async () => {
    const t = await viaProxy({ requestTimeoutMs: 1000, timeoutMs: 5000 });
    proxy.latencyMs = 150;
    const seq = await t.publish("g", "slow");
    proxy.inject({ kind: "delay", ms: 500 });
    const lease = (await t.claim("w", 30)) as Lease;
    expect(lease.seq).toBe(seq);
    await t.ack(lease);
    expect(await count()).toBe(0);
  });

  it("a refused connection is UNAVAILABLE with a clear message, within the call's timeout", async () => {
    const t = await viaProxy({ requestTimeoutMs: 300, timeoutMs: 800 });
    proxy.refuse = true;
    proxy.cutAll();
    const t0 = Date.now();
    const err = await t.publish("g", 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QueueError);
    expect(["UNAVAILABLE", "TIMEOUT"]).toContain((err as QueueError).code);
    expect((err as QueueError).message).toMatch(/could not be reached|gave up|timed out/);
    expect(Date.now() - t0).toBeLessThan(800 + 300 + 600);
    proxy.refuse = false;
    expect(await count()).toBeLessThanOrEqual(1);
  });
});

// ---------------------------------------------------------------------------------------------
// 64 concurrent writers

describe("64 concurrent writers against one sqld", () => {
  let sqld: Sqld;
  beforeAll(async () => {
    sqld = await startSqld();
  });
  afterAll(async () => {
    await sqld?.stop();
  });

  it(
    "no caller hangs past its timeout, no BUSY reaches a caller, nothing is lost",
    async () => {
      const OPS = envInt("TRUST_CONTENTION_OPS", 10); // publish+claim+ack rounds per writer
      const TIMEOUT = 20_000;
      const opts = { requestTimeoutMs: 15_000, timeoutMs: TIMEOUT };
      // 64 callers on two transports ("processes"), one batch in flight each (the default): what the
      // library queues and coalesces, sqld never sees. More batches in flight at once can wedge sqld
      // 0.24's writes under sustained load (docs/guarantees.md, "Open"); TRUST_CONTENTION_TRANSPORTS
      // and TRUST_CONTENTION_IN_FLIGHT raise them.
      const transports = await Promise.all(
        Array.from({ length: envInt("TRUST_CONTENTION_TRANSPORTS", 2) }, () =>
          LibsqlTransport.create(sqld.url, { ...opts, maxInFlight: envInt("TRUST_CONTENTION_IN_FLIGHT", 1) }),
        ),
      );
      const writers: Array<{ t: LibsqlTransport; id: string }> = Array.from({ length: 64 }, (_, w) => ({
        t: transports[w % transports.length] as LibsqlTransport,
        id: `t${w % transports.length}c${w}`,
      }));
      expect(writers).toHaveLength(64);

      const durations: number[] = [];
      const errors: QueueError[] = [];
      const published = new Set<number>();
      const acked = new Set<number>();
      const timed = async <T>(p: Promise<T>): Promise<T | undefined> => {
        const t0 = performance.now();
        try {
          return await p;
        } catch (e) {
          errors.push(e as QueueError);
          return undefined;
        } finally {
          durations.push(performance.now() - t0);
        }
      };
      const started = Date.now();
      await Promise.all(
        writers.map(async ({ t, id }, w) => {
          for (let i = 0; i < OPS; i++) {
            const batch = i % 5 === 0;
            if (batch) {
              const seqs = await timed(
                t.publishMany(
                  Array.from({ length: 5 }, (_, k) => ({ groupId: `g${(w + k) % 32}`, event: { w, i, k } })),
                ),
              );
              for (const s of seqs ?? []) published.add(s);
            } else {
              const seq = await timed(t.publish(`g${w % 32}`, { w, i }));
              if (seq !== undefined) published.add(seq);
            }
            const leases = await timed(t.claimMany(id, 30, 2));
            for (const l of leases ?? []) {
              const ok = await timed(t.ack(l).then(() => true));
              if (ok) acked.add(l.seq);
            }
          }
        }),
      );
      // Drain what is left, then account for everything.
      const drain = await LibsqlTransport.create(sqld.url, opts);
      const drainUntil = Date.now() + 30_000;
      for (;;) {
        // A sqld whose writes have wedged (docs/guarantees.md, "Open") shows up here as a clear failure.
        expect(Date.now(), `drain unfinished; callers so far got ${errors.length} errors`).toBeLessThan(drainUntil);
        const leases = await drain.claimMany("drain", 30, 100);
        if (leases.length === 0) break;
        for (const l of leases) {
          await drain.ack(l);
          acked.add(l.seq);
        }
      }
      const elapsed = Date.now() - started;
      durations.sort((a, b) => a - b);
      const pct = (p: number) =>
        Math.round(durations[Math.min(durations.length - 1, Math.floor(p * durations.length))] ?? 0);
      const stats = transports.reduce(
        (acc, t) => ({
          batches: acc.batches + writeStatsOf(t).batches,
          retries: acc.retries + writeStatsOf(t).retries,
          busy: acc.busy + writeStatsOf(t).busy,
        }),
        { batches: 0, retries: 0, busy: 0 },
      );
      report("contention", {
        writers: 64,
        calls: durations.length,
        published: published.size,
        acked: acked.size,
        errors: errors.map((e) => e.code),
        p50ms: pct(0.5),
        p99ms: pct(0.99),
        maxMs: pct(1),
        elapsedMs: elapsed,
        ...stats,
      });
      expect(
        errors.filter((e) => e.code === "BUSY"),
        "BUSY reached a caller",
      ).toEqual([]);
      expect(errors, "callers got errors").toEqual([]);
      expect(pct(1), "a call ran past its timeout").toBeLessThan(TIMEOUT + 1000);
      expect(
        [...published].filter((s) => !acked.has(s)),
        "messages lost",
      ).toEqual([]);
      expect(acked.size).toBe(published.size);
      expect(published.size).toBe(64 * OPS + 64 * Math.ceil(OPS / 5) * 4);
      expect(await tableCounts(clientOf(drain))).toMatchObject({ messages: 0, groups: 0, leased: 0 });
      await checkInvariants(clientOf(drain));
      for (const t of [...transports, drain]) t.close();
    },
    60_000 + envInt("TRUST_CONTENTION_OPS", 10) * 6_000,
  );
});

// ---------------------------------------------------------------------------------------------
// JWT auth

describe("sqld with JWT auth (Ed25519)", () => {
  let sqld: Sqld;
  let dir: string;
  let privateKey: KeyObject;
  const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");
  const jwt = (claims: Record<string, unknown>, key: KeyObject = privateKey) => {
    const signing = `${b64({ alg: "EdDSA", typ: "JWT" })}.${b64(claims)}`;
    return `${signing}.${sign(null, Buffer.from(signing), key).toString("base64url")}`;
  };

  beforeAll(async () => {
    const pair = generateKeyPairSync("ed25519");
    privateKey = pair.privateKey;
    dir = mkdtempSync(join(tmpdir(), "turso-queue-jwt-"));
    const keyFile = join(dir, "jwt-public.pem");
    writeFileSync(keyFile, pair.publicKey.export({ type: "spki", format: "pem" }));
    sqld = await startSqld({ authJwtKeyFile: keyFile });
  });
  afterAll(async () => {
    await sqld?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the right token works", async () => {
    const t = await LibsqlTransport.create(sqld.url, {
      authToken: jwt({ a: "rw", exp: Math.floor(Date.now() / 1000) + 600 }),
    });
    const seq = await t.publish("g", { hello: "jwt" });
    const lease = (await t.claim("w", 30)) as Lease;
    expect(lease.seq).toBe(seq);
    await t.ack(lease);
    await checkInvariants(clientOf(t));
    t.close();
  });

  const wrong: Array<[string, () => string | undefined]> = [
    ["missing", () => undefined],
    ["signed by another key", () => jwt({ a: "rw" }, generateKeyPairSync("ed25519").privateKey)],
    // (an hour ago: JWT validators allow a minute of clock skew)
    ["expired", () => jwt({ a: "rw", exp: Math.floor(Date.now() / 1000) - 3600 })],
    ["not a JWT", () => "not-a-token"],
    ["tampered", () => `${jwt({ a: "rw" }).slice(0, -4)}AAAA`],
  ];
  it.each(wrong)("a %s token fails fast with UNAUTHORIZED and a clear message", async (_name, token) => {
    const t0 = Date.now();
    const err = await expectQueueError(
      LibsqlTransport.create(sqld.url, { authToken: token(), timeoutMs: 5000 }),
      "UNAUTHORIZED",
    );
    expect(err.message).toMatch(/refused the credentials/);
    expect(err.message).toMatch(/401/);
    expect(Date.now() - t0, "auth failures are not retried").toBeLessThan(2000);
  });

  it("a read-only token can read but its writes fail with UNAUTHORIZED, storing nothing", async () => {
    const rw = await LibsqlTransport.create(sqld.url, { authToken: jwt({ a: "rw" }) });
    await resetDatabase(clientOf(rw));
    const ro = await LibsqlTransport.create(sqld.url, { authToken: jwt({ a: "ro" }) });
    expect((await ro.stats()).ready).toBe(0);
    const err = await expectQueueError(ro.publish("g", 1), "UNAUTHORIZED");
    expect(err.message).toMatch(/403/);
    expect(await tableCounts(clientOf(rw))).toMatchObject({ messages: 0 });
    await checkInvariants(clientOf(rw));
    ro.close();
    rw.close();
  });
});
