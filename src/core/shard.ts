/**
 * What a sharded queue (./sharded.ts) asks of its shards, and what is done the same way for each:
 * naming a shard's lease as the queue names it, adding counts, groups, dead letters, due moments and
 * histories up, reaching a shard's subscriptions.
 */
import { leaseId, MAX_SHARDS, shardedSeq } from "../rules.js";
import { deleteSubscription, listSubscriptions, putSubscription, type StoredSubscription } from "./subscriptions.js";
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
  QueueSample,
  QueueStats,
  Schedule,
  ScheduleInput,
  Settlement,
  SettleOutcome,
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
  settle(settlements: Settlement[]): Promise<SettleOutcome[]>;
  extend<E>(lease: Lease<E>, visibility: number): Promise<Lease<E>>;
  stats(): Promise<QueueStats>;
  groups(options?: { limit?: number }): Promise<GroupInfo[]>;
  deadLetters<E = unknown>(options?: { groupId?: string; afterSeq?: number; limit?: number }): Promise<DeadLetter<E>[]>;
  redrive(seq: number): Promise<number>;
  deleteDeadLetter(seq: number): Promise<boolean>;
  peek<E = unknown>(groupId: string, options?: { limit?: number }): Promise<QueuedMessage<E>[]>;
  purge(groupId: string): Promise<number>;
  nextDueAt?(): Promise<{ next: number | null; now: number }>;
  publishSingleton?(
    groupId: string,
    event: unknown,
    priority?: number,
    options?: PublishOptions,
  ): Promise<PublishResult>;
  queueSettings?(): Promise<QueueFlow>;
  setQueue?(settings: QueueFlowInput): Promise<QueueFlow>;
  groupSettings?(groupId: string): Promise<GroupFlow>;
  setGroup?(groupId: string, settings: GroupFlowInput): Promise<GroupFlow>;
  resetGroup?(groupId: string): Promise<GroupFlow>;
  putSchedule?(name: string, input: ScheduleInput): Promise<Schedule & { created: boolean }>;
  schedules?(): Promise<Schedule[]>;
  deleteSchedule?(name: string): Promise<boolean>;
  /** Fires its due schedules (a transport; a writer fires its own on its alarm). */
  runSchedules?(): Promise<{ published: number; nextAt: number | null }>;
  /** The samples its writer keeps (the HTTP client's, a writer's; a transport keeps none). */
  history?(): Promise<QueueHistory | undefined>;
  /** The HTTP client's subscription calls (a transport's go through src/core/subscriptions.ts). */
  subscribe?(
    name: string,
    input: SubscriptionInput,
  ): Promise<Subscription & { signingSecret: string; nextSigningSecret: string | undefined }>;
  subscriptions?(): Promise<Subscription[]>;
  unsubscribe?(name: string): Promise<boolean>;
  /** Set when the shard's claims may wait for a message (a long poll). */
  readonly maxClaimWait?: number | undefined;
  close?(): void;
}

/** Which shard of its queue a database is: the `index`-th of `count`. */
export interface ShardOf {
  index: number;
  count: number;
}

/** A shard's lease as its sharded queue names it (its seq and id name the shard). */
export function shardLease<E>(l: Lease<E>, shard: ShardOf): Lease<E> {
  if (shard.count <= 1) return l;
  const seq = shardedSeq.of(l.seq, shard.index, shard.count);
  return { ...l, seq, id: leaseId.of(seq, (leaseId.parse(l.id) as { token: string }).token) };
}

/**
 * The counts of several databases, added up; `now` is the latest of their clocks, the oldest age
 * the oldest of theirs, the lag the groups most behind among theirs.
 */
export function addUp(all: QueueStats[]): QueueStats {
  const sum = (
    k:
      | "ready"
      | "waiting"
      | "inFlight"
      | "parked"
      | "delayed"
      | "groups"
      | "deadLetters"
      | "pausedGroups"
      | "rateLimitedGroups",
  ) => all.reduce((a, s) => a + (s[k] ?? 0), 0);
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
    paused: all.length > 0 && all.every((s) => s.paused),
    pausedGroups: sum("pausedGroups"),
    rateLimitedGroups: sum("rateLimitedGroups"),
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

/** The shards' groups worth watching: those held (a lease, park or delay) first, then the next in line, longest unclaimed first. */
export function mergeGroups(all: GroupInfo[][], limit: number): GroupInfo[] {
  const flat = all.flat();
  const held = flat.filter((g) => g.inFlight || g.parked);
  const next = flat.filter((g) => !g.inFlight && !g.parked).sort((a, b) => a.lastClaimedAt - b.lastClaimedAt);
  return [...held, ...next].slice(0, limit);
}

/** A page of dead letters in seq order across the shards, past the queue's seq `after`. */
export async function deadLettersAcross<E>(
  shards: Shard[],
  o: { groupId: string | undefined; after: number; limit: number },
): Promise<DeadLetter<E>[]> {
  const n = shards.length;
  // On shard s, the seqs past `after` are those whose local seq is past floor((after - s) / MAX_SHARDS).
  const pages = await Promise.all(
    shards.map(async (shard, s) => {
      const localAfter = n <= 1 ? o.after : Math.max(0, Math.floor((o.after - s) / MAX_SHARDS));
      const page = await shard.deadLetters<E>({ groupId: o.groupId, afterSeq: localAfter, limit: o.limit });
      return page.map((d) => ({ ...d, seq: shardedSeq.of(d.seq, s, n) }));
    }),
  );
  return pages
    .flat()
    .filter((d) => d.seq > o.after)
    .sort((a, b) => a.seq - b.seq)
    .slice(0, o.limit);
}

type Due = { next: number | null; now: number };

/** The earliest due moment among the shards that can tell it; `now` the latest of their clocks. */
export function earliestDue(all: Array<Due | undefined>): Due {
  const known = all.filter((d): d is Due => d !== undefined);
  const nexts = known.map((d) => d.next).filter((x): x is number => x !== null);
  return {
    next: nexts.length > 0 ? Math.min(...nexts) : null,
    now: known.length > 0 ? Math.max(...known.map((d) => d.now)) : Date.now() / 1000,
  };
}

/**
 * A long poll on every shard at once (`poll(s, signal)`, in `order`), served as one database serves
 * a long poll: the first answer with leases ends the wait on every shard (the others are called off,
 * and answer at once with what their claims out bring). The first answer's leases are kept, and
 * with `want` (the leases asked for) those of the others too, in the order they answered, up to
 * `want`; the rest go back unspent. A shard that fails holds back no other: its error is thrown
 * when no shard answered with leases and every shard failed, or at once when its queue is gone.
 */
export async function firstToAnswer<E>(
  order: number[],
  poll: (s: number, signal: AbortSignal) => Promise<Lease<E>[]>,
  giveBack: (lease: Lease<E>) => Promise<unknown>,
  signal: AbortSignal | undefined,
  want?: number,
): Promise<Lease<E>[]> {
  const off = new AbortController();
  const stop = () => off.abort(signal?.reason);
  signal?.addEventListener("abort", stop, { once: true });
  const kept: Lease<E>[] = [];
  let answered = false;
  try {
    const polls = order.map(async (s) => {
      let leases: Lease<E>[];
      try {
        leases = await poll(s, off.signal);
      } catch (e) {
        if ((e as { code?: unknown } | null)?.code === "QUEUE_NOT_FOUND") off.abort();
        throw e;
      }
      if (leases.length === 0) return;
      const first = !answered;
      answered = true;
      off.abort();
      const room = first ? leases.length : Math.max(0, (want ?? 0) - kept.length);
      kept.push(...leases.slice(0, room));
      // Beyond what was asked for: back unspent.
      await Promise.allSettled(leases.slice(room).map(giveBack));
    });
    const settled = await Promise.allSettled(polls);
    // Called off by the caller: nothing to say to it.
    if (answered || signal?.aborted) return kept;
    const failures = settled.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    const gone = failures.find((r) => (r.reason as { code?: unknown } | null)?.code === "QUEUE_NOT_FOUND");
    if (gone !== undefined) throw gone.reason;
    if (failures.length === settled.length && failures[0] !== undefined) throw failures[0].reason;
    return [];
  } finally {
    signal?.removeEventListener("abort", stop);
  }
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
        (await subscriptions.call(shard)).map((s) => ({
          ...s,
          signingSecret: "",
          nextSigningSecret: undefined,
          createdAt: 0,
          updatedAt: 0,
        })),
      delete: (name) => unsubscribe.call(shard, name),
    };
  }
  return {
    put: (name, input) => putSubscription(shard, name, input),
    list: () => listSubscriptions(shard),
    delete: (name) => deleteSubscription(shard, name),
  };
}

type Flow = Required<
  Pick<
    Shard,
    | "publishSingleton"
    | "queueSettings"
    | "setQueue"
    | "groupSettings"
    | "setGroup"
    | "resetGroup"
    | "putSchedule"
    | "schedules"
    | "deleteSchedule"
  >
>;

/** A shard's flow-control and schedule calls (a transport and the HTTP client both have them). */
export function flowOf(shard: Shard): Flow {
  const missing = (name: string) => () => {
    throw new TypeError(`this shard has no ${name}()`);
  };
  const bind = <K extends keyof Flow>(k: K): Flow[K] => {
    const f = shard[k] as ((...args: unknown[]) => unknown) | undefined;
    return (f === undefined ? missing(k) : (...args: unknown[]) => f.apply(shard, args)) as Flow[K];
  };
  return {
    publishSingleton: bind("publishSingleton"),
    queueSettings: bind("queueSettings"),
    setQueue: bind("setQueue"),
    groupSettings: bind("groupSettings"),
    setGroup: bind("setGroup"),
    resetGroup: bind("resetGroup"),
    putSchedule: bind("putSchedule"),
    schedules: bind("schedules"),
    deleteSchedule: bind("deleteSchedule"),
  };
}
