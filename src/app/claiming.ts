/**
 * `POST /v1/claims` as a plain function: acks that ride with the claim, the claim itself, and the
 * long poll (through the QueueWriter's dispatcher, or by polling where there is none). No Hono.
 */
import type { AckOutcome } from "../contract/types.js";
import { toQueueError } from "../core/errors.js";
import type { Lease, LibsqlTransport } from "../core/transport.js";
import { dispatcherFor } from "./writer/dispatcher.js";

export interface ClaimInput {
  workerId: string;
  visibility: number;
  n: number;
  minPriority: number;
  /** Long poll, in seconds (0: answer at once). */
  wait: number;
  /** Lease ids to ack in the same batch, before the claim. */
  acks: string[];
}

export interface ClaimContext {
  queue(): Promise<LibsqlTransport>;
  /** Lets the database go for `ms` (the isolate's slot is freed meanwhile); the next `queue()` takes it again. */
  idle(ms: number, signal?: AbortSignal): Promise<void>;
  /** How waits are served: by the writer's dispatcher (re-checking every `recheckMs`), or by polling. */
  waits: { mode: "dispatch"; recheckMs: number } | { mode: "poll" };
  /** Aborted when the client goes away. */
  signal?: AbortSignal | undefined;
}

/** Polling without the writer: the first pause, doubling up to the last. */
export const POLL_MS = { first: 100, max: 1_000 };

export async function claimWithAcks(
  input: ClaimInput,
  ctx: ClaimContext,
): Promise<{ leases: Lease[]; acks?: AckOutcome[] }> {
  const queue = await ctx.queue();
  // Started in the same tick as the claim below: the write path sends them in one batch, acks first.
  const acks =
    input.acks.length > 0 ? Promise.all(input.acks.map((id) => ackOutcome(queue, id))) : Promise.resolve(undefined);
  const leases = await claim(queue, input, ctx);
  const outcomes = await acks;
  return outcomes === undefined ? { leases } : { leases, acks: outcomes };
}

function ackOutcome(queue: LibsqlTransport, id: string): Promise<AckOutcome> {
  return queue.ack(id).then(
    () => ({ lease_id: id }),
    (e) => {
      const err = toQueueError(e);
      return { lease_id: id, error: { code: err.code, message: err.message } };
    },
  );
}

async function claim(queue: LibsqlTransport, input: ClaimInput, ctx: ClaimContext): Promise<Lease[]> {
  const once = () => queue.claimMany(input.workerId, input.visibility, input.n, input.minPriority);
  if (input.wait === 0) return once();
  const waitMs = input.wait * 1000;
  if (ctx.waits.mode === "dispatch") {
    return dispatcherFor(queue, ctx.waits.recheckMs).wait({
      workerId: input.workerId,
      visibility: input.visibility,
      n: input.n,
      minPriority: input.minPriority,
      waitMs,
      signal: ctx.signal,
    });
  }
  // No writer to tell us: claim, and claim again after growing pauses (each empty claim is a write
  // batch the database bills; the README says so).
  const deadline = Date.now() + waitMs;
  let q = queue;
  for (let pause = POLL_MS.first; ; pause = Math.min(pause * 2, POLL_MS.max)) {
    const got = await q.claimMany(input.workerId, input.visibility, input.n, input.minPriority);
    if (ctx.signal?.aborted) {
      await Promise.all(got.map((l) => q.release(l)));
      return [];
    }
    if (got.length > 0) return got;
    const left = deadline - Date.now();
    if (left <= 0) return [];
    await ctx.idle(Math.min(pause, left), ctx.signal);
    if (ctx.signal?.aborted) return [];
    q = await ctx.queue();
  }
}
