/**
 * A database's queue as the Worker's edge reaches it: through the database's QueueWriter (its single
 * writer), with LibsqlTransport's API. The app runs at the edge over these (one per database of a
 * queue; a ShardedQueue over several), so a request takes one path to its database, whatever its queue.
 *
 * - Calls go by RPC (src/app/writer/calls.ts). Those started in the same tick travel together, in
 *   one RPC, and the writer starts them together: an ack and the claim it rides with share a batch.
 * - A claim that waits (a long poll) goes over HTTP, so that a client who hangs up takes the wait
 *   with it (the request to the writer carries the client's abort). A caller that ends the wait
 *   itself (another shard answered first) sends a cancel message instead: the writer answers with
 *   what it may already have claimed, which the caller gives back (waiting for a claim still out a
 *   second at most: src/app/writer/dispatcher.ts). A cancel that overtakes its wait ends the wait as
 *   it arrives.
 * - A wait carries when its request reached the edge: each writer serves its waiters in that
 *   order, as one database serves them, however long a sharded long poll took to reach it.
 */
import type { Database } from "../../core/databases.js";
import { QueueError, toQueueError } from "../../core/errors.js";
import type { CatalogStore, QueueManager } from "../../core/queues.js";
import { randomToken } from "../../core/random.js";
import type { ShardOf } from "../../core/shard.js";
import type { StoredSubscription } from "../../core/subscriptions.js";
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
} from "../../core/types.js";
import { MAX_CLAIM_WAIT } from "../../rules.js";
import type { KeyPort } from "../key-port.js";
import {
  type Call,
  type CallArgs,
  type CallName,
  type CallResult,
  databaseRef,
  errorFrom,
  type Outcome,
  unwrap,
  type WriterTarget,
} from "./calls.js";
import type { MeterReading } from "./meter.js";

/** A long poll's request to a writer (POST `WAIT_PATH`), and its answer. */
export interface WaitBody {
  target: WriterTarget;
  /** Calls to start first, in the same tick (acks riding with the claim). */
  calls: Call[];
  id: string;
  workerId: string;
  visibility: number;
  n: number;
  minPriority: number;
  waitMs: number;
  /** When its request reached the edge (ms since the epoch): its place among the writer's waiters. */
  since: number;
}
export interface WaitAnswer {
  outcomes: Outcome<unknown>[];
  leases: Outcome<Lease[]>;
}
export const WAIT_PATH = "/wait";

/** A call on the catalog's rows, which the default queue's writer keeps. */
export type CatalogCall = { [K in keyof CatalogStore]: [K, Parameters<CatalogStore[K]>] }[keyof CatalogStore];

/** Making or deleting a queue, which the default queue's writer runs (one at a time per name). */
export type ManageCall = { [K in keyof QueueManager]: [K, Parameters<QueueManager[K]>] }[keyof QueueManager];

/** A database's QueueWriter as the edge calls it (src/worker.ts implements it). */
export interface Writer extends KeyPort {
  run(target: WriterTarget, calls: Call[]): Promise<Outcome<unknown>[]>;
  /** On the default queue's writer: the catalog's rows. */
  catalog(call: CatalogCall): Promise<Outcome<unknown>>;
  /** On the default queue's writer: makes or deletes a queue (its databases, its row, its writers retired). */
  manage(call: ManageCall): Promise<Outcome<unknown>>;
  /** Ends the long poll `id` at once (answered with what it already holds), even if it has not arrived yet. */
  cancelWait(id: string): Promise<void>;
  /** Its counters (`/metrics`), once stored; null when it never counted anything. */
  meter(): Promise<Outcome<MeterReading | null>>;
  /**
   * Its queue was made (again): it serves `target` from now on, with its schema in place, even if
   * it had been retired.
   */
  prepare(target: WriterTarget): Promise<Outcome<void>>;
  /**
   * Its database is going (its queue was deleted): its long polls end with QUEUE_NOT_FOUND, it
   * stops pushing and waking, lets go of its connection, and answers QUEUE_NOT_FOUND until its
   * queue is made again (`prepare`).
   */
  retire(): Promise<void>;
  fetch(request: Request): Promise<Response>;
}

interface Pending {
  call: Call;
  resolve(value: unknown): void;
  reject(e: unknown): void;
}

export class WriterQueue {
  readonly #writer: Writer;
  readonly #target: WriterTarget;
  readonly #hangup: AbortSignal | undefined;
  readonly #arrived: number;
  #pending: Pending[] = [];

  /**
   * `writer`: the stub of the database's writer (it belongs to the request that made it); `hangup`:
   * aborted when the client of that request goes away; `arrived`: when that request came (ms since
   * the epoch; default now).
   */
  constructor(
    writer: Writer,
    database: Database,
    shard: ShardOf,
    o: { hangup?: AbortSignal | undefined; arrived?: number } = {},
  ) {
    this.#writer = writer;
    this.#target = { database: databaseRef(database), shard };
    this.#hangup = o.hangup;
    this.#arrived = o.arrived ?? Date.now();
  }

  /** Its claims may wait for a message. */
  readonly maxClaimWait = MAX_CLAIM_WAIT;

  publish(groupId: string, event: unknown, priority = 0, options: PublishOptions = {}): Promise<number> {
    return this.#call("publish", [groupId, event, priority, options]);
  }

  publishMany(messages: PublishInput[], options: PublishOptions = {}): Promise<number[]> {
    return this.#call("publishMany", [messages, options]);
  }

  reserveKey(key: string, fingerprint: string): Promise<string> {
    return this.#call("reserveKey", [key, fingerprint]);
  }

  async claim<E = unknown>(workerId: string, visibility: number, minPriority = 0): Promise<Lease<E> | null> {
    const [lease] = await this.claimMany<E>(workerId, visibility, 1, minPriority);
    return lease ?? null;
  }

  claimMany<E = unknown>(
    workerId: string,
    visibility: number,
    n: number,
    minPriority = 0,
    options: { wait?: number; signal?: AbortSignal } = {},
  ): Promise<Lease<E>[]> {
    const wait = options.wait ?? 0;
    if (wait > 0 && !options.signal?.aborted) {
      return this.#wait({ workerId, visibility, n, minPriority, waitMs: wait * 1000 }, options.signal) as Promise<
        Lease<E>[]
      >;
    }
    return this.#call("claimMany", [workerId, visibility, n, minPriority]) as Promise<Lease<E>[]>;
  }

  async ack(lease: Lease | string): Promise<void> {
    await this.#call("ack", [lease]);
  }

  nack(lease: Lease | string, delay = 0): Promise<NackResult> {
    return this.#call("nack", [lease, delay]);
  }

  async release(lease: Lease | string): Promise<void> {
    await this.#call("release", [lease]);
  }

  /** The lease with its new expiry; given a lease id, `{ id, expiresAt }` (only the id crosses to the writer). */
  extend<E>(lease: Lease<E>, visibility: number): Promise<Lease<E>>;
  extend(leaseId: string, visibility: number): Promise<{ id: string; expiresAt: number }>;
  async extend<E>(lease: Lease<E> | string, visibility: number): Promise<Lease<E> | { id: string; expiresAt: number }> {
    const got = await this.#call("extend", [typeof lease === "string" ? lease : lease?.id, visibility]);
    return typeof lease === "string" ? got : { ...lease, expiresAt: got.expiresAt };
  }

  async settle(settlements: Settlement[]): Promise<SettleOutcome[]> {
    const got = await this.#call("settle", [settlements]);
    return got.map((o) => {
      if (!("failed" in o)) return o;
      const { failed, ...outcome } = o;
      return { ...outcome, error: errorFrom(failed) };
    });
  }

  publishSingleton(
    groupId: string,
    event: unknown,
    priority = 0,
    options: PublishOptions = {},
  ): Promise<PublishResult> {
    return this.#call("publishSingleton", [groupId, event, priority, options]);
  }

  queueSettings(): Promise<QueueFlow> {
    return this.#call("queueSettings", []);
  }

  setQueue(settings: QueueFlowInput): Promise<QueueFlow> {
    return this.#call("setQueue", [settings]);
  }

  groupSettings(groupId: string): Promise<GroupFlow> {
    return this.#call("groupSettings", [groupId]);
  }

  setGroup(groupId: string, settings: GroupFlowInput): Promise<GroupFlow> {
    return this.#call("setGroup", [groupId, settings]);
  }

  resetGroup(groupId: string): Promise<GroupFlow> {
    return this.#call("resetGroup", [groupId]);
  }

  putSchedule(name: string, input: ScheduleInput): Promise<Schedule & { created: boolean }> {
    return this.#call("putSchedule", [name, input]);
  }

  schedules(): Promise<Schedule[]> {
    return this.#call("schedules", []);
  }

  deleteSchedule(name: string): Promise<boolean> {
    return this.#call("deleteSchedule", [name]);
  }

  stats(): Promise<QueueStats> {
    return this.#call("stats", []);
  }

  groups(options: { limit?: number } = {}): Promise<GroupInfo[]> {
    return this.#call("groups", [options]);
  }

  deadLetters<E = unknown>(
    options: { groupId?: string; afterSeq?: number; limit?: number } = {},
  ): Promise<DeadLetter<E>[]> {
    return this.#call("deadLetters", [options]) as Promise<DeadLetter<E>[]>;
  }

  redrive(seq: number): Promise<number> {
    return this.#call("redrive", [seq]);
  }

  deleteDeadLetter(seq: number): Promise<boolean> {
    return this.#call("deleteDeadLetter", [seq]);
  }

  peek<E = unknown>(groupId: string, options: { limit?: number } = {}): Promise<QueuedMessage<E>[]> {
    return this.#call("peek", [groupId, options]) as Promise<QueuedMessage<E>[]>;
  }

  purge(groupId: string): Promise<number> {
    return this.#call("purge", [groupId]);
  }

  nextDueAt(): Promise<{ next: number | null; now: number }> {
    return this.#call("nextDueAt", []);
  }

  /** The samples its writer keeps for the charts. */
  async history(): Promise<QueueHistory | undefined> {
    return (await this.#call("history", [])) ?? undefined;
  }

  putSubscription(name: string, input: SubscriptionInput): Promise<StoredSubscription> {
    return this.#call("putSubscription", [name, input]);
  }

  listSubscriptions(): Promise<StoredSubscription[]> {
    return this.#call("listSubscriptions", []);
  }

  deleteSubscription(name: string): Promise<boolean> {
    return this.#call("deleteSubscription", [name]);
  }

  /** Its writer serves the database (a queue made again: a retired writer comes back), its schema in place. */
  async ready(): Promise<void> {
    let got: Outcome<void>;
    try {
      got = await this.#writer.prepare(this.#target);
    } catch (e) {
      throw writerGone(e);
    }
    unwrap(got);
  }

  close(): void {}

  // -------------------------------------------------------------------------------------------

  /** Queues the call; those made in this tick leave together. */
  #call<K extends CallName>(name: K, args: CallArgs<K>): Promise<CallResult<K>> {
    return new Promise((resolve, reject) => {
      if (this.#pending.length === 0) queueMicrotask(() => this.#flush());
      this.#pending.push({ call: [name, args] as unknown as Call, resolve: resolve as (v: unknown) => void, reject });
    });
  }

  #take(): Pending[] {
    const taken = this.#pending;
    this.#pending = [];
    return taken;
  }

  #flush(): void {
    const taken = this.#take();
    if (taken.length === 0) return;
    this.#send(taken.map((p) => p.call)).then(
      (outcomes) => settle(taken, outcomes),
      (e) => {
        for (const p of taken) p.reject(e);
      },
    );
  }

  async #send(calls: Call[]): Promise<Outcome<unknown>[]> {
    try {
      return await this.#writer.run(this.#target, calls);
    } catch (e) {
      throw writerGone(e);
    }
  }

  async #wait(
    ask: Pick<WaitBody, "workerId" | "visibility" | "n" | "minPriority" | "waitMs">,
    signal: AbortSignal | undefined,
  ): Promise<Lease[]> {
    // The calls started in this tick ride with the wait (an ack before its long poll).
    const taken = this.#take();
    const id = randomToken();
    const body: WaitBody = { target: this.#target, calls: taken.map((p) => p.call), id, since: this.#arrived, ...ask };
    const cancel = () => {
      this.#writer.cancelWait(id).catch(() => {});
    };
    signal?.addEventListener("abort", cancel, { once: true });
    try {
      let answer: WaitAnswer;
      try {
        const res = await this.#writer.fetch(
          new Request(`http://queue-writer${WAIT_PATH}`, {
            method: "POST",
            body: JSON.stringify(body),
            ...(this.#hangup ? { signal: this.#hangup } : {}),
          }),
        );
        if (!res.ok) throw new QueueError("UNAVAILABLE", `the queue's writer answered HTTP ${res.status}`);
        answer = (await res.json()) as WaitAnswer;
      } catch (e) {
        const err = writerGone(e);
        for (const p of taken) p.reject(err);
        throw err;
      }
      settle(taken, answer.outcomes);
      return unwrap(answer.leases);
    } finally {
      signal?.removeEventListener("abort", cancel);
    }
  }
}

function settle(pending: Pending[], outcomes: Outcome<unknown>[]): void {
  pending.forEach((p, i) => {
    try {
      p.resolve(unwrap(outcomes[i] as Outcome<unknown>));
    } catch (e) {
      p.reject(e);
    }
  });
}

/**
 * A writer that did not answer: the call may have been applied before the answer was lost. One the
 * runtime refused as overloaded applied nothing: BUSY, to retry a moment later.
 */
function writerGone(e: unknown): QueueError {
  if (e instanceof QueueError) return e;
  if ((e as { overloaded?: unknown } | null)?.overloaded === true) {
    return new QueueError("BUSY", "the queue's writer is overloaded; nothing was applied (retry in a moment)", {
      retryAfterMs: 1000,
    });
  }
  console.error("the queue's writer did not answer:", toQueueError(e).message);
  return new QueueError(
    "UNAVAILABLE",
    "the queue's writer did not answer; the request may have been applied (a publish is safe to retry with the same Idempotency-Key)",
    { outcomeUnknown: true },
  );
}
