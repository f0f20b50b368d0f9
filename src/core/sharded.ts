/**
 * One queue over several databases (shards), like SQS FIFO's partitions: a group lives on one shard,
 * chosen by a stable hash of its id (src/rules.ts `shardOf`), so FIFO and one message in flight per
 * group hold exactly as on one database, while each shard has its own primary, its own writer and
 * its own batch in flight. `ShardedQueue` has LibsqlTransport's API (so `consume()` runs on it) over
 * anything with that API: LibsqlTransports in the library, the shards' writers in the Worker.
 *
 * - Seqs and lease ids name their shard (`shardedSeq`): an ack, nack, release or extend, a redrive
 *   or a delete goes to that shard alone.
 * - A publish goes to its group's shard; a batch is split by shard and sent to each at once. A batch
 *   is all or nothing per shard; with an idempotency key (kept on each shard it touches) sending it
 *   again completes it exactly once.
 * - A claim for `n` leases splits `n` over the shards, starting one shard further each time (no
 *   shard is starved), all at once; if they all come back empty and some shards were not asked (`n`
 *   is less than the shard count), those are asked one at a time until one has something. Priorities and round-robin hold within what each shard offers. A long poll (where
 *   the shards can wait) waits on every shard and takes the first that answers with leases; what
 *   another shard leases meanwhile is released. `claimManyOn` claims on one shard alone: consume()
 *   claims each shard on its own with it, rather than moving the shards in lockstep.
 * - stats, groups and dead letters are read from every shard and added up or merged.
 */
import {
  DEAD_LETTER_PAGE,
  GROUPS_PAGE,
  leaseId,
  MAX_CLAIM_BATCH,
  MAX_PUBLISH_BATCH,
  MAX_SHARDS,
  shardedSeq,
  shardOf,
} from "../rules.js";
import { invalid, noDeadLetter, QueueError } from "./errors.js";
import { checkSettlements, settleAcross } from "./settle.js";
import {
  addHistories,
  addUp,
  deadLettersAcross,
  earliestDue,
  firstToAnswer,
  mergeGroups,
  type Shard,
  type ShardSubscriptions,
  shardLease,
  subscriptionsOf,
} from "./shard.js";
import type { StoredSubscription } from "./subscriptions.js";
import { LibsqlTransport, type TransportOptions } from "./transport.js";
import type {
  DeadLetter,
  GroupInfo,
  Lease,
  NackResult,
  PublishInput,
  PublishOptions,
  QueuedMessage,
  QueueHistory,
  QueueStats,
  Settlement,
  SettleOutcome,
  SubscriptionInput,
} from "./types.js";
import {
  checkCount,
  checkDelay,
  checkId,
  checkInteger,
  checkObject,
  checkPositiveSeconds,
  checkPriority,
  checkSeq,
  checkWorkerId,
  encodeEvent,
} from "./validate.js";

export type { Shard } from "./shard.js";

export class ShardedQueue {
  readonly #shards: Shard[];
  /** Where the next claim starts. */
  #turn = 0;

  /**
   * `turn`: where the first claim starts (default 0). Something that builds a ShardedQueue per
   * request (the Worker's edge) passes a turn of its own, so that no shard is always asked first.
   */
  constructor(shards: Shard[], options: { turn?: number } = {}) {
    if (!Array.isArray(shards) || shards.length < 1 || shards.length > MAX_SHARDS) {
      throw invalid("shards", `must be 1 to ${MAX_SHARDS} shards`);
    }
    this.#shards = [...shards];
    this.#turn = options.turn ?? 0;
  }

  /** A sharded queue over these databases (in this order: a group's shard is its index), each opened as `LibsqlTransport.create` would. */
  static async open(databases: string[], options: TransportOptions = {}): Promise<ShardedQueue> {
    if (!Array.isArray(databases) || databases.length < 1 || databases.length > MAX_SHARDS) {
      throw invalid("databases", `must be 1 to ${MAX_SHARDS} database URLs or paths`);
    }
    const opened = await Promise.allSettled(databases.map((d) => LibsqlTransport.create(d, options)));
    const failed = opened.find((r) => r.status === "rejected");
    if (failed) {
      for (const r of opened) if (r.status === "fulfilled") r.value.close();
      throw (failed as PromiseRejectedResult).reason;
    }
    return new ShardedQueue(opened.map((r) => (r as PromiseFulfilledResult<LibsqlTransport>).value));
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
    checkObject("options", options);
    const message = {
      groupId: checkId("groupId", groupId),
      event,
      priority: checkPriority("priority", priority),
      delay: options.delay === undefined ? undefined : checkDelay("delay", options.delay),
    };
    encodeEvent("event", event);
    const [seq] = await this.#publishParts([message], {
      idempotencyKey: options.idempotencyKey,
      traceparent: options.traceparent,
    });
    return seq as number;
  }

  /** All of `messages`, split by shard; all or nothing on each shard (see the module's comment). */
  async publishMany(messages: PublishInput[], options: PublishOptions = {}): Promise<number[]> {
    checkObject("options", options);
    if (!Array.isArray(messages)) throw invalid("messages", "must be an array");
    checkCount("messages.length", messages.length, MAX_PUBLISH_BATCH);
    const delay = options.delay === undefined ? undefined : checkDelay("options.delay", options.delay);
    // Every message is checked here, under its own index, before any shard is asked.
    const checked = messages.map((m, i) => {
      if (typeof m !== "object" || m === null) throw invalid(`messages[${i}]`, "must be an object");
      encodeEvent(`messages[${i}].event`, m.event);
      return {
        groupId: checkId(`messages[${i}].groupId`, m.groupId),
        event: m.event,
        priority: checkPriority(`messages[${i}].priority`, m.priority ?? 0),
        delay: m.delay === undefined ? delay : checkDelay(`messages[${i}].delay`, m.delay),
      };
    });
    return this.#publishParts(checked, { idempotencyKey: options.idempotencyKey, traceparent: options.traceparent });
  }

  async #publishParts(messages: PublishInput[], options: PublishOptions): Promise<number[]> {
    if (options.idempotencyKey !== undefined) checkId("idempotencyKey", options.idempotencyKey);
    const n = this.#shards.length;
    const parts = new Map<number, number[]>();
    messages.forEach((m, i) => {
      const s = shardOf(m.groupId, n);
      parts.set(s, [...(parts.get(s) ?? []), i]);
    });
    const seqs: number[] = new Array(messages.length);
    await Promise.all(
      [...parts].map(async ([s, indexes]) => {
        const got = await (this.#shards[s] as Shard).publishMany(
          indexes.map((i) => messages[i] as PublishInput),
          options,
        );
        indexes.forEach((i, k) => {
          seqs[i] = shardedSeq.of(got[k] as number, s, n);
        });
      }),
    );
    return seqs;
  }

  // -------------------------------------------------------------------------------------------
  // claim

  async claim<E = unknown>(workerId: string, visibility: number, minPriority = 0): Promise<Lease<E> | null> {
    const [lease] = await this.claimMany<E>(workerId, visibility, 1, minPriority);
    return lease ?? null;
  }

  async claimMany<E = unknown>(
    workerId: string,
    visibility: number,
    n: number,
    minPriority = 0,
    options: { wait?: number; signal?: AbortSignal } = {},
  ): Promise<Lease<E>[]> {
    checkWorkerId("workerId", workerId);
    checkPositiveSeconds("visibility", visibility);
    checkCount("n", n, MAX_CLAIM_BATCH);
    checkPriority("minPriority", minPriority);
    checkObject("options", options);
    const count = this.#shards.length;
    const start = this.#turn++ % count;
    const order = Array.from({ length: count }, (_, k) => (start + k) % count);
    // n over the shards, the remainder to the first ones in this turn's order, all at once.
    const asked = order.slice(0, Math.min(n, count));
    const lists = await Promise.all(
      asked.map((s, k) =>
        this.#claimOn<E>(
          s,
          workerId,
          visibility,
          Math.floor(n / asked.length) + (k < n % asked.length ? 1 : 0),
          minPriority,
        ),
      ),
    );
    let leases = lists.flat();
    // Fewer claims than shards and nothing found: the others, one at a time (a claim never takes
    // more than it was asked for, so none is taken only to be given back).
    for (const s of order.slice(asked.length)) {
      if (leases.length > 0) break;
      leases = await this.#claimOn<E>(s, workerId, visibility, n, minPriority);
    }
    const wait = options.wait ?? 0;
    if (leases.length > 0 || wait <= 0 || this.maxClaimWait === undefined || options.signal?.aborted) return leases;
    const poll = async (s: number, signal: AbortSignal) => {
      const got = await (this.#shards[s] as Shard).claimMany<E>(workerId, visibility, n, minPriority, { wait, signal });
      return got.map((l) => this.#globalLease(l, s));
    };
    return firstToAnswer<E>(order, poll, (l) => this.release(l), options.signal);
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
    checkWorkerId("workerId", workerId);
    checkPositiveSeconds("visibility", visibility);
    checkCount("n", n, MAX_CLAIM_BATCH);
    checkPriority("minPriority", minPriority);
    return this.#claimOn<E>(shard, workerId, visibility, n, minPriority);
  }

  async #claimOn<E>(s: number, workerId: string, visibility: number, n: number, min: number): Promise<Lease<E>[]> {
    const got = await (this.#shards[s] as Shard).claimMany<E>(workerId, visibility, n, min);
    return got.map((l) => this.#globalLease(l, s));
  }

  // -------------------------------------------------------------------------------------------
  // ack / nack / release / extend

  async ack(lease: Lease | string): Promise<void> {
    const { shard, id } = this.#route(lease);
    await shard.ack(id);
  }

  async nack(lease: Lease | string, delay = 0): Promise<NackResult> {
    const { shard, id } = this.#route(lease);
    return shard.nack(id, checkDelay("delay", delay));
  }

  async release(lease: Lease | string): Promise<void> {
    const { shard, id } = this.#route(lease);
    await shard.release(id);
  }

  /** Many leases at once, checked once, then one settle per shard they are on. */
  async settle(settlements: Settlement[]): Promise<SettleOutcome[]> {
    return settleAcross(checkSettlements(settlements), (id) => {
      const r = this.#route(id);
      return { part: r.shard, id: r.id };
    });
  }

  async extend<E>(lease: Lease<E>, visibility: number): Promise<Lease<E>> {
    const { shard, id, index, local } = this.#route(lease);
    const extended = await shard.extend({ ...lease, id, seq: local }, checkPositiveSeconds("visibility", visibility));
    return { ...lease, expiresAt: this.#globalLease(extended, index).expiresAt };
  }

  // -------------------------------------------------------------------------------------------
  // reads, dead letters

  /** Every shard's counts, added up; `now` is the latest of their clocks. */
  async stats(): Promise<QueueStats> {
    return addUp(await Promise.all(this.#shards.map((s) => s.stats())));
  }

  /** Each shard's groups worth watching: first those held (a lease, park or delay), then the next in line, longest unclaimed first. */
  async groups(options: { limit?: number } = {}): Promise<GroupInfo[]> {
    checkObject("options", options);
    const limit = checkCount("limit", options.limit ?? GROUPS_PAGE.default, GROUPS_PAGE.max);
    return mergeGroups(await Promise.all(this.#shards.map((s) => s.groups({ limit }))), limit);
  }

  /** A page of dead letters in seq order across the shards (pass the last one's seq as `afterSeq` for the next). */
  async deadLetters<E = unknown>(
    options: { groupId?: string; afterSeq?: number; limit?: number } = {},
  ): Promise<DeadLetter<E>[]> {
    checkObject("options", options);
    const groupId = options.groupId === undefined ? undefined : checkId("groupId", options.groupId);
    const after = checkInteger("afterSeq", options.afterSeq ?? 0, 0, Number.MAX_SAFE_INTEGER);
    const limit = checkCount("limit", options.limit ?? DEAD_LETTER_PAGE.default, DEAD_LETTER_PAGE.max);
    return deadLettersAcross<E>(this.#shards, { groupId, after, limit });
  }

  async redrive(seq: number): Promise<number> {
    const s = this.#shardOfSeq(checkSeq("seq", seq));
    if (s === undefined) throw noDeadLetter(seq);
    const n = this.#shards.length;
    const local = await (this.#shards[s] as Shard).redrive(shardedSeq.local(seq, n));
    return shardedSeq.of(local, s, n);
  }

  async deleteDeadLetter(seq: number): Promise<boolean> {
    const s = this.#shardOfSeq(checkSeq("seq", seq));
    if (s === undefined) return false;
    return (this.#shards[s] as Shard).deleteDeadLetter(shardedSeq.local(seq, this.#shards.length));
  }

  /** The group's next messages, from its shard (seqs as this queue names them). */
  async peek<E = unknown>(groupId: string, options: { limit?: number } = {}): Promise<QueuedMessage<E>[]> {
    const s = this.shardOf(groupId);
    const got = await (this.#shards[s] as Shard).peek<E>(groupId, options);
    return got.map((m) => ({ ...m, seq: shardedSeq.of(m.seq, s, this.#shards.length) }));
  }

  /** Deletes the group's messages, on its shard. */
  async purge(groupId: string): Promise<number> {
    const s = this.shardOf(groupId);
    return (this.#shards[s] as Shard).purge(groupId);
  }

  /** The shards' writers' samples as one series (empty where no shard's writer keeps them). */
  async history(): Promise<QueueHistory> {
    const all = await Promise.all(this.#shards.map((s) => s.history?.()));
    return addHistories(all.filter((h): h is QueueHistory => h !== undefined));
  }

  /** The earliest due moment across the shards that can tell it. */
  async nextDueAt(): Promise<{ next: number | null; now: number }> {
    return earliestDue(await Promise.all(this.#shards.map((s) => s.nextDueAt?.())));
  }

  // -------------------------------------------------------------------------------------------
  // push subscriptions: on every shard, with one signing secret (each shard's writer pushes its own messages)

  async putSubscription(name: string, input: SubscriptionInput): Promise<StoredSubscription> {
    const [first, ...rest] = this.#shards.map(subscriptionsOf);
    const made = await (first as ShardSubscriptions).put(name, input);
    const same = { ...input, signingSecret: made.signingSecret };
    await Promise.all(rest.map((s) => s.put(name, same)));
    return made;
  }

  async listSubscriptions(): Promise<StoredSubscription[]> {
    return subscriptionsOf(this.#shards[0] as Shard).list();
  }

  async deleteSubscription(name: string): Promise<boolean> {
    const removed = await Promise.all(this.#shards.map((s) => subscriptionsOf(s).delete(name)));
    return removed.some(Boolean);
  }

  close(): void {
    for (const s of this.#shards) s.close?.();
  }

  // -------------------------------------------------------------------------------------------

  /** A shard's lease as the queue names it. */
  #globalLease<E>(l: Lease<E>, s: number): Lease<E> {
    return shardLease(l, { index: s, count: this.#shards.length });
  }

  /** The shard of a lease, and the lease as its shard names it. */
  #route(lease: Lease | string): { shard: Shard; index: number; id: string; local: number } {
    const id = typeof lease === "string" ? lease : typeof lease === "object" && lease !== null ? lease.id : undefined;
    const parsed = leaseId.parse(id);
    if (parsed === undefined) throw invalid("lease", "is not a lease id of this queue");
    const { seq, token } = parsed;
    const index = this.#shardOfSeq(seq);
    if (index === undefined) {
      throw new QueueError("LEASE_NOT_FOUND", `lease: message ${seq} is on no shard of this queue`, { field: "lease" });
    }
    const local = shardedSeq.local(seq, this.#shards.length);
    return {
      shard: this.#shards[index] as Shard,
      index,
      id: leaseId.of(local, token),
      local,
    };
  }

  #shardOfSeq(seq: number): number | undefined {
    const s = shardedSeq.shard(seq, this.#shards.length);
    return s < this.#shards.length ? s : undefined;
  }
}
