/**
 * What a sharded queue (./sharded.ts) asks of its shards, and what is done the same way for each:
 * naming a shard's lease as the queue names it, adding counts up, reaching a shard's subscriptions.
 */
import { shardedSeq } from "../rules.js";
import { deleteSubscription, listSubscriptions, putSubscription, type StoredSubscription } from "./subscriptions.js";
import type {
  DeadLetter,
  GroupInfo,
  Lease,
  NackResult,
  PublishInput,
  PublishOptions,
  QueuedMessage,
  QueueHistory,
  QueueSample,
  QueueStats,
  Subscription,
  SubscriptionInput,
} from "./types.js";

/** What a sharded queue needs of each shard: LibsqlTransport has it, and so does the HTTP client. */
export interface Shard {
  publishMany(messages: PublishInput[], options?: PublishOptions): Promise<number[]>;
  claimMany<E = unknown>(
    workerId: string,
    visibility: number,
    n: number,
    minPriority?: number,
    options?: { wait?: number; signal?: AbortSignal },
  ): Promise<Lease<E>[]>;
  ack(lease: string): Promise<unknown>;
  nack(lease: string, delay?: number): Promise<NackResult>;
  release(lease: string): Promise<unknown>;
  extend<E>(lease: Lease<E>, visibility: number): Promise<Lease<E>>;
  stats(): Promise<QueueStats>;
  groups(options?: { limit?: number }): Promise<GroupInfo[]>;
  deadLetters<E = unknown>(options?: { groupId?: string; afterSeq?: number; limit?: number }): Promise<DeadLetter<E>[]>;
  redrive(seq: number): Promise<number>;
  deleteDeadLetter(seq: number): Promise<boolean>;
  peek<E = unknown>(groupId: string, options?: { limit?: number }): Promise<QueuedMessage<E>[]>;
  purge(groupId: string): Promise<number>;
  nextDueAt?(): Promise<{ next: number | null; now: number }>;
  /** The samples its writer keeps (the HTTP client's; a transport keeps none). */
  history?(): Promise<QueueHistory>;
  /** The HTTP client's subscription calls (a transport's go through src/core/subscriptions.ts). */
  subscribe?(name: string, input: SubscriptionInput): Promise<Subscription & { signingSecret: string }>;
  subscriptions?(): Promise<Subscription[]>;
  unsubscribe?(name: string): Promise<boolean>;
  /** Set when the shard's claims may wait for a message (a long poll). */
  readonly maxClaimWait?: number | undefined;
  close?(): void;
}

/** A shard's lease as its sharded queue names it (its seq and id name the shard). */
export function shardLease<E>(l: Lease<E>, shard: { index: number; count: number }): Lease<E> {
  if (shard.count <= 1) return l;
  const seq = shardedSeq.of(l.seq, shard.index, shard.count);
  return { ...l, seq, id: `${seq}${l.id.slice(l.id.indexOf("."))}` };
}

/**
 * The counts of several databases, added up; `now` is the latest of their clocks, the oldest age
 * the oldest of theirs, the lag the groups most behind among theirs.
 */
export function addUp(all: QueueStats[]): QueueStats {
  const sum = (k: "ready" | "waiting" | "inFlight" | "parked" | "delayed" | "groups" | "deadLetters") =>
    all.reduce((a, s) => a + s[k], 0);
  const ages = all.map((s) => s.oldestAge).filter((a): a is number => a !== null);
  const lag = all
    .flatMap((s) => s.lag)
    .sort((a, b) => b.age - a.age)
    .slice(0, Math.max(0, ...all.map((s) => s.lag.length)));
  return {
    ready: sum("ready"),
    waiting: sum("waiting"),
    inFlight: sum("inFlight"),
    parked: sum("parked"),
    delayed: sum("delayed"),
    groups: sum("groups"),
    deadLetters: sum("deadLetters"),
    now: Math.max(...all.map((s) => s.now)),
    oldestAge: ages.length > 0 ? Math.max(...ages) : null,
    lag,
  };
}

/**
 * Several writers' samples as one series: a point for each step (the longest of their sample
 * intervals) in which any of them sampled; at it, each writer's latest sample so far (or its first,
 * before it had one), their counts and running totals added up, the oldest age the oldest.
 */
export function addHistories(all: QueueHistory[]): QueueHistory {
  const step = Math.max(1, ...all.map((h) => h.sampleSeconds));
  const slotOf = (s: QueueSample) => Math.floor(s.at / step);
  const series = all.map((h) => h.samples).filter((s) => s.length > 0);
  const slots = [...new Set(series.flatMap((s) => s.map(slotOf)))].sort((a, b) => a - b);
  const samples = slots.map((slot): QueueSample => {
    const picked = series.map((s) => s.filter((x) => slotOf(x) <= slot).at(-1) ?? (s[0] as QueueSample));
    const sum = (k: "ready" | "waiting" | "inFlight" | "parked" | "delayed" | "deadLetters" | "published" | "acked") =>
      picked.reduce((a, p) => a + p[k], 0);
    const ages = picked.map((p) => p.oldestAge).filter((a): a is number => a !== null);
    return {
      at: Math.max(...picked.filter((p) => slotOf(p) === slot).map((p) => p.at)),
      ready: sum("ready"),
      waiting: sum("waiting"),
      inFlight: sum("inFlight"),
      parked: sum("parked"),
      delayed: sum("delayed"),
      deadLetters: sum("deadLetters"),
      oldestAge: ages.length > 0 ? Math.max(...ages) : null,
      published: sum("published"),
      acked: sum("acked"),
    };
  });
  return { sampleSeconds: step, samples };
}

export interface ShardSubscriptions {
  put(name: string, input: SubscriptionInput): Promise<StoredSubscription>;
  list(): Promise<StoredSubscription[]>;
  delete(name: string): Promise<boolean>;
}

/** A shard's subscription calls: the HTTP client's own, or a transport's through src/core/subscriptions.ts. */
export function subscriptionsOf(shard: Shard): ShardSubscriptions {
  const { subscribe, subscriptions, unsubscribe } = shard;
  if (subscribe && subscriptions && unsubscribe) {
    return {
      put: async (name, input) => ({ ...(await subscribe.call(shard, name, input)), createdAt: 0, updatedAt: 0 }),
      // The API lists no secrets.
      list: async () =>
        (await subscriptions.call(shard)).map((s) => ({ ...s, signingSecret: "", createdAt: 0, updatedAt: 0 })),
      delete: (name) => unsubscribe.call(shard, name),
    };
  }
  return {
    put: (name, input) => putSubscription(shard, name, input),
    list: () => listSubscriptions(shard),
    delete: (name) => deleteSubscription(shard, name),
  };
}
