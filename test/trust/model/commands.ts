/**
 * The steps of the model-based test (test/trust/model.test.ts), each a request (or a few at once)
 * to a named queue through the Worker, checked against the model (./model.ts) as it answers, then
 * the queue's stats against the model's counts. fast-check generates sequences of them and shrinks a
 * failing one to a short sequence that still fails.
 */
import fc from "fast-check";
import type * as T from "../../../src/contract/types.js";
import type { NamedWorker } from "../named-worker.js";
import { type Keyed, type Msg, QueueModel } from "./model.js";

/** The queue under test, as the steps reach it. */
export interface Real {
  api: NamedWorker["api"];
  name: string;
  shards: number;
  /** Keys reused for a different request (a 409 expected; see the test's flags). */
  conflicts: boolean;
}

type Cmd = fc.AsyncCommand<QueueModel, Real>;

const VISIBILITY = 300;
const GROUPS = ["g0", "g1", "g2", "g3", "g4", "g5"];
const KEYS = ["k0", "k1", "k2"];

const path = (r: Real, p: string) => `/v1/queues/${r.name}${p}`;

class Failed extends Error {}

function must(ok: boolean, what: string): asserts ok {
  if (!ok) throw new Failed(what);
}

function status(a: { status: number; text: string }, ok: number[], what: string): void {
  must(ok.includes(a.status), `${what}: ${a.status} ${a.text.slice(0, 200)}`);
}

/** The queue's counts equal the model's. */
async function counts(m: QueueModel, r: Real): Promise<void> {
  const want = m.counts();
  {
    const got = await r.api<T.Stats>(path(r, "/stats"));
    status(got, [200], "stats");
    const s = got.body;
    const have = {
      ready: s.ready,
      waiting: s.waiting,
      in_flight: s.in_flight,
      parked: s.parked,
      groups: s.groups,
      dead_letters: s.dead_letters,
    };
    must(
      JSON.stringify(have) === JSON.stringify(want),
      `stats ${JSON.stringify(have)}, the model ${JSON.stringify(want)}`,
    );
  }
}

/** Each lease answered must be one the model allows; it is held from then on. */
function took(m: QueueModel, leases: T.Lease[], what: string): void {
  const groups = new Set(leases.map((l) => l.group_id));
  must(
    groups.size === leases.length,
    `${what}: two leases of one group ${JSON.stringify(leases.map((l) => l.group_id))}`,
  );
  for (const l of leases) {
    const wrong = m.claimed(l);
    must(wrong === undefined, `${what}: ${wrong}`);
  }
}

const pick = <X>(list: X[], i: number): X | undefined => (list.length === 0 ? undefined : list[i % list.length]);
const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));

// ---------------------------------------------------------------------------------------------
// publish

class Publish implements Cmd {
  constructor(
    readonly group: number,
    readonly key: number | null,
  ) {}
  check = () => true;
  async run(m: QueueModel, r: Real) {
    const group = GROUPS[this.group] as string;
    const id = m.event();
    const key = this.key === null ? undefined : `${KEYS[this.key]}-${m.keyed.size}`;
    const got = await r.api<T.PublishAnswer>(path(r, `/groups/${group}/messages`), {
      json: { event: { id } },
      headers: key === undefined ? {} : { "idempotency-key": key },
    });
    status(got, [201], "publish");
    m.published(group, id, got.body.seq);
    if (key !== undefined) m.keyed.set(key, { key, body: [{ group, id }], seqs: [got.body.seq] });
    await counts(m, r);
  }
  toString = () => `publish(${GROUPS[this.group]}${this.key === null ? "" : ", keyed"})`;
}

class PublishBatch implements Cmd {
  constructor(
    readonly groups: number[],
    readonly keyed: boolean,
  ) {}
  check = () => true;
  async run(m: QueueModel, r: Real) {
    const body = this.groups.map((g) => ({ group: GROUPS[g] as string, id: m.event() }));
    const key = this.keyed ? `batch-${m.keyed.size}` : undefined;
    const got = await r.api<T.PublishBatchAnswer>(path(r, "/messages"), {
      json: { messages: body.map((b) => ({ group_id: b.group, event: { id: b.id } })) },
      headers: key === undefined ? {} : { "idempotency-key": key },
    });
    status(got, [201], "publish batch");
    must(got.body.seqs.length === body.length, `publish batch: ${got.body.seqs.length} seqs for ${body.length}`);
    body.forEach((b, i) => {
      m.published(b.group, b.id, got.body.seqs[i] as number);
    });
    if (key !== undefined) m.keyed.set(key, { key, body, seqs: got.body.seqs });
    await counts(m, r);
  }
  toString = () => `publishBatch([${this.groups.map((g) => GROUPS[g]).join(",")}]${this.keyed ? ", keyed" : ""})`;
}

/** A keyed publish sent again as it was: its first seqs, nothing stored. */
class Retry implements Cmd {
  constructor(readonly which: number) {}
  check = (m: Readonly<QueueModel>) => m.keyed.size > 0;
  async run(m: QueueModel, r: Real) {
    const k = pick([...m.keyed.values()], this.which) as Keyed;
    const single = k.key.startsWith("k");
    const got = single
      ? await r.api<T.PublishAnswer>(path(r, `/groups/${k.body[0]?.group}/messages`), {
          json: { event: { id: k.body[0]?.id } },
          headers: { "idempotency-key": k.key },
        })
      : await r.api<T.PublishBatchAnswer>(path(r, "/messages"), {
          json: { messages: k.body.map((b) => ({ group_id: b.group, event: { id: b.id } })) },
          headers: { "idempotency-key": k.key },
        });
    status(got, [200, 201], `retry of ${k.key}`);
    const seqs = single ? [(got.body as T.PublishAnswer).seq] : (got.body as T.PublishBatchAnswer).seqs;
    must(JSON.stringify(seqs) === JSON.stringify(k.seqs), `retry of ${k.key}: seqs ${seqs}, first ${k.seqs}`);
    await counts(m, r);
  }
  toString = () => `retry(${this.which})`;
}

/** A key used again for another request: 409, nothing stored (keys are the queue's, not a shard's). */
class Conflict implements Cmd {
  constructor(
    readonly which: number,
    readonly group: number,
  ) {}
  check = (m: Readonly<QueueModel>) => m.keyed.size > 0;
  async run(m: QueueModel, r: Real) {
    if (!r.conflicts) return;
    const k = pick([...m.keyed.values()], this.which) as Keyed;
    const group = GROUPS[this.group] as string;
    const got = await r.api<T.ErrorAnswer>(path(r, `/groups/${group}/messages`), {
      json: { event: { id: `other-${k.key}` } },
      headers: { "idempotency-key": k.key },
    });
    status(got, [409], `${k.key} used again for ${group}`);
    must(got.body.error.code === "IDEMPOTENCY_CONFLICT", `${k.key} used again: ${got.text}`);
    await counts(m, r);
  }
  toString = () => `conflict(${this.which}, ${GROUPS[this.group]})`;
}

// ---------------------------------------------------------------------------------------------
// claims and long polls

class Claim implements Cmd {
  constructor(
    readonly max: number | null,
    readonly wait: boolean,
  ) {}
  check = () => true;
  async run(m: QueueModel, r: Real) {
    const claimable = m.claimable().length;
    const body = {
      worker_id: "w",
      visibility: VISIBILITY,
      ...(this.max === null ? {} : { max: this.max }),
      ...(this.wait ? { wait: 0.3 } : {}),
    };
    const got = await r.api<T.Lease & T.LeaseList>(path(r, "/claims"), { json: body });
    status(got, this.max === null ? [200, 204] : [200], "claim");
    const leases = this.max === null ? (got.status === 200 ? [got.body as T.Lease] : []) : got.body.leases;
    const asked = this.max ?? 1;
    // One database takes all it may; a sharded queue at least one (its claim is split over the shards).
    const least = claimable === 0 ? 0 : r.shards === 1 ? Math.min(asked, claimable) : 1;
    must(
      leases.length >= least && leases.length <= Math.min(asked, claimable),
      `claim of ${asked}: ${leases.length} leases while ${claimable} groups are claimable`,
    );
    took(m, leases, "claim");
    await counts(m, r);
  }
  toString = () => `claim(${this.max ?? "one"}${this.wait ? ", wait" : ""})`;
}

/** Nothing claimable; a long poll waits, then a message comes: the poll gets it. */
class PollThenPublish implements Cmd {
  check = (m: Readonly<QueueModel>) => m.claimable().length === 0;
  async run(m: QueueModel, r: Real) {
    const poll = r.api<T.Lease>(path(r, "/claims"), {
      json: { worker_id: "poller", visibility: VISIBILITY, wait: 10 },
    });
    await sleep(100);
    const group = m.freshGroup();
    const id = m.event();
    const pub = await r.api<T.PublishAnswer>(path(r, `/groups/${group}/messages`), { json: { event: { id } } });
    status(pub, [201], "publish to a waiter");
    m.published(group, id, pub.body.seq);
    const got = await poll;
    status(got, [200], "the long poll");
    must(got.body.group_id === group, `the long poll got ${got.body.group_id}, not ${group}`);
    took(m, [got.body], "the long poll");
    await counts(m, r);
  }
  toString = () => "pollThenPublish";
}

/**
 * Nothing claimable; a long poll whose client hangs up; then a message: the next claimer gets it, at
 * once where the runtime tells the writer that its client left (the lease taken meanwhile released,
 * unspent), else once that lease lapses (workerd run locally does not tell: a delivery spent).
 */
class AbortedPoll implements Cmd {
  check = (m: Readonly<QueueModel>) => m.claimable().length === 0;
  async run(m: QueueModel, r: Real) {
    const gone = new AbortController();
    const poll = r
      .api(path(r, "/claims"), { json: { worker_id: "gone", visibility: 1, wait: 10 }, signal: gone.signal })
      .then(
        () => "answered",
        () => "aborted",
      );
    await sleep(100);
    gone.abort();
    must((await poll) === "aborted", "the hung-up long poll was answered");
    const group = m.freshGroup();
    const id = m.event();
    const pub = await r.api<T.PublishAnswer>(path(r, `/groups/${group}/messages`), { json: { event: { id } } });
    status(pub, [201], "publish after a hang-up");
    m.published(group, id, pub.body.seq);
    const deadline = Date.now() + 5000;
    for (;;) {
      const got = await r.api<T.Lease>(path(r, "/claims"), { json: { worker_id: "next", visibility: VISIBILITY } });
      status(got, [200, 204], "claim after a hang-up");
      if (got.status === 200) {
        must(got.body.group_id === group, `claim after a hang-up got ${got.body.group_id}, not ${group}`);
        must(got.body.attempts <= 2, `claim after a hang-up: attempt ${got.body.attempts}`);
        const head = m.groups.get(group)?.[0] as Msg;
        head.attempts = got.body.attempts - 1;
        took(m, [got.body], "claim after a hang-up");
        break;
      }
      must(Date.now() < deadline, "the message published after a hang-up was not delivered within 5 s");
      await sleep(100);
    }
    await counts(m, r);
  }
  toString = () => "abortedPoll";
}

/** Nothing claimable; `waiters` long polls, then one batch into as many groups or more: one lease each, none left out. */
class WaitersThenBatch implements Cmd {
  constructor(
    readonly waiters: number,
    readonly extra: number,
  ) {}
  check = (m: Readonly<QueueModel>) => m.claimable().length === 0;
  async run(m: QueueModel, r: Real) {
    const polls = Array.from({ length: this.waiters }, (_, i) =>
      r.api<T.Lease>(path(r, "/claims"), { json: { worker_id: `waiter-${i}`, visibility: VISIBILITY, wait: 10 } }),
    );
    await sleep(150);
    const body = Array.from({ length: this.waiters + this.extra }, () => ({ group: m.freshGroup(), id: m.event() }));
    const pub = await r.api<T.PublishBatchAnswer>(path(r, "/messages"), {
      json: { messages: body.map((b) => ({ group_id: b.group, event: { id: b.id } })) },
    });
    status(pub, [201], "batch to waiters");
    body.forEach((b, i) => {
      m.published(b.group, b.id, pub.body.seqs[i] as number);
    });
    const got = await Promise.all(polls);
    for (const g of got) status(g, [200], "a waiter");
    took(
      m,
      got.map((g) => g.body),
      "the waiters",
    );
    // Every lease taken for them is theirs, or was given back: the counts say so at once.
    await counts(m, r);
  }
  toString = () => `waitersThenBatch(${this.waiters}, +${this.extra})`;
}

// ---------------------------------------------------------------------------------------------
// what a lease holder does

abstract class OnLease implements Cmd {
  constructor(readonly which: number) {}
  check = (m: Readonly<QueueModel>) => m.leases.size > 0;
  abstract run(m: QueueModel, r: Real): Promise<void>;
  lease(m: QueueModel): string {
    return pick([...m.leases.keys()], this.which) as string;
  }
}

class Ack extends OnLease {
  async run(m: QueueModel, r: Real) {
    const lease = this.lease(m);
    status(await r.api(path(r, `/leases/${lease}/ack`), { method: "POST" }), [204], "ack");
    m.acked(lease);
    await counts(m, r);
  }
  toString = () => `ack(${this.which})`;
}

class Nack extends OnLease {
  constructor(
    which: number,
    readonly delay: number,
  ) {
    super(which);
  }
  async run(m: QueueModel, r: Real) {
    const lease = this.lease(m);
    const got = await r.api(path(r, `/leases/${lease}/nack`), {
      method: "POST",
      ...(this.delay > 0 ? { json: { delay: this.delay } } : {}),
    });
    status(got, [204], "nack");
    const dead = m.nacked(lease, this.delay);
    must(
      (got.headers.get("dead-lettered") === "true") === dead,
      `nack: dead-lettered ${got.headers.get("dead-lettered")}, the model ${dead}`,
    );
    await counts(m, r);
  }
  toString = () => `nack(${this.which}${this.delay > 0 ? `, ${this.delay} s` : ""})`;
}

class Release extends OnLease {
  async run(m: QueueModel, r: Real) {
    const lease = this.lease(m);
    status(await r.api(path(r, `/leases/${lease}/release`), { method: "POST" }), [204], "release");
    m.released(lease);
    await counts(m, r);
  }
  toString = () => `release(${this.which})`;
}

class Extend extends OnLease {
  async run(m: QueueModel, r: Real) {
    const lease = this.lease(m);
    const got = await r.api(path(r, `/leases/${lease}/extend`), { json: { visibility: VISIBILITY } });
    status(got, [200], "extend");
    await counts(m, r);
  }
  toString = () => `extend(${this.which})`;
}

/** A lease that means nothing any more (acked, released, purged, of the queue before): refused, nothing changed. */
class Stale implements Cmd {
  constructor(
    readonly which: number,
    readonly op: "ack" | "nack" | "release" | "extend",
  ) {}
  check = (m: Readonly<QueueModel>) => m.stale.length > 0;
  async run(m: QueueModel, r: Real) {
    const lease = pick(m.stale, this.which) as string;
    const got = await r.api<T.ErrorAnswer>(path(r, `/leases/${lease}/${this.op}`), {
      method: "POST",
      ...(this.op === "extend" ? { json: { visibility: VISIBILITY } } : {}),
    });
    status(got, [404, 409], `${this.op} of a stale lease`);
    must(["LEASE_NOT_FOUND", "LEASE_LOST"].includes(got.body.error.code), `${this.op} of a stale lease: ${got.text}`);
    await counts(m, r);
  }
  toString = () => `stale(${this.op}, ${this.which})`;
}

// ---------------------------------------------------------------------------------------------
// management

class Redrive implements Cmd {
  constructor(readonly which: number) {}
  check = (m: Readonly<QueueModel>) => m.dead.size > 0;
  async run(m: QueueModel, r: Real) {
    const seq = pick([...m.dead.keys()], this.which) as number;
    const got = await r.api<T.RedriveAnswer>(path(r, `/dead-letters/${seq}/redrive`), { method: "POST" });
    status(got, [201], "redrive");
    m.redriven(seq, got.body.seq);
    await counts(m, r);
  }
  toString = () => `redrive(${this.which})`;
}

class Purge implements Cmd {
  constructor(readonly group: number) {}
  check = () => true;
  async run(m: QueueModel, r: Real) {
    const groups = [...m.groups.keys()];
    const group = pick(groups, this.group) ?? (GROUPS[this.group % GROUPS.length] as string);
    const got = await r.api<T.PurgeAnswer>(path(r, `/groups/${group}/messages`), { method: "DELETE" });
    status(got, [200], "purge");
    const n = m.purged(group);
    must(got.body.purged === n, `purge of ${group}: ${got.body.purged}, the model ${n}`);
    await counts(m, r);
  }
  toString = () => `purge(${this.group})`;
}

class Recreate implements Cmd {
  check = () => true;
  async run(m: QueueModel, r: Real) {
    await recreate(r);
    m.reset();
    await counts(m, r);
  }
  toString = () => "recreate";
}

/** Deleted (forced) and made again: empty. */
export async function recreate(r: Real): Promise<void> {
  const deleted = await r.api(path(r, "?force=true"), { method: "DELETE" });
  status(deleted, [204, 404], "delete the queue");
  status(await r.api(path(r, ""), { method: "PUT", json: { shards: r.shards } }), [201], "make the queue");
}

/** After a run: each group's messages, in order, with their states and attempts, as the model holds them. */
export async function contents(m: QueueModel, r: Real): Promise<void> {
  for (const [group, list] of m.groups) {
    const got = await r.api<T.PeekAnswer>(path(r, `/groups/${group}/messages?limit=100`));
    status(got, [200], `peek ${group}`);
    const have = got.body.messages.map((x) => [x.seq, (x.event as { id: string }).id, x.state, x.attempts]);
    const want = list.map((x: Msg) => [x.seq, x.id, x.state, x.attempts]);
    must(
      JSON.stringify(have) === JSON.stringify(want),
      `group ${group}: ${JSON.stringify(have)}, the model ${JSON.stringify(want)}`,
    );
  }
  const dead = await r.api<T.DeadLetterPage>(path(r, "/dead-letters?limit=100"));
  status(dead, [200], "dead letters");
  const have = dead.body.dead_letters.map((d) => d.seq).sort((a, b) => a - b);
  const want = [...m.dead.keys()].sort((a, b) => a - b);
  must(JSON.stringify(have) === JSON.stringify(want), `dead letters ${have}, the model ${want}`);
}

/** Every step, weighted: most are publishes, claims and what holders do. */
export function commands(): fc.Arbitrary<Cmd>[] {
  const group = fc.nat({ max: GROUPS.length - 1 });
  const which = fc.nat({ max: 7 });
  return [
    fc.tuple(group, fc.option(fc.nat({ max: KEYS.length - 1 }), { freq: 3 })).map(([g, k]) => new Publish(g, k)),
    fc.tuple(fc.array(group, { minLength: 1, maxLength: 4 }), fc.boolean()).map(([g, k]) => new PublishBatch(g, k)),
    which.map((w) => new Retry(w)),
    fc.tuple(which, group).map(([w, g]) => new Conflict(w, g)),
    fc.tuple(fc.constantFrom(null, 1, 3), fc.boolean()).map(([n, w]) => new Claim(n, w)),
    fc.constant(new PollThenPublish()),
    fc.constant(new AbortedPoll()),
    fc.tuple(fc.integer({ min: 1, max: 4 }), fc.nat({ max: 2 })).map(([w, e]) => new WaitersThenBatch(w, e)),
    which.map((w) => new Ack(w)),
    fc.tuple(which, fc.constantFrom(0, 0, 60)).map(([w, d]) => new Nack(w, d)),
    which.map((w) => new Release(w)),
    which.map((w) => new Extend(w)),
    fc
      .tuple(which, fc.constantFrom("ack", "nack", "release", "extend") as fc.Arbitrary<"ack">)
      .map(([w, op]) => new Stale(w, op)),
    which.map((w) => new Redrive(w)),
    group.map((g) => new Purge(g)),
    fc.constant(new Recreate()),
  ];
}

export { Conflict, Failed, GROUPS, Publish, QueueModel };
