/**
 * consume() against the real sqld: exactly-once and FIFO under concurrency, retries into the dead
 * letters, heartbeats, fencing, graceful stop, one round trip per message, errors that never stop
 * the loop, and options refused by name.
 */
import { afterEach, describe, expect, inject, it } from "vitest";
import { startProxy } from "../../scripts/support/proxy.js";
import { clientOf } from "../../src/core/internals.js";
import {
  type ConsumeErrorContext,
  type ConsumerQueue,
  type ConsumeSummary,
  consume,
  type Lease,
  LibsqlTransport,
  QueueError,
  type TransportOptions,
} from "../../src/index.js";
import { checkInvariants, resetDatabase, tempFile } from "../support/db.js";
import { waitFor } from "../support/wait.js";

const opened: LibsqlTransport[] = [];
afterEach(() => {
  for (const t of opened.splice(0)) t.close();
});

async function open(options: TransportOptions = {}, url = inject("sqldUrl")): Promise<LibsqlTransport> {
  const t = await LibsqlTransport.create(url, options);
  opened.push(t);
  return t;
}

async function fresh(options: TransportOptions = {}): Promise<LibsqlTransport> {
  const t = await open(options);
  await resetDatabase(clientOf(t));
  return t;
}

/** Text only a claim statement carries, once per claim (src/core/sql/claim.ts). */
const CLAIM = "tq_claimed_at AS stamp, tq_trace AS trace";
/** Text an ack carries, once per acked lease (src/core/sql). */
const ACK = "DELETE FROM messages WHERE seq = ? AND tq_lease";

/** `t` as a bare ConsumerQueue (no long poll unless given), with some of its calls replaced to count, hold or cut them. */
function through(t: LibsqlTransport, own: Partial<ConsumerQueue>): ConsumerQueue {
  return {
    claimMany: (w, v, k, p) => t.claimMany(w, v, k, p),
    ack: (l) => t.ack(l),
    nack: (l, d) => t.nack(l, d),
    release: (l) => t.release(l),
    extend: (l, v) => t.extend(l, v),
    ...own,
  };
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The summary of a consumer stopped by its signal that did nothing. */
const NOTHING: ConsumeSummary = {
  stopped: "signal",
  claimed: 0,
  handled: 0,
  acked: 0,
  nacked: 0,
  deadLettered: 0,
  released: 0,
  lost: 0,
  abandoned: 0,
  settleFailed: 0,
  leftLeased: [],
  claimsUnanswered: 0,
};

/** Every error a consumer reported, by phase. */
function errorLog() {
  const log: { error: unknown; context: ConsumeErrorContext }[] = [];
  return {
    log,
    onError: (error: unknown, context: ConsumeErrorContext) => {
      log.push({ error, context });
    },
    phases: () => log.map((e) => e.context.phase),
  };
}

describe("consume() over sqld", () => {
  it("handles 1,000 messages in 50 groups exactly once, FIFO per group, one handler per group at a time", async () => {
    const t = await fresh();
    const published = new Map<number, string>();
    for (let chunk = 0; chunk < 10; chunk++) {
      const batch = Array.from({ length: 100 }, (_, i) => ({
        groupId: `g${(chunk * 100 + i) % 50}`,
        event: { n: chunk * 100 + i },
      }));
      const seqs = await t.publishMany(batch);
      for (const [i, s] of seqs.entries()) published.set(s, (batch[i] as { groupId: string }).groupId);
    }

    const ctl = new AbortController();
    const handled: { seq: number; groupId: string; n: number }[] = [];
    const busyGroups = new Set<string>();
    const overlaps: string[] = [];
    let peak = 0;
    let running = 0;
    const errors = errorLog();
    const summary = await consume<{ n: number }>(
      t,
      async (event, lease) => {
        if (busyGroups.has(lease.groupId)) overlaps.push(`${lease.groupId}: seq ${lease.seq}`);
        busyGroups.add(lease.groupId);
        running++;
        peak = Math.max(peak, running);
        // Handlers of varying length, so that they finish out of order.
        await sleep(lease.seq % 3);
        running--;
        busyGroups.delete(lease.groupId);
        handled.push({ seq: lease.seq, groupId: lease.groupId, n: event.n });
        if (handled.length === published.size) ctl.abort();
      },
      { workerId: "c16", concurrency: 16, signal: ctl.signal, onError: errors.onError },
    );

    expect(errors.log).toEqual([]);
    expect(overlaps, "two handlers of one group at once").toEqual([]);
    expect(peak).toBeLessThanOrEqual(16);
    expect(peak, "the loop ran handlers concurrently").toBeGreaterThan(1);
    expect(summary).toEqual({ ...NOTHING, claimed: 1000, handled: 1000, acked: 1000 });
    const seqs = handled.map((h) => h.seq);
    expect(new Set(seqs).size, "a message handled twice").toBe(1000);
    expect(
      [...published.keys()].filter((s) => !seqs.includes(s)),
      "messages never handled",
    ).toEqual([]);
    // FIFO: within each group, in the order handled, seqs ascend.
    const lastSeq = new Map<string, number>();
    for (const h of handled) {
      expect(h.groupId).toBe(published.get(h.seq));
      expect(h.seq, `group ${h.groupId}: FIFO`).toBeGreaterThan(lastSeq.get(h.groupId) ?? 0);
      lastSeq.set(h.groupId, h.seq);
    }
    const stats = await t.stats();
    expect({ ready: stats.ready, inFlight: stats.inFlight, groups: stats.groups }).toEqual({
      ready: 0,
      inFlight: 0,
      groups: 0,
    });
    await checkInvariants(clientOf(t));
  });

  it("sends each ack with the next claim: N messages one at a time take N + 1 requests, not 2N", async () => {
    let requests = 0;
    // Write batches and reads, not the request that closes a stream left idle (src/core/hrana.ts).
    const counting: typeof fetch = (input, init) => {
      if (!closesOnly(init?.body)) requests++;
      return fetch(input, init);
    };
    const t = await fresh({ fetch: counting });
    const n = 100;
    await t.publishMany(Array.from({ length: n }, (_, i) => ({ groupId: `g${i}`, event: { i } })));
    const ctl = new AbortController();
    let handled = 0;
    requests = 0;
    const summary = await consume(
      t,
      () => {
        handled++;
        if (handled === n) ctl.abort();
      },
      { workerId: "one", concurrency: 1, signal: ctl.signal },
    );
    expect(summary.acked).toBe(n);
    // The first claim; then each ack rides with the next claim; the last ack goes alone at the stop.
    expect(requests).toBe(n + 1);
    expect((await t.stats()).ready).toBe(0);
  });

  /** A request that only closes a stream: its pipeline is `[{ type: "close" }]`. */
  const closesOnly = (body: unknown) =>
    typeof body === "string" && /^\{"baton":"[^"]*","requests":\[\{"type":"close"\}\]\}$/.test(body);

  it("at concurrency 8 no ack travels alone: requests = claims + the final flush", async () => {
    let requests = 0;
    // Write batches and reads, not the request that closes a stream left idle (src/core/hrana.ts).
    const counting: typeof fetch = (input, init) => {
      if (!closesOnly(init?.body)) requests++;
      return fetch(input, init);
    };
    const t = await fresh({ fetch: counting });
    const n = 400;
    await t.publishMany(Array.from({ length: n }, (_, i) => ({ groupId: `g${i % 200}`, event: { i } })));
    let claims = 0;
    // The transport itself, with its claims counted.
    const counted = through(t, {
      claimMany: (w, v, k, p) => {
        claims++;
        return t.claimMany(w, v, k, p);
      },
    });
    const ctl = new AbortController();
    let handled = 0;
    requests = 0;
    const summary = await consume(
      counted,
      async (_e, lease) => {
        await sleep(lease.seq % 4);
        handled++;
        if (handled === n) ctl.abort();
      },
      { workerId: "c8", concurrency: 8, signal: ctl.signal },
    );
    expect(summary.acked).toBe(n);
    expect(requests).toBe(claims + 1);
    // Handlers finishing in the same tick share a claim, so fewer requests than messages + 1.
    expect(requests).toBeLessThanOrEqual(n + 1);
    expect(requests).toBeGreaterThanOrEqual(n / 8);
  });

  it("an ack owed when a claim comes back short rides the next claim at once: its group's next message is claimable", async () => {
    const sent: { claims: number; acks: number }[] = [];
    const counting: typeof fetch = (input, init) => {
      const body = String(init?.body);
      if (!closesOnly(body)) sent.push({ claims: body.split(CLAIM).length - 1, acks: body.split(ACK).length - 1 });
      return fetch(input, init);
    };
    const t = await fresh({ fetch: counting });
    await t.publishMany([
      { groupId: "a", event: { n: 1 } },
      { groupId: "a", event: { n: 2 } },
      { groupId: "b", event: { n: 1 } },
    ]);
    const release = deferred();
    const a1Done = deferred();
    let claims = 0;
    // The second claim (b's refill) finds nothing, a1 still held; its answer waits until a1's ack is owed.
    const held = through(t, {
      claimMany: async <E>(w: string, v: number, k: number, p?: number) => {
        const leases = await t.claimMany<E>(w, v, k, p);
        if (++claims === 2) {
          release.resolve();
          await a1Done.promise;
          await new Promise((r) => setImmediate(r));
        }
        return leases;
      },
    });
    const ctl = new AbortController();
    const order: string[] = [];
    sent.length = 0;
    const summary = await consume(
      held,
      async (e: { n: number }, lease) => {
        order.push(`${lease.groupId}${e.n}`);
        if (lease.groupId === "a" && e.n === 1) {
          await release.promise;
          a1Done.resolve();
        }
        if (lease.groupId === "a" && e.n === 2) ctl.abort();
      },
      { workerId: "short", concurrency: 2, signal: ctl.signal },
    );
    expect(summary).toMatchObject({ claimed: 3, acked: 3 });
    expect(order.sort()).toEqual(["a1", "a2", "b1"]);
    // a1's ack left with the claim that found a2; only the stop's flush carries an ack alone (a2's).
    expect(sent).toEqual([
      { claims: 1, acks: 0 },
      { claims: 1, acks: 1 },
      { claims: 1, acks: 1 },
      { claims: 0, acks: 1 },
    ]);
  });

  it("retries a throwing handler with backoff, then the message ends in the dead letters", async () => {
    const t = await fresh({ maxAttempts: 3 });
    await t.publish("poison", { bad: true });
    await t.publishMany(Array.from({ length: 4 }, (_, i) => ({ groupId: `ok${i}`, event: { bad: false } })));
    const ctl = new AbortController();
    const attempts: { attempts: number; at: number }[] = [];
    let good = 0;
    const errors = errorLog();
    const done = consume<{ bad: boolean }>(
      t,
      (event, lease) => {
        if (event.bad) {
          attempts.push({ attempts: lease.attempts, at: Date.now() });
          throw new Error(`cannot handle ${lease.seq}`);
        }
        good++;
      },
      {
        workerId: "retry",
        concurrency: 4,
        signal: ctl.signal,
        backoff: { initial: 0.2, factor: 2 },
        idleBackoff: { minMs: 10, maxMs: 40 },
        onError: errors.onError,
      },
    );
    await waitFor(async () => (await t.stats()).deadLetters === 1, { what: "the poison message dead-lettered" });
    ctl.abort();
    const summary = await done;

    expect(attempts.map((a) => a.attempts)).toEqual([1, 2, 3]);
    // Parked 0.2 s after the first failure, 0.4 s after the second (both clocks are this machine's).
    expect((attempts[1]?.at ?? 0) - (attempts[0]?.at ?? 0)).toBeGreaterThanOrEqual(195);
    expect((attempts[2]?.at ?? 0) - (attempts[1]?.at ?? 0)).toBeGreaterThanOrEqual(395);
    expect(good).toBe(4);
    expect(summary).toMatchObject({ acked: 4, nacked: 3, deadLettered: 1, lost: 0, abandoned: 0 });
    expect(errors.phases()).toEqual(["handler", "handler", "handler"]);
    const [dead] = await t.deadLetters();
    expect(dead).toMatchObject({ groupId: "poison", attempts: 3, event: { bad: true } });
    const stats = await t.stats();
    expect({ ready: stats.ready, parked: stats.parked, inFlight: stats.inFlight }).toEqual({
      ready: 0,
      parked: 0,
      inFlight: 0,
    });
  });

  it("keeps a slow handler's lease through heartbeats: another consumer never gets the message", async () => {
    const t = await fresh();
    await t.publish("slow", { slow: true });
    const ctl = new AbortController();
    const handledBy: string[] = [];
    let abortedSignal = false;
    const handler = async (event: { slow: boolean }, lease: Lease<{ slow: boolean }>, ctx: { signal: AbortSignal }) => {
      handledBy.push(lease.workerId);
      // 2.1 visibilities: without heartbeats the lease lapses after 2 s and the other consumer takes it.
      if (event.slow) await sleep(4200);
      abortedSignal ||= ctx.signal.aborted;
      ctl.abort();
    };
    const other = await open();
    const opts = { visibility: 2, signal: ctl.signal, idleBackoff: { minMs: 20, maxMs: 50 } };
    const errors = errorLog();
    const [a, b] = await Promise.all([
      consume(t, handler, { ...opts, workerId: "a", onError: errors.onError }),
      consume(other, handler, { ...opts, workerId: "b", onError: errors.onError }),
    ]);
    expect(handledBy).toHaveLength(1);
    expect(abortedSignal).toBe(false);
    expect(errors.log).toEqual([]);
    expect(a.acked + b.acked).toBe(1);
    expect((await t.stats()).groups).toBe(0);
  });

  it("a heartbeat past the longest timer (24.8 days: a visibility over 49.7; up to 366 are allowed) is not sent at once", async () => {
    const t = await fresh();
    await t.publishMany([
      { groupId: "months", event: {} },
      { groupId: "year", event: {} },
    ]);
    for (const visibility of [60 * 86_400, 366 * 86_400]) {
      const ctl = new AbortController();
      let extends_ = 0;
      const counted = through(t, {
        extend: (l, v) => {
          extends_++;
          return t.extend(l, v);
        },
      });
      const summary = await consume(
        counted,
        async () => {
          await sleep(300);
          ctl.abort();
        },
        { workerId: "long", visibility, signal: ctl.signal },
      );
      expect(summary.acked, `visibility ${visibility}`).toBe(1);
      // A heartbeat is due at half the visibility: not within this handler's 300 ms.
      expect(extends_, `extends with visibility ${visibility}`).toBe(0);
    }
  });

  it("stops extending a fenced lease, aborts its handler's signal and neither acks nor nacks it", async () => {
    const t = await fresh();
    await t.publish("g", { n: 1 });
    const ctl = new AbortController();
    let thief: Lease | null = null;
    let reason: unknown;
    const errors = errorLog();
    const summary = await consume(
      t,
      async (_event, lease, { signal }) => {
        // Someone takes the message away: it is released, and another worker claims it.
        await t.nack(lease, 0);
        thief = await t.claim("thief", 60);
        // The next heartbeat (at half the 1 s visibility) finds the lease fenced off.
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        reason = signal.reason;
        ctl.abort();
      },
      { workerId: "victim", visibility: 1, signal: ctl.signal, onError: errors.onError },
    );
    expect(thief).not.toBeNull();
    expect(reason).toBeInstanceOf(QueueError);
    expect((reason as QueueError).code).toBe("LEASE_LOST");
    expect(errors.phases()).toEqual(["extend"]);
    expect(summary).toMatchObject({ acked: 0, nacked: 0, lost: 1 });
    // The thief still holds it: nothing of the victim's touched the message.
    await t.ack(thief as unknown as Lease);
    expect((await t.stats()).groups).toBe(0);
  });

  it("abort mid-run loses nothing: running handlers finish and are acked, the rest stays queued", async () => {
    const t = await fresh();
    const n = 200;
    await t.publishMany(Array.from({ length: n }, (_, i) => ({ groupId: `g${i % 20}`, event: { i } })));
    const ctl = new AbortController();
    const first: number[] = [];
    const summary = await consume(
      t,
      async (_e, lease) => {
        await sleep(2 + (lease.seq % 5));
        first.push(lease.seq);
        if (first.length === 50) ctl.abort();
      },
      { workerId: "first", concurrency: 8, signal: ctl.signal },
    );
    // Handlers that were running at the abort finished (within the grace period) and were acked.
    expect(first.length).toBeGreaterThanOrEqual(50);
    expect(summary.acked).toBe(first.length);
    expect(summary.abandoned).toBe(0);
    const stats = await t.stats();
    expect(stats.inFlight, "a lease left behind").toBe(0);
    expect(stats.ready + stats.waiting).toBe(n - first.length);

    const ctl2 = new AbortController();
    const second: number[] = [];
    const summary2 = await consume(
      t,
      (_e, lease) => {
        second.push(lease.seq);
        if (first.length + second.length === n) ctl2.abort();
      },
      { workerId: "second", concurrency: 8, signal: ctl2.signal },
    );
    expect(summary2.acked).toBe(second.length);
    const all = [...first, ...second];
    expect(new Set(all).size).toBe(n);
    expect(all).toHaveLength(n);
    await checkInvariants(clientOf(t));
  });

  it("resolves after the grace period and leaves a still-running handler's lease to lapse", async () => {
    const t = await fresh();
    await t.publish("stuck", {});
    const ctl = new AbortController();
    let started = false;
    let handlerSignal: AbortSignal | undefined;
    const summary = await consume(
      t,
      (_e, _l, { signal }) => {
        started = true;
        handlerSignal = signal;
        ctl.abort();
        return new Promise(() => {}); // never finishes
      },
      { workerId: "stuck", visibility: 1, graceMs: 200, signal: ctl.signal },
    );
    expect(started).toBe(true);
    expect(summary).toMatchObject({ acked: 0, nacked: 0, abandoned: 1, claimed: 1, handled: 0 });
    expect(summary.leftLeased.map((l) => [l.seq, l.reason])).toEqual([[1, "abandoned"]]);
    expect(handlerSignal?.aborted).toBe(true);
    // Not released: still leased by the stuck handler, until the lease lapses (no more heartbeats).
    expect((await t.stats()).inFlight).toBe(1);
    const again = await waitFor(() => t.claim("next", 30), { what: "the lapsed lease to come back" });
    expect(again.attempts).toBe(2);
    await t.ack(again);
  });

  it("releases leases claimed while stopping, and resolves at once on an aborted signal", async () => {
    const t = await fresh();
    await t.publishMany(Array.from({ length: 4 }, (_, i) => ({ groupId: `g${i}`, event: {} })));
    const ctl = new AbortController();
    ctl.abort();
    let handled = 0;
    const summary = await consume(t, () => void handled++, { workerId: "never", signal: ctl.signal });
    expect(handled).toBe(0);
    expect(summary).toEqual(NOTHING);

    // A claim answered after the abort: its leases go back at once (released, not nacked), no handler runs.
    const ctl2 = new AbortController();
    const calls: string[] = [];
    const slowClaims = through(t, {
      claimMany: async <E>(w: string, v: number, k: number, p?: number) => {
        const leases = await t.claimMany<E>(w, v, k, p);
        ctl2.abort();
        return leases;
      },
      nack: (l, d) => {
        calls.push("nack");
        return t.nack(l, d);
      },
      release: (l) => {
        calls.push("release");
        return t.release(l);
      },
    });
    const summary2 = await consume(slowClaims, () => void handled++, {
      workerId: "late",
      concurrency: 4,
      signal: ctl2.signal,
    });
    expect(handled).toBe(0);
    expect(summary2.released).toBe(4);
    expect(calls).toEqual(["release", "release", "release", "release"]);
    const stats = await t.stats();
    expect({ ready: stats.ready, inFlight: stats.inFlight }).toEqual({ ready: 4, inFlight: 0 });
    // No attempt was spent: the next delivery of each is still its first.
    expect((await t.claimMany("next", 30, 4)).map((l) => l.attempts)).toEqual([1, 1, 1, 1]);
  });

  it("gives back a lease claimed while stopping without spending an attempt (a file: database)", async () => {
    const t = await open({}, `file:${tempFile()}`);
    const seq = await t.publish("g", { n: 1 });
    // One delivery spent already: the message is on its second attempt when consume() claims it.
    await t.nack((await t.claim("first", 30)) as Lease, 0);
    const ctl = new AbortController();
    let handled = 0;
    const errors = errorLog();
    const stopping = through(t, {
      claimMany: async <E>(w: string, v: number, k: number, p?: number) => {
        const leases = await t.claimMany<E>(w, v, k, p);
        ctl.abort();
        return leases;
      },
    });
    const summary = await consume(stopping, () => void handled++, {
      workerId: "stopping",
      signal: ctl.signal,
      onError: errors.onError,
    });
    expect(handled).toBe(0);
    expect(errors.log).toEqual([]);
    expect(summary).toEqual({
      ...NOTHING,
      claimed: 1,
      released: 1,
    });
    // A nack would have made this the third attempt.
    expect(await t.claim("next", 30)).toMatchObject({ seq, attempts: 2 });
  });

  it("reports claim failures and carries on once the database is back; a throwing onError changes nothing", async () => {
    const direct = await fresh();
    const port = Number(new URL(inject("sqldUrl")).port);
    const proxy = await startProxy(port);
    try {
      // Calls give up after 1 s of refused connections (each retried with backoff meanwhile).
      const t = await open({ timeoutMs: 1000 }, proxy.url);
      await direct.publishMany(Array.from({ length: 3 }, (_, i) => ({ groupId: `g${i}`, event: { i } })));
      proxy.refuse = true;
      proxy.cutAll();
      const ctl = new AbortController();
      const errors = errorLog();
      let handled = 0;
      const done = consume(
        t,
        () => {
          handled++;
          if (handled === 3) ctl.abort();
        },
        {
          workerId: "patient",
          concurrency: 2,
          signal: ctl.signal,
          idleBackoff: { minMs: 10, maxMs: 100 },
          onError: (e, c) => {
            errors.onError(e, c);
            throw new Error("a broken onError");
          },
        },
      );
      await waitFor(async () => errors.log.length >= 2, { what: "claim failures reported" });
      expect(handled).toBe(0);
      expect(new Set(errors.phases())).toEqual(new Set(["claim"]));
      expect(errors.log.every((e) => e.error instanceof QueueError)).toBe(true);
      proxy.refuse = false;
      const summary = await done;
      expect(summary.acked).toBe(3);
      expect((await direct.stats()).groups).toBe(0);
    } finally {
      await proxy.close();
    }
  });

  it("long-polls a queue that can wait for messages instead of polling it, and cuts the poll short on stop", async () => {
    const t = await fresh();
    const waits: (number | undefined)[] = [];
    let cut = 0;
    // A queue whose claims can wait server-side (what the HTTP client's `wait` will do), over the transport.
    const longPolling = through(t, {
      maxClaimWait: 20,
      claimMany: async <E>(
        w: string,
        v: number,
        n: number,
        p?: number,
        o?: { wait?: number; signal?: AbortSignal },
      ) => {
        waits.push(o?.wait);
        const until = Date.now() + (o?.wait ?? 0) * 1000;
        for (;;) {
          const leases = await t.claimMany<E>(w, v, n, p);
          if (leases.length > 0 || Date.now() >= until) return leases;
          if (o?.signal?.aborted) {
            cut++;
            throw o.signal.reason;
          }
          await sleep(10);
        }
      },
    });
    const ctl = new AbortController();
    const handled: unknown[] = [];
    const errors = errorLog();
    const done = consume(longPolling, (e) => void handled.push(e), {
      workerId: "lp",
      concurrency: 4,
      signal: ctl.signal,
      onError: errors.onError,
    });
    await waitFor(async () => waits.includes(20), { what: "a long poll" });
    await t.publish("late", { late: true });
    await waitFor(async () => handled.length === 1, { what: "the late message handled" });
    // Back to waiting on the server; stopping cuts that poll short rather than waiting 20 s for it.
    await waitFor(async () => waits.filter((w) => w === 20).length === 2, { what: "a second long poll" });
    ctl.abort();
    const summary = await done;
    expect(summary.acked).toBe(1);
    expect(cut).toBe(1);
    expect(errors.log).toEqual([]);
    // A claim that may find work at once (the first; the one carrying the ack) does not wait; an idle
    // consumer's next claim does, and nothing polls in between.
    expect(waits).toEqual([undefined, 20, undefined, 20]);
  });

  it("refuses bad options by name, before claiming anything", async () => {
    const t = await fresh();
    await t.publish("g", {});
    const ok = { workerId: "w" };
    const cases: [unknown, unknown, unknown, string][] = [
      [{}, () => {}, ok, "queue"],
      // Everything but release(): it gives back the leases claimed while stopping.
      [{ claimMany: () => {}, ack: () => {}, nack: () => {}, extend: () => {} }, () => {}, ok, "queue"],
      [t, "not a function", ok, "handler"],
      [t, () => {}, undefined, "options"],
      [t, () => {}, {}, "options.workerId"],
      [t, () => {}, { workerId: "__parked__" }, "options.workerId"],
      [t, () => {}, { ...ok, concurrency: 0 }, "options.concurrency"],
      [t, () => {}, { ...ok, concurrency: 1.5 }, "options.concurrency"],
      [t, () => {}, { ...ok, visibility: 0 }, "options.visibility"],
      [t, () => {}, { ...ok, minPriority: 9 }, "options.minPriority"],
      [t, () => {}, { ...ok, signal: "stop" }, "options.signal"],
      [t, () => {}, { ...ok, backoff: { factor: 0.5 } }, "options.backoff.factor"],
      [t, () => {}, { ...ok, backoff: { initial: -1 } }, "options.backoff.initial"],
      [t, () => {}, { ...ok, backoff: { initial: 10, max: 1 } }, "options.backoff.max"],
      [t, () => {}, { ...ok, idleBackoff: { minMs: 0 } }, "options.idleBackoff.minMs"],
      [t, () => {}, { ...ok, idleBackoff: { minMs: 100, maxMs: 10 } }, "options.idleBackoff.maxMs"],
      [t, () => {}, { ...ok, graceMs: -1 }, "options.graceMs"],
      [t, () => {}, { ...ok, onError: 1 }, "options.onError"],
    ];
    for (const [queue, handler, options, field] of cases) {
      const err = await consume(queue as LibsqlTransport, handler as () => void, options as typeof ok).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, field).toBeInstanceOf(QueueError);
      expect((err as QueueError).code).toBe("INVALID_ARGUMENT");
      expect((err as QueueError).field).toBe(field);
    }
    const stats = await t.stats();
    expect({ ready: stats.ready, inFlight: stats.inFlight }).toEqual({ ready: 1, inFlight: 0 });
  });
});
