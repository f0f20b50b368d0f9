/**
 * One queue over several databases (shards), like SQS FIFO's partitions: a group lives on one shard,
 * chosen by a stable hash of its id (src/rules.ts `shardOf`), so FIFO and one message in flight per
 * group hold exactly as on one database, while each shard has its own primary, its own writer and
 * its own batch in flight. `ShardedQueue` has LibsqlTransport's API (so `consume()` runs on it) over
 * anything with that API: LibsqlTransports in the library, the shards' writers in the Worker.
 *
 * - Arguments are checked (and events encoded) once, here, with LibsqlTransport's own checks
 *   (./validate.ts); a transport shard takes what was checked as it is.
 * - Each shard knows its place (./shard.ts `placeShards`): over databases listed in another order,
 *   one more or fewer, or one twice, every call fails with SHARD_MISMATCH.
 * - Seqs and lease ids name their shard (`shardedSeq`): an ack, nack, release or extend, a redrive
 *   or a delete goes to that shard alone, and its errors name the queue's seq.
 * - A publish goes to its group's shard; a batch is split by shard and sent to each at once (all or
 *   nothing per shard). An idempotency key is decided by the shard the key hashes to (its home): a
 *   batch that lies on the home alone is stored there under the key, as on one database; any other
 *   is recorded there first (the whole request's fingerprint: `reserveKey`), then stored on its
 *   groups' shards under the record's token. So a key is exact across the queue: the same request
 *   sent again stores what is missing and answers every seq; another request under it is refused
 *   (IDEMPOTENCY_CONFLICT) before anything of it is stored.
 * - A claim for `n` leases splits `n` over the shards, starting one shard further each time (no
 *   shard is starved), all at once; if they all come back empty and some shards were not asked (`n`
 *   is less than the shard count), those are asked one at a time until one has something.
 *   Priorities and round-robin hold within what each shard offers. A long poll (where the shards can
 *   wait) asks the others through its waits instead: it waits on every shard at once and takes the
 *   first that answers with leases; what another shard leases meanwhile is released. `claimManyOn`
 *   claims on one shard alone: consume() claims each shard on its own with it, rather than moving
 *   the shards in lockstep.
 * - A shard that cannot be reached holds back no other (./shard.ts `ShardOutages`): calls across the
 *   shards (claims, long polls, stats, groups) are served by the others and leave it out for a
 *   cool-down; stats list it in `unreachableShards`.
 * - stats, groups and dead letters are read from every shard and added up or merged.
 */
import { DEAD_LETTER_PAGE, GROUPS_PAGE, leaseId, MAX_SHARDS, shardedSeq, shardOf } from "../rules.js";
import { invalid, namingSeq, noDeadLetter, QueueError, toQueueError } from "./errors.js";
import { maybeInternalsOf } from "./internals.js";
import { type CheckedSettlement, checkSettlements, settleAcross } from "./settle.js";
import {
  addHistories,
  deadLettersAcross,
  earliestDue,
  firstToAnswer,
  flowOf,
  mergeGroups,
  OUTAGE_CODES,
  outage,
  PROBE_MS,
  placeShards,
  SHARD_METHODS,
  type Shard,
  ShardOutages,
  shardLease,
  statsAcross,
  subscriptionsOf,
} from "./shard.js";
import { fingerprintOf, type Published } from "./sql/publish.js";
import type { StoredSubscription } from "./subscriptions.js";
import { LibsqlTransport, type TransportOptions } from "./transport.js";
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
  QueueHistory,
  QueueStats,
  Schedule,
  ScheduleInput,
  Settlement,
  SettleOutcome,
  SubscriptionInput,
  UnreachableShard,
} from "./types.js";
import {
  type CheckedPublish,
  checkClaim,
  checkCount,
  checkId,
  checkInteger,
  checkObject,
  checkPositiveSeconds,
  checkPublish,
  checkPublishMany,
  checkSeq,
} from "./validate.js";

export type { Shard } from "./shard.js";
export { ShardOutages } from "./shard.js";

export interface ShardedQueueOptions {
  /**
   * Where the first claim starts (default 0). Something that builds a ShardedQueue per request (the
   * Worker's edge) passes a turn of its own, so that no shard is always asked first.
   */
  turn?: number;
  /** Which shards were found down (default: this queue's own); kept across queues built per request. */
  outages?: ShardOutages;
  /** The queue's name, stored in each shard's place on first use (default: a random one). */
  queue?: string;
}

/** The shards a call across them asks, and those it leaves out (found down). */
type Asking = { asking: number[]; left: UnreachableShard[] };

/** Something that settles leases as its own ids name them (a shard, through #on). */
type Settler = { settle(s: Settlement[]): Promise<SettleOutcome[]> };

/** A part of a publish: the messages (by index) that go to one shard. */
type Parts = Map<number, number[]>;

export class ShardedQueue {
  readonly #shards: Shard[];
  /** Where the next claim starts. */
  #turn: number;
  readonly #outages: ShardOutages;
  readonly #queue: string | undefined;
  /** The shards' places are known to be right (./shard.ts `placeShards`); until then, the check under way. */
  #placed: boolean;
  #placing: Promise<void> | undefined;
  /** Each shard's settle, as one object per shard (settleAcross groups leases by it). */
  readonly #settlers: Settler[];

  constructor(shards: Shard[], options: ShardedQueueOptions = {}) {
    checkShards("shards", shards);
    checkObject("options", options);
    this.#shards = [...shards];
    this.#turn = options.turn ?? 0;
    this.#outages = options.outages ?? new ShardOutages();
    this.#queue = options.queue;
    this.#placed = shards.length <= 1 || !shards.some((s) => maybeInternalsOf(s) !== undefined);
    this.#settlers = this.#shards.map((_, i) => ({ settle: (s) => this.#on(i, (shard) => shard.settle(s)) }));
    // Checked at once; a call meanwhile waits for it (and one after a refusal fails with it).
    this.#place()?.catch(() => {});
  }

  /**
   * A sharded queue over these databases (in this order: a group's shard is its index), each opened
   * as `LibsqlTransport.create` would. Refused with SHARD_MISMATCH, naming `databases[i]`, where a
   * database was stored as another shard of its queue (another order, one more or fewer, one twice).
   */
  static async open(databases: string[], options: TransportOptions = {}): Promise<ShardedQueue> {
    if (!Array.isArray(databases) || databases.length < 1 || databases.length > MAX_SHARDS) {
      throw invalid("databases", `must be 1 to ${MAX_SHARDS} database URLs or paths`);
    }
    const opened = await Promise.allSettled(databases.map((d) => LibsqlTransport.create(d, options)));
    const transports = opened.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    try {
      const failed = opened.find((r) => r.status === "rejected");
      if (failed) throw (failed as PromiseRejectedResult).reason;
      await placeShards(transports, "databases", options.name);
      return new ShardedQueue(transports, { queue: options.name });
    } catch (e) {
      for (const t of transports) t.close();
      throw e;
    }
  }

  get shards(): number {
    return this.#shards.length;
  }

  /** The shard a group's messages live on. */
  shardOf(groupId: string): number {
    return shardOf(checkId("groupId", groupId), this.#shards.length);
  }

  /** Set when every shard's claims can wait (the Worker's shards): consume() long-polls then. */
  get maxClaimWait(): number | undefined {
    const waits = this.#shards.map((s) => s.maxClaimWait);
    return waits.every((w): w is number => typeof w === "number" && w > 0) ? Math.min(...waits) : undefined;
  }

  // -------------------------------------------------------------------------------------------
  // publish

  async publish(groupId: string, event: unknown, priority = 0, options: PublishOptions = {}): Promise<number> {
    return (await this.publishSingleton(groupId, event, priority, options)).seq;
  }

  /** As LibsqlTransport's, on the group's shard (a singleton key is kept per group's shard). */
  async publishSingleton(
    groupId: string,
    event: unknown,
    priority = 0,
    options: PublishOptions = {},
  ): Promise<PublishResult> {
    const checked = checkPublish(groupId, event, priority, options);
    const stored = await this.#publish(checked, [event], "publish");
    const deduplicated = stored.deduplicated === true;
    return {
      seq: stored.seqs[0] as number,
      deduplicated,
      replaced: deduplicated && checked.singleton?.replace === true,
    };
  }

  /** All of `messages`, split by shard; all or nothing on each shard (see the module's comment). */
  async publishMany(messages: PublishInput[], options: PublishOptions = {}): Promise<number[]> {
    const checked = checkPublishMany(messages, options);
    return (
      await this.#publish(
        checked,
        messages.map((m) => m.event),
        "publishMany",
      )
    ).seqs;
  }

  /** `events`: the messages' events as given (for a shard that is not a transport, which encodes them itself). */
  async #publish(c: CheckedPublish, events: unknown[], name: "publish" | "publishMany"): Promise<Published> {
    const n = this.#shards.length;
    const parts: Parts = new Map();
    c.rows.forEach((r, i) => {
      const s = shardOf(r.groupId, n);
      parts.set(s, [...(parts.get(s) ?? []), i]);
    });
    const key = c.idempotencyKey;
    if (key === undefined || n === 1) return this.#publishParts(c, parts, events, name, key);
    const home = shardOf(key, n);
    if ((parts.size === 1 && parts.has(home)) || typeof this.#shards[home]?.reserveKey !== "function") {
      // The whole request on the key's home: stored under the key there, as on one database. (A
      // shard that cannot record a key for others, the HTTP client, keeps it per shard.)
      return this.#publishParts(c, parts, events, name, key);
    }
    const fingerprint = await fingerprintOf(c.rows, c.singleton);
    const token = await this.#on(home, (s) => (s.reserveKey as NonNullable<Shard["reserveKey"]>)(key, fingerprint));
    return this.#publishParts(c, parts, events, name, `${PART_KEY}${token}`);
  }

  async #publishParts(
    c: CheckedPublish,
    parts: Parts,
    events: unknown[],
    name: "publish" | "publishMany",
    key: string | undefined,
  ): Promise<Published> {
    const n = this.#shards.length;
    const seqs: number[] = new Array(c.rows.length);
    let deduplicated = false;
    // Every part settles before the call answers: a failed batch has nothing of it still under way.
    await settleAll(
      [...parts].map(async ([s, indexes]) => {
        const part: CheckedPublish = {
          ...c,
          rows: indexes.map((i) => c.rows[i] as CheckedPublish["rows"][number]),
          idempotencyKey: key,
        };
        const got = await this.#on(s, (shard) =>
          publishOn(
            shard,
            part,
            indexes.map((i) => events[i]),
            name,
          ),
        );
        deduplicated ||= got.deduplicated === true;
        indexes.forEach((i, k) => {
          seqs[i] = shardedSeq.of(got.seqs[k] as number, s, n);
        });
      }),
    );
    return { seqs, flow: false, ...(c.singleton ? { deduplicated } : {}) };
  }

  // -------------------------------------------------------------------------------------------
  // claim

  async claim<E = unknown>(workerId: string, visibility: number, minPriority = 0): Promise<Lease<E> | null> {
    const [lease] = await this.claimMany<E>(workerId, visibility, 1, minPriority);
    return lease ?? null;
  }

  /**
   * Up to `n` leases across the shards (see the module's comment). A shard that cannot be reached is
   * left out: the claim answers what the others have, and fails only when none could be reached.
   */
  async claimMany<E = unknown>(
    workerId: string,
    visibility: number,
    n: number,
    minPriority = 0,
    options: { wait?: number; signal?: AbortSignal } = {},
  ): Promise<Lease<E>[]> {
    const c = checkClaim(workerId, visibility, n, minPriority, options);
    const count = this.#shards.length;
    const start = this.#turn++ % count;
    const order = Array.from({ length: count }, (_, k) => (start + k) % count);
    // The shards found down sit this claim out.
    const available = this.#asking(order);
    const { asking } = available instanceof Promise ? await available : available;
    const failures: unknown[] = [];
    const claim = (s: number, k: number) =>
      this.#claimOn<E>(s, c, k).catch((e: unknown) => {
        failures.push(e);
        return [] as Lease<E>[];
      });
    // n over the shards, the remainder to the first ones in this turn's order, all at once.
    const asked = asking.slice(0, Math.min(c.n, asking.length));
    const share = (k: number) => Math.floor(c.n / asked.length) + (k < c.n % asked.length ? 1 : 0);
    let leases = (await Promise.all(asked.map((s, k) => claim(s, share(k))))).flat();
    const waits = c.wait > 0 && this.maxClaimWait !== undefined;
    // Fewer claims than shards and nothing found: the others, one at a time (a claim never takes
    // more than it was asked for, so none is taken only to be given back). A long poll skips this:
    // each shard's wait begins with a claim, all at once, rather than after a round trip per shard.
    let tried = asked.length;
    for (const s of waits ? [] : asking.slice(asked.length)) {
      if (leases.length > 0) break;
      leases = await claim(s, c.n);
      tried++;
    }
    if (leases.length > 0) return leases;
    const fault = failures.map(toQueueError).find((e) => !OUTAGE_CODES.has(e.code));
    if (fault !== undefined || (failures.length > 0 && failures.length === tried)) throw fault ?? failures[0];
    if (!waits || options.signal?.aborted) return [];
    const poll = async (s: number, signal: AbortSignal) => {
      const got = await this.#on(s, (shard) =>
        shard.claimMany<E>(c.workerId, c.visibility, c.n, c.minPriority, { wait: c.wait, signal }),
      );
      return got.map((l) => this.#globalLease(l, s));
    };
    return firstToAnswer<E>(asking, poll, (l) => this.release(l), options.signal);
  }

  /**
   * Up to `n` leases from shard `shard` alone, named as this queue names them. consume() claims
   * through it, each shard on its own, so that no shard waits for another.
   */
  async claimManyOn<E = unknown>(
    shard: number,
    workerId: string,
    visibility: number,
    n: number,
    minPriority = 0,
  ): Promise<Lease<E>[]> {
    checkInteger("shard", shard, 0, this.#shards.length - 1);
    const c = checkClaim(workerId, visibility, n, minPriority);
    return this.#claimOn<E>(shard, c, c.n);
  }

  async #claimOn<E>(
    s: number,
    c: { workerId: string; visibility: number; minPriority: number },
    n: number,
  ): Promise<Lease<E>[]> {
    const got = await this.#on(s, (shard) => shard.claimMany<E>(c.workerId, c.visibility, n, c.minPriority));
    return got.map((l) => this.#globalLease(l, s));
  }

  // -------------------------------------------------------------------------------------------
  // ack / nack / release / extend: on the lease's shard, its errors naming the queue's seq

  async ack(lease: Lease | string): Promise<void> {
    const r = this.#route(lease);
    await this.#onSeq(r.index, r.seq, (shard) => shard.ack(r.id));
  }

  async nack(lease: Lease | string, delay = 0): Promise<NackResult> {
    const r = this.#route(lease);
    return this.#onSeq(r.index, r.seq, (shard) => shard.nack(r.id, delay));
  }

  async release(lease: Lease | string): Promise<void> {
    const r = this.#route(lease);
    await this.#onSeq(r.index, r.seq, (shard) => shard.release(r.id));
  }

  /** Many leases at once, checked once, then one settle per shard they are on. */
  async settle(settlements: Settlement[]): Promise<SettleOutcome[]> {
    const list: CheckedSettlement[] = checkSettlements(settlements);
    const outcomes = await settleAcross(list, (id) => {
      const r = this.#route(id);
      return { part: this.#settlers[r.index] as Settler, id: r.id };
    });
    return outcomes.map((o) => {
      const seq = leaseId.parse(o.leaseId)?.seq;
      return o.error === undefined || seq === undefined ? o : { ...o, error: toQueueError(namingSeq(o.error, seq)) };
    });
  }

  /**
   * Heartbeat on the lease's shard: the lease with its new expiry, or, given a lease id,
   * `{ id, expiresAt }`.
   */
  extend<E>(lease: Lease<E>, visibility: number): Promise<Lease<E>>;
  extend(leaseId: string, visibility: number): Promise<{ id: string; expiresAt: number }>;
  async extend<E>(lease: Lease<E> | string, visibility: number): Promise<Lease<E> | { id: string; expiresAt: number }> {
    const r = this.#route(lease);
    const vis = checkPositiveSeconds("visibility", visibility);
    const { expiresAt } = await this.#onSeq(r.index, r.seq, (shard) => shard.extend(r.id, vis));
    return typeof lease === "string" ? { id: lease, expiresAt } : { ...lease, expiresAt };
  }

  // -------------------------------------------------------------------------------------------
  // reads, dead letters

  /**
   * Every shard's counts, added up; `now` is the latest of their clocks. Shards that cannot be
   * reached are listed in `unreachableShards` (the counts are the others'); it fails only when none
   * answered.
   */
  async stats(): Promise<QueueStats> {
    const { left } = await this.#asking(
      this.#shards.map((_, i) => i),
      { orNone: true },
    );
    return statsAcross(this.#shards.length, (i) => this.#on(i, (s) => s.stats()), left);
  }

  /**
   * Each shard's groups worth watching, merged: first those held (a lease, park or delay), then the
   * next in line, longest unclaimed first. A shard that cannot be reached is left out.
   */
  async groups(options: { limit?: number } = {}): Promise<GroupInfo[]> {
    checkObject("options", options);
    const limit = checkCount("limit", options.limit ?? GROUPS_PAGE.default, GROUPS_PAGE.max);
    return mergeGroups(await this.#reachable((s) => s.groups({ limit })), limit);
  }

  /**
   * A page of dead letters in seq order across the shards (pass the last one's seq as `afterSeq` for
   * the next). Every shard is read: a page never skips a shard's dead letters.
   */
  async deadLetters<E = unknown>(
    options: { groupId?: string; afterSeq?: number; limit?: number } = {},
  ): Promise<DeadLetter<E>[]> {
    checkObject("options", options);
    const groupId = options.groupId === undefined ? undefined : checkId("groupId", options.groupId);
    const after = checkInteger("afterSeq", options.afterSeq ?? 0, 0, Number.MAX_SAFE_INTEGER);
    const limit = checkCount("limit", options.limit ?? DEAD_LETTER_PAGE.default, DEAD_LETTER_PAGE.max);
    return deadLettersAcross<E>(this.#shards.length, (i, o) => this.#on(i, (s) => s.deadLetters<E>(o)), {
      groupId,
      after,
      limit,
    });
  }

  async redrive(seq: number): Promise<number> {
    const s = this.#shardOfSeq(checkSeq("seq", seq));
    if (s === undefined) throw noDeadLetter(seq);
    const n = this.#shards.length;
    const local = await this.#onSeq(s, seq, (shard) => shard.redrive(shardedSeq.local(seq, n)));
    return shardedSeq.of(local, s, n);
  }

  async deleteDeadLetter(seq: number): Promise<boolean> {
    const s = this.#shardOfSeq(checkSeq("seq", seq));
    if (s === undefined) return false;
    return this.#onSeq(s, seq, (shard) => shard.deleteDeadLetter(shardedSeq.local(seq, this.#shards.length)));
  }

  /** The group's next messages, from its shard (seqs as this queue names them). */
  async peek<E = unknown>(groupId: string, options: { limit?: number } = {}): Promise<QueuedMessage<E>[]> {
    const s = this.shardOf(groupId);
    const got = await this.#on(s, (shard) => shard.peek<E>(groupId, options));
    return got.map((m) => ({ ...m, seq: shardedSeq.of(m.seq, s, this.#shards.length) }));
  }

  /** Deletes the group's messages, on its shard. */
  async purge(groupId: string): Promise<number> {
    return this.#on(this.shardOf(groupId), (shard) => shard.purge(groupId));
  }

  /** The shards' writers' samples as one series (empty where no shard's writer keeps them). */
  async history(): Promise<QueueHistory> {
    const all = await this.#reachable(async (s) => (await s.history?.()) ?? null);
    return addHistories(all.filter((h): h is QueueHistory => h !== null));
  }

  /** The earliest due moment across the shards that can tell it (and can be reached). */
  async nextDueAt(): Promise<{ next: number | null; now: number }> {
    return earliestDue(
      await this.#reachable(async (s) => (await s.nextDueAt?.()) ?? null).then((d) => d.map((x) => x ?? undefined)),
    );
  }

  // -------------------------------------------------------------------------------------------
  // flow control and schedules (src/core/shard.ts `flowOf`): the queue's settings on every shard,
  // a group's and a schedule's on the shard of its group

  queueSettings(): Promise<QueueFlow> {
    return this.#on(0, (s) => flowOf(s).queueSettings());
  }

  async setQueue(settings: QueueFlowInput): Promise<QueueFlow> {
    const all = await this.#onEach((s) => flowOf(s).setQueue(settings));
    return all[0] as QueueFlow;
  }

  groupSettings(groupId: string): Promise<GroupFlow> {
    return this.#on(this.shardOf(groupId), (s) => flowOf(s).groupSettings(groupId));
  }

  setGroup(groupId: string, settings: GroupFlowInput): Promise<GroupFlow> {
    return this.#on(this.shardOf(groupId), (s) => flowOf(s).setGroup(groupId, settings));
  }

  resetGroup(groupId: string): Promise<GroupFlow> {
    return this.#on(this.shardOf(groupId), (s) => flowOf(s).resetGroup(groupId));
  }

  /** On its group's shard (whose writer fires it); a copy another shard kept under the name goes. */
  async putSchedule(name: string, input: ScheduleInput): Promise<Schedule & { created: boolean }> {
    checkObject("input", input);
    const home = this.shardOf(input.groupId);
    const made = await this.#on(home, (s) => flowOf(s).putSchedule(name, input));
    const elsewhere = await Promise.all(
      this.#shards.map((_, i) => (i === home ? false : this.#on(i, (s) => flowOf(s).deleteSchedule(name)))),
    );
    return { ...made, created: made.created && !elsewhere.some(Boolean) };
  }

  async schedules(): Promise<Schedule[]> {
    const all = await this.#onEach((s) => flowOf(s).schedules());
    return all.flat().sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async deleteSchedule(name: string): Promise<boolean> {
    const removed = await this.#onEach((s) => flowOf(s).deleteSchedule(name));
    return removed.some(Boolean);
  }

  /** Fires every reachable shard's due schedules (where the shards can: transports). */
  async runSchedules(): Promise<{ published: number; nextAt: number | null }> {
    const runs = await this.#reachable(async (s) => (await s.runSchedules?.()) ?? null);
    const done = runs.filter((r) => r !== null);
    const nexts = done.map((r) => r.nextAt).filter((x): x is number => x !== null);
    return {
      published: done.reduce((a, r) => a + r.published, 0),
      nextAt: nexts.length > 0 ? Math.min(...nexts) : null,
    };
  }

  // -------------------------------------------------------------------------------------------
  // push subscriptions: on every shard, with one signing secret (each shard's writer pushes its own messages)

  async putSubscription(name: string, input: SubscriptionInput): Promise<StoredSubscription> {
    const made = await this.#on(0, (s) => subscriptionsOf(s).put(name, input));
    const same = {
      ...input,
      rotateSecret: undefined,
      signingSecret: made.signingSecret,
      nextSigningSecret: made.nextSigningSecret ?? null,
    };
    await Promise.all(this.#shards.slice(1).map((_, k) => this.#on(k + 1, (s) => subscriptionsOf(s).put(name, same))));
    return made;
  }

  async listSubscriptions(): Promise<StoredSubscription[]> {
    return this.#on(0, (s) => subscriptionsOf(s).list());
  }

  async deleteSubscription(name: string): Promise<boolean> {
    const removed = await this.#onEach((s) => subscriptionsOf(s).delete(name));
    return removed.some(Boolean);
  }

  close(): void {
    for (const s of this.#shards) s.close?.();
  }

  // -------------------------------------------------------------------------------------------

  /**
   * `call` on shard `index`, once the shards' places are checked, noting whether it was reached.
   * The call starts in this tick when they are (a writer's calls of one tick ride one RPC).
   */
  #on<T>(index: number, call: (shard: Shard) => Promise<T>): Promise<T> {
    const shard = this.#shards[index] as Shard;
    const run = () => this.#outages.track(index, () => call(shard));
    const placing = this.#place();
    return placing === undefined ? run() : placing.then(run);
  }

  /** `call` on shard `index` about the queue's message `seq`: its errors name that seq. */
  async #onSeq<T>(index: number, seq: number, call: (shard: Shard) => Promise<T>): Promise<T> {
    try {
      return await this.#on(index, call);
    } catch (e) {
      throw namingSeq(e, seq);
    }
  }

  /** `call` on every shard; fails when one does (a change every shard must take, a complete list). */
  #onEach<T>(call: (shard: Shard) => Promise<T>): Promise<T[]> {
    return Promise.all(this.#shards.map((_, i) => this.#on(i, call)));
  }

  /**
   * `call` on every shard not found down: the answers of those reached. Fails only when none was,
   * or on a failure that is no outage.
   */
  async #reachable<T>(call: (shard: Shard) => Promise<T>): Promise<T[]> {
    const { asking: asked } = await this.#asking(this.#shards.map((_, i) => i));
    const settled = await Promise.allSettled(asked.map((i) => this.#on(i, call)));
    const got = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    const failed = settled.flatMap((r) => (r.status === "rejected" ? [toQueueError(r.reason)] : []));
    const fault = failed.find((e) => !OUTAGE_CODES.has(e.code));
    if (fault !== undefined) throw fault;
    if (got.length === 0) throw failed[0] ?? new QueueError("UNAVAILABLE", "no shard of the queue could be reached");
    return got;
  }

  /**
   * Of `order`, the shards a call across the shards asks: those up, and those found down that answer
   * a probe now (given PROBE_MS); `left`: the others, and why. Synchronous when no probe is due (the
   * calls then start in this tick). Fails when none is left to ask, unless `orNone`.
   */
  #asking(order: number[], o: { orNone?: boolean } = {}): Asking | Promise<Asking> {
    const up: number[] = [];
    const left: UnreachableShard[] = [];
    const due: UnreachableShard[] = [];
    for (const i of order) {
      const state = this.#outages.state(i);
      if (state.kind === "up") up.push(i);
      else (state.kind === "down" ? left : due).push(state.unreachable);
    }
    const answer = (): Asking => {
      if (up.length === 0 && o.orNone !== true) throw outage(left[0]?.code);
      return { asking: order.filter((i) => up.includes(i)), left };
    };
    if (due.length === 0) return answer();
    return Promise.all(
      due.map(async (u) => {
        if (await this.#probe(u.shard, u.code)) up.push(u.shard);
        else left.push(u);
      }),
    ).then(answer);
  }

  /** Whether shard `index`, found down, answers a cheap read within PROBE_MS (past it, it is not waited for). */
  async #probe(index: number, code: string): Promise<boolean> {
    const read = this.#on<unknown>(index, (s) => (s.nextDueAt ? s.nextDueAt() : s.stats())).then(
      () => true,
      () => false,
    );
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), PROBE_MS);
    });
    try {
      const answered = await Promise.race([read, late]);
      if (answered === undefined) this.#outages.failed(index, code);
      return answered === true;
    } finally {
      if (timer !== undefined) clearTimeout(timer);
    }
  }

  /** The check of the shards' places, while it is under way (undefined once done). */
  #place(): Promise<void> | undefined {
    if (this.#placed) return undefined;
    this.#placing ??= placeShards(this.#shards, "shards", this.#queue).then(
      () => {
        this.#placed = true;
      },
      (e: unknown) => {
        // A refusal stands; an outage meanwhile is checked again by the next call.
        if (!(e instanceof QueueError && e.code === "SHARD_MISMATCH")) this.#placing = undefined;
        throw e;
      },
    );
    return this.#placing;
  }

  /** A shard's lease as the queue names it. */
  #globalLease<E>(l: Lease<E>, s: number): Lease<E> {
    return shardLease(l, { index: s, count: this.#shards.length });
  }

  /** The shard of a lease, the lease's id as its shard names it, and the queue's seq. */
  #route(lease: Lease | string): { index: number; id: string; seq: number } {
    const id = typeof lease === "string" ? lease : typeof lease === "object" && lease !== null ? lease.id : undefined;
    const parsed = leaseId.parse(id);
    if (parsed === undefined) throw invalid("lease", "is not a lease id of this queue");
    const { seq, token } = parsed;
    const index = this.#shardOfSeq(seq);
    if (index === undefined) {
      throw new QueueError("LEASE_NOT_FOUND", `lease: message ${seq} is on no shard of this queue`, { field: "lease" });
    }
    return { index, id: leaseId.of(shardedSeq.local(seq, this.#shards.length), token), seq };
  }

  #shardOfSeq(seq: number): number | undefined {
    const s = shardedSeq.shard(seq, this.#shards.length);
    return s < this.#shards.length ? s : undefined;
  }
}

/**
 * The key a part of a keyed batch is stored under on its shard: the token of the key's record on
 * its home shard (random, never shown, so no key a user gives can meet it).
 */
const PART_KEY = "part:";

/** A part of a publish on one shard: a transport takes it as checked; anything else gets the messages as given. */
async function publishOn(
  shard: Shard,
  part: CheckedPublish,
  events: unknown[],
  name: "publish" | "publishMany",
): Promise<Published> {
  const internals = maybeInternalsOf(shard);
  if (internals !== undefined) return internals.publish(part, name);
  const options: PublishOptions = {
    ...(part.idempotencyKey === undefined ? {} : { idempotencyKey: part.idempotencyKey }),
    ...(part.traceparent === undefined ? {} : { traceparent: part.traceparent }),
  };
  if (part.singleton !== undefined) {
    const row = part.rows[0] as CheckedPublish["rows"][number];
    const got = await flowOf(shard).publishSingleton(row.groupId, events[0], row.priority, {
      ...options,
      delay: row.delay,
      singletonKey: part.singleton.key,
      replace: part.singleton.replace,
    });
    return { seqs: [got.seq], flow: false, deduplicated: got.deduplicated };
  }
  const messages = part.rows.map((r, k) => ({
    groupId: r.groupId,
    event: events[k],
    priority: r.priority,
    delay: r.delay,
  }));
  return { seqs: await shard.publishMany(messages, options), flow: false };
}

/** Waits for every promise; then fails with the first failure, if any. */
async function settleAll(all: Promise<unknown>[]): Promise<void> {
  const failed = (await Promise.allSettled(all)).find((r) => r.status === "rejected");
  if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
}

/** 1 to MAX_SHARDS shards, each with what a shard needs: refused here, not at the first call. */
function checkShards(field: string, shards: unknown): void {
  if (!Array.isArray(shards) || shards.length < 1 || shards.length > MAX_SHARDS) {
    throw invalid(field, `must be 1 to ${MAX_SHARDS} shards`);
  }
  shards.forEach((s: unknown, i) => {
    const missing =
      typeof s !== "object" || s === null
        ? "publishMany"
        : SHARD_METHODS.find((m) => typeof (s as Record<string, unknown>)[m] !== "function");
    if (missing !== undefined) {
      throw invalid(
        `${field}[${i}]`,
        `must be a queue with the transport's API (a LibsqlTransport or the HTTP client): it has no ${missing}()`,
      );
    }
  });
}
