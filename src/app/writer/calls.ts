/**
 * What the edge may ask of a database's QueueWriter (src/app/writer/remote.ts sends, src/worker.ts
 * runs): the queue operations of the writer's transport, by name. A new operation of
 * `LibsqlTransport` that the API needs is one line here (and one method on `WriterQueue`).
 *
 * RPC keeps an error's message but not its fields, so the writer answers each call's error as a
 * value and the edge throws it again as the QueueError it was.
 */
import type { Database } from "../../core/databases.js";
import { QueueError, type QueueErrorCode, toQueueError } from "../../core/errors.js";
import type { ShardOf } from "../../core/shard.js";
import { deleteSubscription, listSubscriptions, putSubscription } from "../../core/subscriptions.js";
import type { LibsqlTransport } from "../../core/transport.js";
import { meterOf } from "./meter.js";

type T = LibsqlTransport;

const call = <A extends unknown[], R>(f: (t: T, ...args: A) => Promise<R>) => f;

export const WRITER_CALLS = {
  publish: call((t, ...a: Parameters<T["publish"]>) => t.publish(...a)),
  publishMany: call((t, ...a: Parameters<T["publishMany"]>) => t.publishMany(...a)),
  reserveKey: call((t, ...a: Parameters<T["reserveKey"]>) => t.reserveKey(...a)),
  claimMany: call((t, ...a: Parameters<T["claimMany"]>) => t.claimMany(...a)),
  ack: call((t, ...a: Parameters<T["ack"]>) => t.ack(...a)),
  nack: call((t, ...a: Parameters<T["nack"]>) => t.nack(...a)),
  release: call((t, ...a: Parameters<T["release"]>) => t.release(...a)),
  extend: call((t, ...a: Parameters<T["extend"]>) => t.extend(...a)),
  // Each outcome's error as plain data: RPC would keep an Error's message only.
  settle: call(async (t, ...a: Parameters<T["settle"]>) =>
    (await t.settle(...a)).map(({ error, ...o }) => (error === undefined ? o : { ...o, failed: failed(error) })),
  ),
  publishSingleton: call((t, ...a: Parameters<T["publishSingleton"]>) => t.publishSingleton(...a)),
  queueSettings: call((t) => t.queueSettings()),
  setQueue: call((t, ...a: Parameters<T["setQueue"]>) => t.setQueue(...a)),
  groupSettings: call((t, ...a: Parameters<T["groupSettings"]>) => t.groupSettings(...a)),
  setGroup: call((t, ...a: Parameters<T["setGroup"]>) => t.setGroup(...a)),
  resetGroup: call((t, ...a: Parameters<T["resetGroup"]>) => t.resetGroup(...a)),
  putSchedule: call((t, ...a: Parameters<T["putSchedule"]>) => t.putSchedule(...a)),
  schedules: call((t) => t.schedules()),
  deleteSchedule: call((t, ...a: Parameters<T["deleteSchedule"]>) => t.deleteSchedule(...a)),
  stats: call((t) => t.stats()),
  groups: call((t, ...a: Parameters<T["groups"]>) => t.groups(...a)),
  deadLetters: call((t, ...a: Parameters<T["deadLetters"]>) => t.deadLetters(...a)),
  redrive: call((t, ...a: Parameters<T["redrive"]>) => t.redrive(...a)),
  deleteDeadLetter: call((t, ...a: Parameters<T["deleteDeadLetter"]>) => t.deleteDeadLetter(...a)),
  peek: call((t, ...a: Parameters<T["peek"]>) => t.peek(...a)),
  purge: call((t, ...a: Parameters<T["purge"]>) => t.purge(...a)),
  nextDueAt: call((t) => t.nextDueAt()),
  /** The samples this writer keeps for the charts (null where it keeps none yet). */
  history: call(async (t) => (await meterOf(t)?.history()) ?? null),
  putSubscription: call((t, ...a: Parameters<typeof putSubscription> extends [unknown, ...infer R] ? R : never) =>
    putSubscription(t, ...a),
  ),
  listSubscriptions: call((t) => listSubscriptions(t)),
  deleteSubscription: call((t, name: string) => deleteSubscription(t, name)),
};

export type CallName = keyof typeof WRITER_CALLS;
export type CallArgs<K extends CallName> = (typeof WRITER_CALLS)[K] extends (t: T, ...a: infer A) => unknown
  ? A
  : never;
export type CallResult<K extends CallName> = Awaited<ReturnType<(typeof WRITER_CALLS)[K]>>;
export type Call = { [K in CallName]: [K, CallArgs<K>] }[CallName];

/** The database a writer is asked to serve (how to reach it, never its token), and which shard of its queue it is. */
export interface WriterTarget {
  database: Database;
  shard: ShardOf;
}

/** What crosses to a writer of a database: how to reach it, never its token. */
export const databaseRef = (db: Database): Database => ({
  url: db.url,
  ...(db.namespace === undefined ? {} : { namespace: db.namespace }),
});

/** Starts every call at once (in one tick: their writes ride one batch), in order; each answers its own outcome. */
export function runCalls(t: LibsqlTransport, calls: Call[]): Promise<Outcome<unknown>[]> {
  return Promise.all(
    calls.map(([name, args]) => {
      const f = WRITER_CALLS[name] as ((t: T, ...a: unknown[]) => Promise<unknown>) | undefined;
      if (typeof f !== "function" || !Object.hasOwn(WRITER_CALLS, name)) {
        return Promise.resolve(failed(new QueueError("DATABASE", `the writer has no call ${String(name)}`)));
      }
      return outcome(() => f(t, ...args));
    }),
  );
}

export type Outcome<T> =
  | { ok: T }
  | {
      error: {
        code: string;
        message: string;
        field: string | undefined;
        outcomeUnknown: boolean;
        retryAfterMs?: number | undefined;
      };
    };

/** Runs `f`, answering its error as a value. */
export async function outcome<T>(f: () => Promise<T>): Promise<Outcome<T>> {
  try {
    return { ok: await f() };
  } catch (e) {
    return failed(e);
  }
}

function failed(e: unknown): Extract<Outcome<never>, { error: unknown }> {
  const q = toQueueError(e);
  return {
    error: {
      code: q.code,
      message: q.message,
      field: q.field,
      outcomeUnknown: q.outcomeUnknown,
      ...(q.retryAfterMs === undefined ? {} : { retryAfterMs: q.retryAfterMs }),
    },
  };
}

/** The value, or the writer's error thrown again as a QueueError (which the app maps to its status). */
export function unwrap<T>(o: Outcome<T>): T {
  if ("error" in o) throw errorFrom(o);
  return o.ok;
}

/** A failed outcome's error, as the QueueError it was. */
export function errorFrom(o: { error: Extract<Outcome<never>, { error: unknown }>["error"] }): QueueError {
  const { code, message, field, outcomeUnknown, retryAfterMs } = o.error;
  return new QueueError(code as QueueErrorCode, message, {
    ...(field === undefined ? {} : { field }),
    outcomeUnknown,
    retryAfterMs,
  });
}
