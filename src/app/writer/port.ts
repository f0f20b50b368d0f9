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
import { QueueError, type QueueErrorCode, toQueueError } from "../../core/errors.js";
import type { Lease } from "../../core/types.js";
import type { ClaimInput } from "../claiming.js";

export type Outcome<T> =
  | { ok: T }
  | { error: { code: string; message: string; field: string | undefined; outcomeUnknown: boolean } };

/** What the QueueWriter answers by RPC (src/worker.ts). */
export interface WriterPort {
  /** `claimWithAcks` for a claim without `wait`. */
  claim(input: ClaimInput): Promise<Outcome<{ leases: Lease[]; acks?: AckOutcome[] | undefined }>>;
  ack(leaseId: string): Promise<Outcome<null>>;
}

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
