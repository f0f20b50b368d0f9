/**
 * LibsqlTransport: the queue of the spec (`messages` + `groups`, leases, round-robin, priority floor)
 * over libSQL, so that it runs the same over a local file, an HTTP primary (sqld, Turso) or an
 * embedded replica, in Node or in a Worker. Every operation is one write batch: one HTTP request.
 *
 * This module is the API: it checks arguments and runs the plans of ./sql on a connection
 * (./connect.ts: options, clients, the write engine, the schema). What only the Worker's writer
 * needs (hearing of writes, subscriptions) is in ./internals.ts.
 */
import { DEAD_LETTER_PAGE, GROUPS_PAGE, leaseId, PEEK_PAGE, PURGE_CHUNK, scheduleNameProblem } from "../rules.js";
import { type ClientOptions, type Connection, connect, type TransportOptions, wrapClient } from "./connect.js";
import type { WriteSpec } from "./engine.js";
import { invalid, QueueError, toQueueError } from "./errors.js";
import { attach, type Internals } from "./internals.js";
import { randomToken } from "./random.js";
import { checkSchedule, runSchedules, type ScheduleRun, scheduleOf, tickAfter } from "./schedules.js";
import { checkSettlements, outcomeOf } from "./settle.js";
import { giveSlot, takeSlot } from "./slots.js";
import * as sql from "./sql/index.js";
import { consumed, traced, traceparentOf } from "./telemetry.js";
import type {
  DeadLetter,
  GroupFlow,
  GroupFlowInput,
  GroupInfo,
  Lease,
  NackResult,
  PublishInput,
  PublishOptions,
  PublishResult,
  QueuedMessage,
  QueueFlow,
  QueueFlowInput,
  QueueStats,
  Schedule,
  ScheduleInput,
  Settlement,
  SettleOutcome,
} from "./types.js";
import {
  type CheckedPublish,
  checkClaim,
  checkCount,
  checkDelay,
  checkGroupFlow,
  checkId,
  checkInteger,
  checkObject,
  checkPositiveSeconds,
  checkPublish,
  checkPublishMany,
  checkQueueFlow,
  checkSeq,
} from "./validate.js";

export type { ClientOptions, TransportOptions } from "./connect.js";

export class LibsqlTransport {
  readonly #conn: Connection;
  readonly #internals: Internals;
  /** Flow settings were in force at the last write that could tell (`#asFlowIs`). */
  #flow = false;

  private constructor(conn: Connection) {
    this.#conn = conn;
    this.#internals = attach(this, conn);
    this.#internals.publish = (checked, name) => this.#publishChecked(checked, name);
  }

  /**
   * Opens `database`: a `file:` path (or a bare path), `:memory:`, an `http(s)://` or `libsql://` URL.
   * With `syncUrl` the file is an embedded replica of that primary. Ensures the schema.
   */
  static async create(database: string, options: TransportOptions = {}): Promise<LibsqlTransport> {
    return new LibsqlTransport(await connect(database, options));
  }

  /**
   * Wraps an existing `@libsql/client` client; the caller closes it. See `ClientOptions` for `http`.
   */
  static async fromClient(
    client: Parameters<typeof wrapClient>[0],
    options: ClientOptions = {},
  ): Promise<LibsqlTransport> {
    return new LibsqlTransport(await wrapClient(client, options));
  }

  /** The queue's name in traces and metrics (the `name` option). */
  get name(): string {
    return this.#conn.settings.name;
  }

  // -------------------------------------------------------------------------------------------
  // publish

  /**
   * Appends `event` to `groupId`; returns its seq. The first publish of a group sets its priority.
   * With `singletonKey`, see `publishSingleton` (this answers the seq alone).
   */
  async publish(groupId: string, event: unknown, priority = 0, options: PublishOptions = {}): Promise<number> {
    return (await this.publishSingleton(groupId, event, priority, options)).seq;
  }

  /**
   * A publish that says what it did: with `options.singletonKey`, nothing is stored while a message
   * with that key waits unclaimed in the queue: the answer is that message's seq, `deduplicated`
   * (and with `options.replace`, its event is replaced by this one). Once it is claimed, the next
   * publish with the key is stored anew. Exact under concurrent publishers (a unique index decides).
   */
  async publishSingleton(
    groupId: string,
    event: unknown,
    priority = 0,
    options: PublishOptions = {},
  ): Promise<PublishResult> {
    const checked = checkPublish(groupId, event, priority, options);
    const stored = await this.#publishChecked(checked, "publish");
    const deduplicated = stored.deduplicated === true;
    return {
      seq: stored.seqs[0] as number,
      deduplicated,
      replaced: deduplicated && checked.singleton?.replace === true,
    };
  }

  /** Publishes all of `messages` in one batch, all or nothing; returns their seqs in order. */
  async publishMany(messages: PublishInput[], options: PublishOptions = {}): Promise<number[]> {
    return (await this.#publishChecked(checkPublishMany(messages, options), "publishMany")).seqs;
  }

  /**
   * Records `key` for the request whose fingerprint is `fingerprint` (src/core/sql/publish.ts
   * `fingerprintOf`), unless it is recorded already: answers the record's token, under which that
   * request's messages are stored. IDEMPOTENCY_CONFLICT when the key was used for another request.
   * What a sharded queue asks of the shard that decides a key (the key's home, ./sharded.ts).
   */
  async reserveKey(key: string, fingerprint: string): Promise<string> {
    const k = checkId("key", key);
    if (typeof fingerprint !== "string" || !/^[0-9a-f]{64}$/.test(fingerprint)) {
      throw invalid("fingerprint", "must be a SHA-256 in hex");
    }
    const plan = sql.reserveKeyPlan({
      key: k,
      token: randomToken(),
      fingerprint,
      ttl: this.#conn.settings.idempotencyWindow,
    });
    return this.#write(plan, true);
  }

  /** The messages, in the publish's span; each carries its trace context (the caller's, or this span's). */
  #publishChecked(c: CheckedPublish, name: string): Promise<sql.Published> {
    return traced("send", { name, destination: this.#conn.settings.name, count: c.rows.length }, async (span) => {
      const traceparent = c.traceparent ?? traceparentOf(span);
      const rows = traceparent === undefined ? c.rows : c.rows.map((r) => ({ ...r, traceparent }));
      const stored = await this.#storeRows(rows, c.idempotencyKey, c.singleton);
      if (stored.seqs.length === 1) span.setAttribute("messaging.message.id", String(stored.seqs[0]));
      if (stored.deduplicated !== true) this.#internals.counted({ kind: "published", count: stored.seqs.length });
      return stored;
    });
  }

  /**
   * A publish or a claim, written as flow settings were at the last write that could tell; where
   * they turn out to be in force now, it failed, changing nothing, and goes again as they ask.
   */
  async #asFlowIs<T>(write: (flow: boolean) => Promise<T>): Promise<T> {
    const flow = this.#flow;
    try {
      return await write(flow);
    } catch (e) {
      if (flow || !sql.flowTurnedOn(e)) throw e;
      this.#flow = true;
      return write(true);
    }
  }

  /** Stores the rows (where flow settings are in force, the batch also wakes the groups it fills). */
  async #storeRows(
    rows: sql.PublishRow[],
    userKey: string | undefined,
    singleton?: sql.Singleton,
  ): Promise<sql.Published> {
    const stored = await this.#asFlowIs((flow) => this.#storeOnce(rows, userKey, { singleton, flow }));
    this.#flow = stored.flow;
    return stored;
  }

  async #storeOnce(
    rows: sql.PublishRow[],
    userKey: string | undefined,
    o: { singleton: sql.Singleton | undefined; flow: boolean },
  ): Promise<sql.Published> {
    if (userKey !== undefined) {
      const key = {
        kind: "user",
        key: userKey,
        token: randomToken(),
        fingerprint: await sql.fingerprintOf(rows, o.singleton),
        ttl: this.#conn.settings.idempotencyWindow,
      } as const;
      return this.#write(sql.publishPlan(rows, key, o), true, { frees: published });
    }
    if (!this.#conn.autoKeys)
      return this.#write(sql.publishPlan(rows, { kind: "none" }, o), false, { frees: published });
    // Over the network a request's answer can be lost after it applied (./slots.ts).
    const slot = takeSlot();
    let settled = false;
    try {
      const key = { kind: "slot", slot: slot.name, token: randomToken(), collect: slot.collect } as const;
      const stored = await this.#write(sql.publishPlan(rows, key, o), true, { frees: published });
      settled = true;
      return stored;
    } catch (e) {
      settled = !(e instanceof QueueError && e.outcomeUnknown);
      throw e;
    } finally {
      giveSlot(slot, settled);
    }
  }

  // -------------------------------------------------------------------------------------------
  // claim

  /**
   * Leases the oldest message of the oldest-claimed deliverable group (never-claimed groups first),
   * skipping groups with anything in flight and groups below `minPriority`. One batch.
   */
  async claim<E = unknown>(workerId: string, visibility: number, minPriority = 0): Promise<Lease<E> | null> {
    const [lease] = await this.claimMany<E>(workerId, visibility, 1, minPriority);
    return lease ?? null;
  }

  /** Up to `n` leases in distinct groups, in the order `n` single claims would give. One batch. */
  async claimMany<E = unknown>(workerId: string, visibility: number, n: number, minPriority = 0): Promise<Lease<E>[]> {
    const c = checkClaim(workerId, visibility, n, minPriority);
    const destination = this.#conn.settings.name;
    return traced("receive", { name: "claim", destination }, async (span) => {
      const leases = await this.#claim<E>(c.workerId, c.visibility, c.n, c.minPriority);
      span.setAttribute("messaging.batch.message_count", leases.length);
      consumed(destination, leases.length, "claim");
      return leases;
    });
  }

  async #claim<E>(worker: string, vis: number, n: number, min: number): Promise<Lease<E>[]> {
    const leases: Lease<E>[] = [];
    let deadLettered = 0;
    // A message past its attempts is dead-lettered by the claim that meets it; claim again for the
    // slots it took, so that a poison message never hides the rest of the queue.
    for (let round = 0; round < 16 && leases.length < n; round++) {
      const got = await this.#asFlowIs((flow) =>
        this.#write(
          sql.claimPlan<E>({
            token: randomToken(),
            worker,
            visibility: vis,
            n: n - leases.length,
            minPriority: min,
            maxAttempts: this.#maxAttempts,
            marker: -1 - Math.floor(Math.random() * 2 ** 52),
            flow,
          }),
          // A resend answers with the leases the first request took, if it applied (sql/claim.ts).
          true,
          {
            // A consumer with a lease comes back to ack it; one that found nothing waits a while.
            comesBack: (got) => got.leases.length > 0,
            // After the batch's other writes: it sees what they publish and free.
            last: true,
          },
        ),
      );
      // Only a claim that took something says whether settings are in force.
      if (got.leases.length > 0) this.#flow = got.flow;
      leases.push(...got.leases);
      deadLettered += got.deadLettered;
      // One lease per group per claim: where a group may hold several, claim again while that gives more.
      if (got.deadLettered === 0 && !(got.flow && got.leases.length > 0)) break;
    }
    if (leases.length > 0 || deadLettered > 0) {
      this.#internals.counted({ kind: "claimed", count: leases.length, deadLettered });
    }
    return leases;
  }

  // -------------------------------------------------------------------------------------------
  // ack / nack / release / extend

  /** Deletes the message of a lease that is still yours (live, or lapsed and not re-claimed). */
  ack(lease: Lease | string): Promise<void> {
    return this.#ack(lease, true);
  }

  /** `mayWait`: it may wait for another write's batch (`rideMs`). */
  async #ack(lease: Lease | string, mayWait: boolean): Promise<void> {
    const ref = leaseRef(lease);
    const heldSeconds = await this.#settle("ack", ref, () =>
      this.#write(sql.ackPlan(ref), true, {
        comesBack: always,
        frees: () => ({ change: "ack", seq: ref.seq }),
        mayWait,
      }),
    );
    this.#internals.counted({ kind: "acked", heldSeconds });
  }

  /** Gives a lease back: `delay` 0 frees it now; `delay` > 0 parks it (and blocks its group) that long. */
  nack(lease: Lease | string, delay = 0): Promise<NackResult> {
    return this.#nack(lease, delay, true);
  }

  async #nack(lease: Lease | string, delay: number, mayWait: boolean): Promise<NackResult> {
    const ref = leaseRef(lease);
    const plan = sql.nackPlan(ref, checkDelay("delay", delay), this.#maxAttempts);
    const result = await this.#settle("nack", ref, () =>
      this.#write(plan, true, { comesBack: always, frees: () => ({ change: "nack", seq: ref.seq }), mayWait }),
    );
    this.#internals.counted({ kind: "nacked", deadLettered: result.deadLettered });
    return result;
  }

  /**
   * Gives back a lease that is still yours as if it had not been delivered: the message is
   * claimable again at once and its attempt is not counted. For a lease its consumer will not work
   * on (it is stopping, or went away before it got it).
   */
  release(lease: Lease | string): Promise<void> {
    return this.#release(lease, true);
  }

  async #release(lease: Lease | string, mayWait: boolean): Promise<void> {
    const ref = leaseRef(lease);
    await this.#settle("release", ref, () =>
      this.#write(sql.releasePlan(ref), true, { frees: () => ({ change: "release", seq: ref.seq }), mayWait }),
    );
    this.#internals.counted({ kind: "released" });
  }

  /**
   * Acks, nacks and releases many leases (up to MAX_SETTLE_BATCH) at once: each is fenced as its own
   * call is, and answers its own outcome, in the order given. They leave in the same tick, so the
   * write path carries them in as few batches as its statement limit allows, without waiting for
   * another write's batch (`rideMs`): a list is what a consumer that stops, or found nothing more to
   * claim with, waits on. A list with an entry that is not valid is refused whole, before anything
   * is sent.
   */
  async settle(settlements: Settlement[]): Promise<SettleOutcome[]> {
    const list = checkSettlements(settlements);
    return Promise.all(
      list.map((s) =>
        outcomeOf(
          s,
          s.action === "ack"
            ? this.#ack(s.id, false)
            : s.action === "nack"
              ? this.#nack(s.id, s.delay, false)
              : this.#release(s.id, false),
        ),
      ),
    );
  }

  /**
   * Heartbeat: moves a lease that is still yours to expire `visibility` seconds from now. Answers the
   * lease with its new expiry, or, given a lease id, `{ id, expiresAt }`.
   */
  extend<E>(lease: Lease<E>, visibility: number): Promise<Lease<E>>;
  extend(leaseId: string, visibility: number): Promise<{ id: string; expiresAt: number }>;
  async extend<E>(lease: Lease<E> | string, visibility: number): Promise<Lease<E> | { id: string; expiresAt: number }> {
    const ref = leaseRef(lease);
    const expiresAt = await this.#write(sql.extendPlan(ref, checkPositiveSeconds("visibility", visibility)), true);
    const id = leaseId.of(ref.seq, ref.token);
    this.#internals.extended(id, ref.seq, expiresAt);
    return typeof lease === "string" ? { id, expiresAt } : { ...lease, expiresAt };
  }

  // -------------------------------------------------------------------------------------------
  // flow control

  /** The queue's flow settings: each group's concurrency and rate (unless it has its own), and its pause. */
  async queueSettings(): Promise<QueueFlow> {
    return this.#conn.readPlan(sql.queueSettingsPlan());
  }

  /**
   * Changes the queue's flow settings (what is given; the rest stays). A change of concurrency or
   * rate reads every group once, to put each in the state it now calls for.
   */
  async setQueue(settings: QueueFlowInput): Promise<QueueFlow> {
    const patch = checkQueueFlow("settings", settings);
    const after = await this.#write(sql.setQueueSettingsPlan(patch), true, { frees: settingsChanged });
    return after;
  }

  /** What applies to a group: its own settings, the queue's, and whether its rate holds it now. */
  async groupSettings(groupId: string): Promise<GroupFlow> {
    return this.#conn.readPlan(sql.groupSettingsPlan(checkId("groupId", groupId)));
  }

  /** Sets a group's own flow settings (what is given; the rest stays), over the queue's. */
  async setGroup(groupId: string, settings: GroupFlowInput): Promise<GroupFlow> {
    const group = checkId("groupId", groupId);
    const patch = checkGroupFlow("settings", settings);
    const after = await this.#write(sql.setGroupSettingsPlan(group, patch), true, { frees: settingsChanged });
    return after;
  }

  /** Drops a group's own flow settings: the queue's apply to it again. */
  async resetGroup(groupId: string): Promise<GroupFlow> {
    const after = await this.#write(sql.resetGroupSettingsPlan(checkId("groupId", groupId)), true, {
      frees: settingsChanged,
    });
    return after;
  }

  // -------------------------------------------------------------------------------------------
  // schedules

  /**
   * Makes or replaces the schedule `name`: `input.event` published into `input.groupId` on each tick
   * of `input.cron` (five fields, UTC or `input.timeZone`) or every `input.every` seconds. Something
   * must fire it: the Worker's writer does on its alarm; without it, call `runSchedules()` from a
   * Cron Trigger or a timer.
   */
  async putSchedule(name: string, input: ScheduleInput): Promise<Schedule & { created: boolean }> {
    const s = checkSchedule(name, input);
    const now = await this.#conn.readPlan(sql.clockPlan());
    const nextAt = s.paused ? null : tickAfter(s, now);
    const { schedule, created } = await this.#write(sql.putSchedulePlan({ ...s, nextAt }), true);
    this.#internals.schedulesChanged();
    return { ...scheduleOf(schedule), created };
  }

  /** Every schedule, by name, with its next tick. */
  async schedules(): Promise<Schedule[]> {
    return (await this.#conn.readPlan(sql.listSchedulesPlan())).map(scheduleOf);
  }

  /** One schedule, or null. */
  async schedule(name: string): Promise<Schedule | null> {
    const row = await this.#conn.readPlan(sql.getSchedulePlan(checkScheduleName(name)));
    return row === undefined ? null : scheduleOf(row);
  }

  /** Deletes a schedule; false when there was none. */
  async deleteSchedule(name: string): Promise<boolean> {
    const deleted = await this.#write(sql.deleteSchedulePlan(checkScheduleName(name)), true);
    this.#internals.schedulesChanged();
    return deleted;
  }

  /**
   * Publishes each due schedule's latest tick, once however many call this at the same time, and
   * answers how many ticks it published and when the next one is due (epoch seconds, the
   * database's clock): call it from a Cron Trigger or a timer when the Worker does not run it.
   */
  async runSchedules(): Promise<ScheduleRun> {
    const run = await runSchedules({
      readPlan: (p) => this.#conn.readPlan(p),
      writePlan: (p) => this.#write(p, true),
      publish: (g, e, p, o) => this.publish(g, e, p, o),
    });
    if (run.published > 0) this.#internals.counted({ kind: "scheduled", count: run.published });
    return run;
  }

  // -------------------------------------------------------------------------------------------
  // dead letters, stats, lifecycle

  /** A page of dead letters in seq order (pass the last one's seq as `afterSeq` for the next). */
  async deadLetters<E = unknown>(
    options: { groupId?: string; afterSeq?: number; limit?: number } = {},
  ): Promise<DeadLetter<E>[]> {
    checkObject("options", options);
    const groupId = options.groupId === undefined ? null : checkId("groupId", options.groupId);
    const after = checkInteger("afterSeq", options.afterSeq ?? 0, 0, Number.MAX_SAFE_INTEGER);
    const limit = checkCount("limit", options.limit ?? DEAD_LETTER_PAGE.default, DEAD_LETTER_PAGE.max);
    return this.#conn.readPlan(sql.deadLettersPlan<E>(groupId, after, limit));
  }

  /** Puts a dead letter back at the tail of its group, with a fresh attempt count; returns its new seq. */
  async redrive(seq: number): Promise<number> {
    return this.#write(sql.redrivePlan(checkSeq("seq", seq)), false, { frees: () => ({ change: "redrive" }) });
  }

  /** Drops a dead letter for good; false when there was none. */
  async deleteDeadLetter(seq: number): Promise<boolean> {
    return this.#write(sql.deleteDeadLetterPlan(checkSeq("seq", seq)), true);
  }

  /** Where every message is; reads a few rows per page of the tables and per live lease, never the whole queue. */
  async stats(): Promise<QueueStats> {
    return this.#conn.readPlan(sql.statsPlan());
  }

  /**
   * Groups worth watching: those holding a lease, a park or a delayed message (the latest to end
   * first), then the next ones in round-robin order; each with its messages counted up to 1,000.
   * Reads at most about `limit` × 1,000 rows, whatever the depth.
   */
  async groups(options: { limit?: number } = {}): Promise<GroupInfo[]> {
    checkObject("options", options);
    return this.#conn.readPlan(
      sql.groupsPlan(checkCount("limit", options.limit ?? GROUPS_PAGE.default, GROUPS_PAGE.max)),
    );
  }

  /**
   * The group's next messages in the order they will be delivered, left where they are (nothing is
   * claimed): `limit` rows read.
   */
  async peek<E = unknown>(groupId: string, options: { limit?: number } = {}): Promise<QueuedMessage<E>[]> {
    checkObject("options", options);
    const group = checkId("groupId", groupId);
    const limit = checkCount("limit", options.limit ?? PEEK_PAGE.default, PEEK_PAGE.max);
    return this.#conn.readPlan(sql.peekPlan<E>(group, limit));
  }

  /**
   * Deletes the group's messages, the one in flight included (its lease's ack then answers
   * LEASE_NOT_FOUND), in writes of PURGE_CHUNK; a message published meanwhile is kept. Its dead
   * letters stay. Answers how many were deleted.
   */
  async purge(groupId: string): Promise<number> {
    const group = checkId("groupId", groupId);
    let upTo: number | null = null;
    let purged = 0;
    for (;;) {
      const got: { deleted: number; upTo: number } = await this.#write(sql.purgePlan(group, upTo, PURGE_CHUNK), true, {
        frees: (chunk) => (chunk.deleted > 0 ? { change: "purge" } : undefined),
      });
      upTo = got.upTo;
      purged += got.deleted;
      if (got.deleted < PURGE_CHUNK) break;
    }
    return purged;
  }

  /**
   * The earliest moment something held by time (a lease, a park, a delayed message) may become
   * deliverable, in epoch seconds on the database's clock, or null; with the database's now.
   */
  async nextDueAt(): Promise<{ next: number | null; now: number }> {
    return this.#conn.readPlan(sql.nextDuePlan());
  }

  /** Pulls the primary's latest frames into an embedded replica (no-op otherwise). */
  async sync(): Promise<void> {
    try {
      await this.#conn.client.sync();
    } catch (e) {
      throw toQueueError(e);
    }
  }

  close(): void {
    this.#conn.close();
  }

  get #maxAttempts(): number {
    const max = this.#conn.settings.maxAttempts;
    return Number.isFinite(max) ? max : sql.UNLIMITED;
  }

  /** A settlement (ack, nack, release) in its span. */
  #settle<T>(name: string, ref: sql.LeaseRef, write: () => Promise<T>): Promise<T> {
    const attributes = { "messaging.message.id": String(ref.seq) };
    return traced("settle", { name, destination: this.#conn.settings.name, attributes }, write);
  }

  /** `more`: what a write says beyond its plan (WriteSpec: who comes back, what it frees, last in its batch, may wait). */
  #write<T>(
    plan: sql.Plan<T>,
    idempotent: boolean,
    more?: Pick<WriteSpec<T>, "comesBack" | "frees" | "last" | "mayWait">,
  ): Promise<T> {
    return this.#conn.writes.submit({ ...plan, idempotent, ...more });
  }
}

/** A consumer that acked or nacked claims its next message. */
const always = () => true;

/** What a change of flow settings may free: groups a pause, a rate or a concurrency held. */
const settingsChanged = () => ({ change: "settings" }) as const;

/** What a publish frees: its messages. */
const published = () => ({ change: "publish" }) as const;

/** Parses a lease or lease id; refuses anything that is not one of ours. */
function leaseRef(lease: Lease | string): sql.LeaseRef {
  const id = typeof lease === "string" ? lease : typeof lease === "object" && lease !== null ? lease.id : undefined;
  const ref = leaseId.parse(id);
  if (!ref) throw invalid("lease", "is not a lease id of this queue");
  return ref;
}

function checkScheduleName(name: unknown): string {
  const problem = scheduleNameProblem(name);
  if (problem !== undefined) throw invalid("name", problem);
  return name as string;
}
