/**
 * The lean path from the edge to the QueueWriter for the hottest calls (a claim that does not wait,
 * an ack): the edge has checked the token and validated the body, and calls the writer's method by
 * RPC, so the writer does not build, route, read and parse a second HTTP request (measured: the
 * writer's second pass was a third of the Worker's CPU per request). Everything else, long polls
 * included (their client's abort must reach the writer), is forwarded as HTTP.
 *
 * RPC keeps an error's message but not its fields, so the writer answers errors as values and the
 * edge throws them again as the QueueError they were.
 */
import type { AckOutcome } from "../../contract/types.js";
import type { Database } from "../../core/databases.js";
import { QueueError, type QueueErrorCode, toQueueError } from "../../core/errors.js";
import type { QueueInfo } from "../../core/queues.js";
import type { Lease } from "../../core/types.js";
import type { ClaimInput } from "../claiming.js";
import type { MeterReading } from "./meter.js";

export type Outcome<T> =
  | { ok: T }
  | { error: { code: string; message: string; field: string | undefined; outcomeUnknown: boolean } };

/**
 * What the QueueWriter answers by RPC (src/worker.ts). `database` names the one it serves (the
 * edge resolved it; without a token: the writer takes its own from the configuration).
 */
export interface WriterPort {
  /** `claimWithAcks` for a claim without `wait`. */
  claim(input: ClaimInput, database: Database): Promise<Outcome<{ leases: Lease[]; acks?: AckOutcome[] | undefined }>>;
  ack(leaseId: string, database: Database): Promise<Outcome<null>>;
  /** A named queue, as the catalog says (the default queue's writer keeps the catalog); null when there is none. */
  lookup(name: string): Promise<Outcome<QueueInfo | null>>;
  /** Its counters (`/metrics`), once stored; null when it never counted anything. */
  meter(): Promise<Outcome<MeterReading | null>>;
  /** Its database is gone (its queue was deleted): stop pushing and waking. */
  retire(): Promise<void>;
}

/** What crosses to a writer of a database: how to reach it, never its token. */
export const databaseRef = (db: Database): Database => ({
  url: db.url,
  ...(db.namespace === undefined ? {} : { namespace: db.namespace }),
});

/** Runs `f`, answering its error as a value. */
export async function outcome<T>(f: () => Promise<T>): Promise<Outcome<T>> {
  try {
    return { ok: await f() };
  } catch (e) {
    const q = toQueueError(e);
    return { error: { code: q.code, message: q.message, field: q.field, outcomeUnknown: q.outcomeUnknown } };
  }
}

/** The value, or the writer's error thrown again as a QueueError (which the app maps to its status). */
export function unwrap<T>(o: Outcome<T>): T {
  if ("error" in o) {
    const { code, message, field, outcomeUnknown } = o.error;
    throw new QueueError(code as QueueErrorCode, message, {
      ...(field === undefined ? {} : { field }),
      outcomeUnknown,
    });
  }
  return o.ok;
}
