/**
 * What a sharded queue (./sharded.ts) asks of its shards, and what is done the same way for each:
 * naming a shard's lease as the queue names it, adding counts, groups, dead letters, due moments and
 * histories up, reaching a shard's subscriptions.
 */
import { leaseId, MAX_SHARDS, shardedSeq } from "../rules.js";
import { backoff } from "./backoff.js";
import { QueueError, type QueueErrorCode, toQueueError } from "./errors.js";
import { type Internals, maybeInternalsOf } from "./internals.js";
import { randomToken } from "./random.js";
import { placeShardPlan, type ShardPlace, shardPlacePlan } from "./sql/shard.js";
import { deleteSubscription, listSubscriptions, putSubscription, type StoredSubscription } from "./subscriptions.js";
import type {
  DeadLetter,
  GroupFlow,
  GroupFlowInput,
  GroupInfo,
  Lease,
  LeaseQueue,
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
  UnreachableShard,
} from "./types.js";

/**
 * What a sharded queue needs of each shard: claims and settles as consume() needs them of a queue
 * (`LeaseQueue`), publishes and reads. LibsqlTransport has it, a writer at the edge (WriterQueue),
 * and so does the HTTP client.
 */
export interface Shard extends LeaseQueue {
  publishMany(messages: PublishInput[], options?: PublishOptions): Promise<number[]>;
  /**
   * Records an idempotency key for a request stored on other shards; answers the token its parts
   * are stored under (LibsqlTransport `reserveKey`). Without it, a key is kept per shard only.
   */
  reserveKey?(key: string, fingerprint: string): Promise<string>;
  nack(lease: Lease | string, delay?: number): Promise<NackResult>;
  settle(settlements: Settlement[]): Promise<SettleOutcome[]>;
  extend<E>(lease: Lease<E>, visibility: number): Promise<Lease<E>>;
  extend(leaseId: string, visibility: number): Promise<{ id: string; expiresAt: number }>;
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
  close?(): void;
}

/** What every shard must have: a sharded queue refuses anything without them when it is made. */
export const SHARD_METHODS = [
  "publishMany",
  "claimMany",
  "ack",
  "nack",
  "release",
  "settle",
  "extend",
  "stats",
  "groups",
  "deadLetters",
  "redrive",
  "deleteDeadLetter",
  "peek",
  "purge",
] as const satisfies ReadonlyArray<keyof Shard>;

/** Which shard of its queue a database is: the `index`-th of `count`, of the queue `queue` (its name, where it has one). */
export interface ShardOf {
  index: number;
  count: number;
  queue?: string | undefined;
}

/** A shard's lease as its sharded queue names it (its seq and id name the shard). */
export function shardLease<E>(l: Lease<E>, shard: ShardOf): Lease<E> {
  if (shard.count <= 1) return l;
  const seq = shardedSeq.of(l.seq, shard.index, shard.count);
  return { ...l, seq, id: leaseId.of(seq, (leaseId.parse(l.id) as { token: string }).token) };
}

/**
 * The counts of several databases, added up; `now` is the latest of their clocks, the oldest age
 * the oldest of theirs, the lag the groups most behind among theirs. `unreachable`: the shards that
 * did not answer (listed; their counts are missing from the sums).
 */
export function addUp(all: QueueStats[], unreachable: UnreachableShard[] = []): QueueStats {
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
    ...(unreachable.length > 0 ? { unreachableShards: unreachable } : {}),
  };
}

/**
 * Each database's counts (`stats(index)`), added up, and those that could not be reached listed
 * instead of failing the whole (`left`: known to be down, not asked). Fails only when none
 * answered, or on an error that is no outage (a bug is not hidden).
 */
export async function statsAcross(
  count: number,
  stats: (index: number) => Promise<QueueStats>,
  left: UnreachableShard[] = [],
): Promise<QueueStats> {
  const settled = await Promise.all(
    Array.from({ length: count }, async (_, shard) => {
      const skipped = left.find((u) => u.shard === shard);
      if (skipped !== undefined) return { shard, unreachable: skipped };
      try {
        return { shard, stats: await stats(shard) };
      } catch (e) {
        const err = toQueueError(e);
        if (!OUTAGE_CODES.has(err.code)) throw err;
        return { shard, unreachable: { shard, code: err.code }, error: err };
      }
    }),
  );
  const answered = settled.flatMap((r) => (r.stats === undefined ? [] : [r.stats]));
  if (answered.length === 0) {
    const failed = settled.find((r) => "error" in r && r.error !== undefined);
    throw failed && "error" in failed ? failed.error : outage(settled[0]?.unreachable?.code);
  }
  return addUp(
    answered,
    settled.flatMap((r) => (r.unreachable === undefined ? [] : [r.unreachable])),
  );
}

/** The codes of a shard that could not be reached (or refuses as blocked), as opposed to a fault. */
export const OUTAGE_CODES: ReadonlySet<string> = new Set([
  "UNAVAILABLE",
  "TIMEOUT",
  "BLOCKED",
  "UNAUTHORIZED",
  "CLOSED",
]);

/** What a call across the shards fails with when none of them could be reached. */
export const outage = (code: string | undefined): QueueError =>
  new QueueError((code ?? "UNAVAILABLE") as QueueErrorCode, "no shard of the queue could be reached");

/**
 * Which shards of a sharded queue were found down, and when to look again: what lets calls across
 * the shards (claims, long polls, stats, groups) be served by the others while one is down. A shard
 * whose call failed with an outage is left out of those calls for a cool-down (1 s, doubling to
 * 30 s); then the next such call first asks it a cheap read (a probe, given PROBE_MS): answered, the
 * shard is asked again; not, it is left out for the next cool-down. Calls addressed to the shard
 * itself (a publish into one of its groups, an ack of one of its leases) always go to it, and any
 * answer from it ends its outage. Kept by whoever keeps the queue: a `ShardedQueue`, or, for a
 * sharded queue built per request, the app (src/app/queues.ts), per queue.
 */
export class ShardOutages {
  readonly #down = new Map<number, { code: string; failures: number; retryAt: number }>();

  /**
   * Shard `index` for a call across the shards: up (ask it), down (leave it out: why), or due for a
   * probe (one call at a time: the others leave it out meanwhile).
   */
  state(index: number): { kind: "up" } | { kind: "down" | "probe"; unreachable: UnreachableShard } {
    const d = this.#down.get(index);
    if (d === undefined) return { kind: "up" };
    const unreachable = { shard: index, code: d.code };
    const now = Date.now();
    if (now < d.retryAt) return { kind: "down", unreachable };
    d.retryAt = now + COOL_DOWN.max;
    return { kind: "probe", unreachable };
  }

  /** Why shard `index` is down (found down and not answered since), without asking it; undefined while it is up. */
  down(index: number): UnreachableShard | undefined {
    const d = this.#down.get(index);
    return d === undefined ? undefined : { shard: index, code: d.code };
  }

  /** Runs `call` on shard `index`, noting whether it was reached. */
  async track<T>(index: number, call: () => Promise<T>): Promise<T> {
    try {
      const got = await call();
      this.#down.delete(index);
      return got;
    } catch (e) {
      const err = toQueueError(e);
      if (OUTAGE_CODES.has(err.code) && err.code !== "CLOSED") this.failed(index, err.code);
      else this.#down.delete(index);
      throw e;
    }
  }

  /** Shard `index` failed with an outage (or did not answer its probe in time): down for a longer cool-down. */
  failed(index: number, code: string): void {
    const failures = (this.#down.get(index)?.failures ?? 0) + 1;
    this.#down.set(index, { code, failures, retryAt: Date.now() + backoff(failures, COOL_DOWN) });
  }
}

/** How long a shard found down is left out of calls across the shards, in ms. */
const COOL_DOWN = { initial: 1000, max: 30_000 } as const;

/** How long a probe of a shard found down may take: past it, the shard stays down (it is not waited for). */
export const PROBE_MS = 1000;

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

/** A page of dead letters in seq order across `count` shards (`page(s, …)` asks shard `s`), past the queue's seq `after`. */
export async function deadLettersAcross<E>(
  count: number,
  page: (s: number, o: { groupId?: string; afterSeq: number; limit: number }) => Promise<DeadLetter<E>[]>,
  o: { groupId: string | undefined; after: number; limit: number },
): Promise<DeadLetter<E>[]> {
  const n = count;
  // On shard s, the seqs past `after` are those whose local seq is past floor((after - s) / MAX_SHARDS).
  const pages = await Promise.all(
    Array.from({ length: n }, async (_, s) => {
      const localAfter = n <= 1 ? o.after : Math.max(0, Math.floor((o.after - s) / MAX_SHARDS));
      const got = await page(s, {
        ...(o.groupId === undefined ? {} : { groupId: o.groupId }),
        afterSeq: localAfter,
        limit: o.limit,
      });
      return got.map((d) => ({ ...d, seq: shardedSeq.of(d.seq, s, n) }));
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
 * and answer soon: a writer waits a second at most for a claim out for them). The first answer's
 * leases are kept; what another shard answered with anyway goes back unspent before this returns.
 * A shard that fails holds back no other: its error is thrown when no shard answered with leases
 * and every shard failed, or at once when its queue is gone.
 */
export async function firstToAnswer<E>(
  order: number[],
  poll: (s: number, signal: AbortSignal) => Promise<Lease<E>[]>,
  giveBack: (lease: Lease<E>) => Promise<unknown>,
  signal: AbortSignal | undefined,
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
      if (answered) {
        await Promise.allSettled(leases.map(giveBack));
        return;
      }
      answered = true;
      off.abort();
      kept.push(...leases);
    });
    const settled = await Promise.allSettled(polls);
    // Called off by the caller: nothing to say to it.
    if (answered || signal?.aborted) return kept;
    const failed = settled.flatMap((r) => (r.status === "rejected" ? [toQueueError(r.reason)] : []));
    const gone = failed.find((e) => e.code === "QUEUE_NOT_FOUND");
    if (gone !== undefined) throw gone;
    // A shard that could not be reached holds back no other: its failure is thrown only when every
    // shard failed (or it is no outage).
    const fault = failed.find((e) => !OUTAGE_CODES.has(e.code));
    if (fault !== undefined || (failed.length > 0 && failed.length === order.length)) throw fault ?? failed[0];
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

// ---------------------------------------------------------------------------------------------
// each shard knows its place

/**
 * The place stored in each transport's database, read once per transport (then kept: a database's
 * place never changes once written).
 */
const stored = new WeakMap<Internals, Promise<ShardPlace | undefined>>();

function storedPlace(t: Internals): Promise<ShardPlace | undefined> {
  let p = stored.get(t);
  if (p === undefined) {
    p = t.conn.readPlan(shardPlacePlan());
    stored.set(t, p);
    p.catch(() => stored.delete(t));
  }
  return p;
}

async function writePlace(t: Internals, place: ShardPlace): Promise<ShardPlace> {
  const p = t.conn.writes.submit({ ...placeShardPlan(place), idempotent: true });
  stored.set(t, p);
  p.catch(() => stored.delete(t));
  return p;
}

const samePlace = (a: ShardPlace, b: ShardPlace) => a.queue === b.queue && a.shard === b.shard && a.shards === b.shards;

const describePlace = (p: ShardPlace) => `shard ${p.shard} of ${p.shards} of queue ${JSON.stringify(p.queue)}`;

function misplaced(field: string, found: ShardPlace, wanted: string): QueueError {
  return new QueueError(
    "SHARD_MISMATCH",
    `${field}: this database is ${describePlace(found)}, not ${wanted} (list a sharded queue's databases in the order it was made with, all of them, each once)`,
    { field },
  );
}

/**
 * Checks that each transport among `shards` is the shard of this queue that its index says, and
 * writes its place where it has none yet (its first use in a queue of several databases): SHARD_MISMATCH,
 * naming `field[index]`, for a database stored as another shard, of another shard count or another
 * queue (the list in another order, one more or fewer, one listed twice). `queue`: the queue's name,
 * when it has one (the app's named queues); otherwise the place of a new queue names it at random.
 * Shards that are not transports (a writer, the HTTP client) are placed by what serves them.
 */
export async function placeShards(shards: readonly object[], field: string, queue?: string): Promise<void> {
  const count = shards.length;
  if (count <= 1) return;
  const transports = shards.flatMap((s, index) => {
    const t = maybeInternalsOf(s);
    return t === undefined ? [] : [{ index, t }];
  });
  if (transports.length === 0) return;
  const places = await Promise.all(transports.map(async (x) => ({ ...x, place: await storedPlace(x.t) })));
  const name = queue ?? places.find((p) => p.place !== undefined)?.place?.queue ?? randomToken();
  for (const { index, place } of places) {
    const wanted = { queue: name, shard: index, shards: count };
    if (place !== undefined && !samePlace(place, wanted)) {
      throw misplaced(`${field}[${index}]`, place, describePlace(wanted));
    }
  }
  // One at a time, in order: a database listed twice is placed at its first index, then refused at its second.
  for (const { index, t, place } of places) {
    if (place !== undefined) continue;
    const wanted = { queue: name, shard: index, shards: count };
    const got = await writePlace(t, wanted);
    if (!samePlace(got, wanted)) throw misplaced(`${field}[${index}]`, got, describePlace(wanted));
  }
}

/**
 * Checks a database served as the shard `at` of a queue of several (a writer's), and writes its
 * place on first use: SHARD_MISMATCH when it is stored as another. A queue of one database has no
 * place: nothing is read or written.
 */
export async function placeShard(transport: object, at: ShardOf): Promise<void> {
  if (at.count <= 1) return;
  const t = maybeInternalsOf(transport);
  if (t === undefined) return;
  const wanted = { queue: at.queue ?? "", shard: at.index, shards: at.count };
  const place = (await storedPlace(t)) ?? (await writePlace(t, wanted));
  const same =
    at.queue === undefined ? place.shard === at.index && place.shards === at.count : samePlace(place, wanted);
  if (!same) {
    const what = `shard ${at.index} of ${at.count}${at.queue === undefined ? "" : ` of queue ${JSON.stringify(at.queue)}`}`;
    throw misplaced("database", place, what);
  }
}
