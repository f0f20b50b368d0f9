/**
 * One run of the Worker fault suite (test/trust/worker-faults.test.ts): publishers and claimers
 * against the Worker over real HTTP, half through the HTTP client and half as raw requests, while a
 * fault plays out; then what every run must show. Each publisher owns its groups and publishes them
 * in order, so that a group's ranks are its publish order.
 */
import type { Client } from "@libsql/client";
import { createClient, type Lease, type QueueClient, QueueHttpError } from "../../src/client/index.js";
import { ERRORS, type ErrorCode } from "../../src/contract/errors.js";
import { sleep } from "../support/trust.js";

export interface RunOptions {
  /** The API (the proxy in front of the Worker). */
  url: () => string;
  token: string;
  /** sqld itself, for the checks made meanwhile (never through the fault proxy): the queue's database, or each of its shards'. */
  db: Client | Client[];
  /** A named queue (`/v1/queues/{queue}/...`); default: the default queue. */
  queue?: string;
  messages: number;
  groups: number;
  publishers: number;
  claimers: number;
  visibility: number;
  /** Every call's budget (the client's timeoutMs, a raw request's abort). */
  callTimeoutMs: number;
  /** Most time the run may take to drain. */
  budgetMs: number;
  /** Claimers that sometimes hang up mid-claim and mid-long-poll. */
  hangUps?: boolean;
  /** No claimers: a push subscription consumes (the caller sets it up). */
  claim?: boolean;
  /** Pause between a publisher's calls, ms. */
  publishPauseMs?: number;
}

interface Event {
  id: string;
  group: string;
  rank: number;
}

interface Delivered {
  id: string;
  seq: number;
  event: Event;
  /** Epoch seconds, on the database's clock (this machine's). */
  expiresAt: number;
}

interface Acked extends Event {
  seq: number;
  claimAnswered: number;
  ackSent: number;
}

/** What a run saw; `check()` lists what it must not have seen. */
export class FaultRun {
  readonly o: RunOptions;
  /** seq → the event, for every publish that was answered. */
  readonly published = new Map<number, Event>();
  /** Publishes that failed: stored once or not at all. */
  readonly unanswered = new Set<string>();
  readonly acked = new Map<number, Acked>();
  readonly deliveries = new Map<number, number>();
  readonly violations: string[] = [];
  /** Errors callers saw, by code and by who saw them. */
  readonly errors: Record<string, number> = {};
  readonly clientPublishErrors: string[] = [];
  /** Acks, by when they were answered (ms since the epoch) and the seq they acked. */
  readonly ackTimes: { at: number; seq: number }[] = [];
  hangUps = 0;
  maxCallMs = 0;
  publishMs = 0;
  #publishersDone = false;
  #stop = false;
  readonly #started = Date.now();

  constructor(o: RunOptions) {
    this.o = o;
  }

  /** Publishes and claims until everything published is acked and the queue is empty, or the budget ends. */
  async run(fault: () => Promise<void>): Promise<{ drainMs: number; overlaps: unknown[] }> {
    const deadline = this.#started + this.o.budgetMs;
    const overlaps: unknown[] = [];
    const watcher = this.#watch(overlaps, deadline);
    const publishers = Array.from({ length: this.o.publishers }, (_, p) => this.#publisher(p)).concat(fault());
    const claimers =
      this.o.claim === false ? [] : Array.from({ length: this.o.claimers }, (_, c) => this.#claimer(c, deadline));
    await Promise.all(publishers);
    this.publishMs = Date.now() - this.#started;
    this.#publishersDone = true;
    await watcher;
    this.#stop = true;
    await Promise.all(claimers);
    if (Date.now() >= deadline) this.violations.push(`did not drain within ${this.o.budgetMs} ms`);
    return { drainMs: Date.now() - this.#started, overlaps };
  }

  /** `/v1/...` of the run's queue. */
  #path(p: string): string {
    return this.o.queue === undefined ? p : `/v1/queues/${this.o.queue}${p.slice(3)}`;
  }

  /** Its databases (one per shard). */
  get #dbs(): Client[] {
    return Array.isArray(this.o.db) ? this.o.db : [this.o.db];
  }

  #client(kind: string, n: number): QueueClient {
    return createClient({
      url: this.o.url(),
      token: this.o.token,
      timeoutMs: this.o.callTimeoutMs,
      retries: 8,
      ...(this.o.queue === undefined ? {} : { queue: this.o.queue }),
      // Each call reads the current URL: the Worker may have been restarted on another port.
      fetch: (url, init) => fetch(url.replace(/^http:\/\/127\.0\.0\.1:\d+/, this.o.url()), init),
      ...(kind === "claimer" ? { autoIdempotencyKeys: n % 2 === 0 } : {}),
    });
  }

  /** A call through the client, timed and its error checked. */
  async #call<T>(what: string, f: () => Promise<T>): Promise<T | QueueHttpError> {
    const started = Date.now();
    try {
      return await f();
    } catch (e) {
      if (!(e instanceof QueueHttpError)) throw e;
      this.#sawError(what, e.code, e.status);
      return e;
    } finally {
      this.#took(what, Date.now() - started);
    }
  }

  #took(what: string, ms: number): void {
    this.maxCallMs = Math.max(this.maxCallMs, ms);
    if (ms > this.o.callTimeoutMs + 1500) this.violations.push(`${what} took ${ms} ms, past its timeout`);
  }

  #sawError(what: string, code: string, status: number | undefined): void {
    this.errors[code] = (this.errors[code] ?? 0) + 1;
    // With a status: the API's answer, which must be documented; without: the client's own (no answer).
    const documented =
      status === undefined
        ? code === "UNAVAILABLE" || code === "TIMEOUT"
        : Object.hasOwn(ERRORS, code) && ERRORS[code as ErrorCode][0] === status;
    if (!documented) this.violations.push(`${what}: undocumented error ${code} (${status})`);
  }

  /** A raw request, timed; an error answer must be the API's JSON with a documented code. */
  async #raw(
    what: string,
    path: string,
    body: unknown,
    o: { headers?: Record<string, string>; abortAfterMs?: number } = {},
  ): Promise<{ status: number; json: unknown } | "failed"> {
    const started = Date.now();
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), o.abortAfterMs ?? this.o.callTimeoutMs);
    try {
      const res = await fetch(`${this.o.url()}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${this.o.token}`, "content-type": "application/json", ...o.headers },
        body: JSON.stringify(body),
        signal: ctl.signal,
      });
      const text = await res.text();
      let json: unknown;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = undefined;
      }
      if (res.status >= 400) {
        const code = (json as { error?: { code?: unknown } } | undefined)?.error?.code;
        if (typeof code !== "string")
          this.violations.push(`${what}: ${res.status} not the API's JSON: ${text.slice(0, 120)}`);
        else this.#sawError(what, code, res.status);
      }
      return { status: res.status, json };
    } catch {
      if (o.abortAfterMs === undefined && ctl.signal.aborted)
        this.violations.push(`${what}: no answer within its timeout`);
      if (o.abortAfterMs === undefined) this.errors["raw: no answer"] = (this.errors["raw: no answer"] ?? 0) + 1;
      return "failed";
    } finally {
      clearTimeout(timer);
      if (o.abortAfterMs === undefined) this.#took(what, Date.now() - started);
    }
  }

  async #publisher(p: number): Promise<void> {
    const client = p % 2 === 0 ? this.#client("publisher", p) : undefined;
    const ranks = new Map<string, number>();
    for (let n = p; n < this.o.messages; n += this.o.publishers) {
      // Publisher p owns the groups g ≡ p (mod publishers): its order is their order.
      const g =
        p + this.o.publishers * (Math.floor(n / this.o.publishers) % Math.ceil(this.o.groups / this.o.publishers));
      const group = `g${g}`;
      const rank = ranks.get(group) ?? 0;
      ranks.set(group, rank + 1);
      const event: Event = { id: `m${n}`, group, rank };
      const seq = client ? await this.#publishByClient(client, event) : await this.#publishRaw(event);
      if (seq === undefined) {
        this.unanswered.add(event.id);
        // The rest of this group's order is unknown now; its later ranks are still checked as a sequence.
      } else {
        if (this.published.has(seq)) this.violations.push(`seq ${seq} answered to two publishes`);
        this.published.set(seq, event);
      }
      if (this.o.publishPauseMs) await sleep(this.o.publishPauseMs);
    }
  }

  async #publishByClient(client: QueueClient, e: Event): Promise<number | undefined> {
    const got = await this.#call("publish (client)", () => client.publish(e.group, e));
    if (got instanceof QueueHttpError) {
      this.clientPublishErrors.push(`${e.id}: ${got.code} ${got.message}`);
      return undefined;
    }
    return got;
  }

  /** As a raw user would: the same Idempotency-Key until an answer, while the answer says to retry. */
  async #publishRaw(e: Event): Promise<number | undefined> {
    const key = `raw-${e.id}-${this.#started}`;
    const until = Date.now() + this.o.callTimeoutMs;
    while (Date.now() < until) {
      const r = await this.#raw(
        "publish (raw)",
        this.#path("/v1/messages"),
        { messages: [{ group_id: e.group, event: e }] },
        {
          headers: { "idempotency-key": key },
        },
      );
      if (r !== "failed" && r.status === 201) return (r.json as { seqs: number[] }).seqs[0];
      if (r !== "failed" && r.status !== 503 && r.status !== 504) return undefined;
      await sleep(100 + Math.random() * 200);
    }
    return undefined;
  }

  async #claimer(c: number, deadline: number): Promise<void> {
    const client = c % 4 === 0 ? undefined : this.#client("claimer", c);
    const worker = `w${c}`;
    let idle = false;
    while (!this.#stop && Date.now() < deadline) {
      // An eighth of the claimers hang up now and then (each lease taken for them lapses: its group waits).
      if (this.o.hangUps && c % 8 === 7 && Math.random() < 0.2) {
        // A client that hangs up: mid-claim, or mid-long-poll. Whatever it was given lapses.
        this.hangUps++;
        const longPoll = Math.random() < 0.5;
        await this.#raw(
          "claim (hung up)",
          this.#path("/v1/claims"),
          { worker_id: worker, visibility: this.o.visibility, ...(longPoll ? { wait: 2 } : {}) },
          {
            abortAfterMs: longPoll ? 50 + Math.random() * 400 : Math.random() * 15,
          },
        );
        continue;
      }
      // After an empty claim, a long poll (as consume() does): idle claimers cost the database nothing.
      const wait: number = idle ? 1 : 0;
      const lease: Delivered | undefined = client
        ? await this.#claimByClient(client, worker, wait)
        : await this.#claimRaw(worker, wait);
      idle = lease === undefined;
      if (lease === undefined) {
        await sleep(Math.random() * 20);
        continue;
      }
      const claimAnswered = performance.now();
      this.deliveries.set(lease.seq, (this.deliveries.get(lease.seq) ?? 0) + 1);
      if (this.acked.has(lease.seq)) this.violations.push(`seq ${lease.seq} delivered again after its ack`);
      // No claim answers with a lease long lapsed (held up on its way while the lease ran out). A
      // second of grace: an answer the faults delayed may land on a loaded machine just after.
      if (lease.expiresAt * 1000 + 1000 < Date.now())
        this.violations.push(`seq ${lease.seq} answered with a lapsed lease`);
      await sleep(Math.random() * 10);
      const ackSent = performance.now();
      const ok = client
        ? !((await this.#call("ack (client)", () => client.ack(lease.id))) instanceof QueueHttpError)
        : await this.#ackRaw(lease.id);
      if (!ok) continue;
      if (this.acked.has(lease.seq)) this.violations.push(`seq ${lease.seq} acked twice`);
      this.acked.set(lease.seq, { ...lease.event, seq: lease.seq, claimAnswered, ackSent });
      this.ackTimes.push({ at: Date.now(), seq: lease.seq });
    }
  }

  async #claimByClient(client: QueueClient, worker: string, wait: number): Promise<Delivered | undefined> {
    const got = await this.#call("claim (client)", () =>
      client.claim<Event>(worker, this.o.visibility, undefined, { wait }),
    );
    if (got instanceof QueueHttpError || got === null) return undefined;
    return got as Lease<Event>;
  }

  async #claimRaw(worker: string, wait: number): Promise<Delivered | undefined> {
    const body = { worker_id: worker, visibility: this.o.visibility, ...(wait > 0 ? { wait } : {}) };
    const r = await this.#raw("claim (raw)", this.#path("/v1/claims"), body);
    if (r === "failed" || r.status !== 200) return undefined;
    const l = r.json as { lease_id: string; seq: number; event: Event; expires_at: number };
    return { id: l.lease_id, seq: l.seq, event: l.event, expiresAt: l.expires_at };
  }

  async #ackRaw(leaseId: string): Promise<boolean> {
    let unknown = false;
    for (let attempt = 0; attempt < 10; attempt++) {
      const r = await this.#raw("ack (raw)", this.#path(`/v1/leases/${encodeURIComponent(leaseId)}/ack`), undefined);
      if (r !== "failed" && r.status === 204) return true;
      // Sent again after an attempt whose answer was lost: the message is gone, acked by that attempt
      // (nothing is dead-lettered here; the empty queue at the end confirms it).
      if (r !== "failed" && r.status === 404 && unknown) return true;
      if (r !== "failed" && r.status !== 503 && r.status !== 504) return false;
      unknown = true;
      await sleep(100 + Math.random() * 200);
    }
    return false;
  }

  /** Until drained: no group with two live leases, polled on sqld itself (an outage of it skips a poll). */
  async #watch(overlaps: unknown[], deadline: number): Promise<void> {
    while (Date.now() < deadline) {
      try {
        for (const db of this.#dbs) {
          const rs = await db.execute(`SELECT group_id, count(*) AS live FROM messages
          WHERE locked_by IS NOT NULL AND locked_by <> '__parked__' AND lock_expiry >= unixepoch('subsec')
          GROUP BY group_id HAVING count(*) > 1`);
          overlaps.push(...rs.rows.map((r) => ({ ...r })));
        }
        if (this.#publishersDone && [...this.published.keys()].every((s) => this.acked.has(s))) {
          let left = 0;
          for (const db of this.#dbs)
            left += Number((await db.execute("SELECT count(*) AS n FROM messages")).rows[0]?.n);
          if (left === 0) return;
        }
      } catch {
        // sqld is down: the next poll
      }
      await sleep(100);
    }
  }

  /** A push delivery, as the consumer answered it: `ok` when it took it (2xx), which acks it. */
  pushed(seq: number, event: Event, receivedAt: number, ok: boolean): void {
    this.deliveries.set(seq, (this.deliveries.get(seq) ?? 0) + 1);
    if (this.acked.has(seq)) this.violations.push(`seq ${seq} pushed again after it was taken`);
    if (ok) this.acked.set(seq, { ...event, seq, claimAnswered: receivedAt, ackSent: performance.now() });
  }

  /** What must hold after the run: nothing lost or stored twice, FIFO and one lease per group. */
  check(): string[] {
    const out = [...this.violations];
    for (const [seq, e] of this.published) if (!this.acked.has(seq)) out.push(`lost: seq ${seq} (${e.id})`);
    const ids = new Map<string, number>();
    for (const a of this.acked.values()) ids.set(a.id, (ids.get(a.id) ?? 0) + 1);
    for (const [id, n] of ids) if (n > 1) out.push(`${id} stored ${n} times`);
    const byGroup = new Map<string, Acked[]>();
    for (const a of this.acked.values()) byGroup.set(a.group, [...(byGroup.get(a.group) ?? []), a]);
    for (const [g, list] of byGroup) {
      list.sort((a, b) => a.claimAnswered - b.claimAnswered);
      list.forEach((cur, i) => {
        const prev = list[i - 1];
        if (prev === undefined) return;
        if (cur.rank <= prev.rank || cur.seq <= prev.seq)
          out.push(`group ${g}: FIFO broken at rank ${cur.rank} after ${prev.rank}`);
        if (cur.claimAnswered <= prev.ackSent)
          out.push(`group ${g}: seq ${cur.seq} leased while seq ${prev.seq} was live`);
      });
    }
    return out;
  }

  /** The figures a run prints. */
  figures(): Record<string, unknown> {
    const redelivered = [...this.deliveries.values()].filter((n) => n > 1).length;
    return {
      messages: this.o.messages,
      publishedAnswered: this.published.size,
      publishUnanswered: this.unanswered.size,
      acked: this.acked.size,
      redelivered,
      hangUps: this.hangUps,
      errors: this.errors,
      maxCallMs: this.maxCallMs,
      publishMs: this.publishMs,
    };
  }
}
