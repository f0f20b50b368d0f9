/**
 * `POST /v1/claims` as a plain function: acks that ride with the claim, the claim itself, and the
 * long poll (through the QueueWriter's dispatcher, or by polling where there is none). No Hono.
 */
import type { AckOutcome } from "../contract/types.js";
import { type Backoff, pollUntil } from "../core/backoff.js";
import { toQueueError } from "../core/errors.js";
import { LibsqlTransport } from "../core/transport.js";
import type { Lease } from "../core/types.js";
import { IDLE_POLL } from "../rules.js";
import type { ServedQueue, Waits } from "./context.js";
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
  queue(): Promise<ServedQueue>;
  /** Lets the database go for `ms` (the isolate's slot is freed meanwhile); the next `queue()` takes it again. */
  idle(ms: number, signal?: AbortSignal): Promise<void>;
  waits: Waits;
  /** Aborted when the client goes away. */
  signal?: AbortSignal | undefined;
  /**
   * Keeps the invocation alive until `work` is done, after its client left (the Worker's
   * `ctx.waitUntil`): workerd runs nothing else of a request whose client went away.
   */
  keepAlive?: ((work: Promise<unknown>) => void) | undefined;
  /**
   * Throws QUEUE_NOT_FOUND once the queue the claim started on is gone (deleted, or deleted and made
   * again under its name): a long poll that polls checks it each time it takes the queue again.
   */
  stillThere?: () => Promise<void>;
}

/** Polling without the writer: the project's idle poll, 50 ms doubling to 1 s. */
const POLL: Backoff = { initial: IDLE_POLL.minMs, max: IDLE_POLL.maxMs };

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

function ackOutcome(queue: ServedQueue, id: string): Promise<AckOutcome> {
  return queue.ack(id).then(
    () => ({ lease_id: id }),
    (e) => {
      const err = toQueueError(e);
      return { lease_id: id, error: { code: err.code, message: err.message } };
    },
  );
}

async function claim(queue: ServedQueue, input: ClaimInput, ctx: ClaimContext): Promise<Lease[]> {
  let q = queue;
  const once = () => q.claimMany(input.workerId, input.visibility, input.n, input.minPriority);
  if (input.wait === 0) return handedOver(q, once(), ctx);
  const waitMs = input.wait * 1000;
  if (ctx.waits.mode === "native") {
    const got = q.claimMany(input.workerId, input.visibility, input.n, input.minPriority, {
      wait: input.wait,
      ...(ctx.signal ? { signal: ctx.signal } : {}),
    });
    return handedOver(q, got, ctx);
  }
  if (ctx.waits.mode === "dispatch" && queue instanceof LibsqlTransport) {
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
  // batch the database bills; docs/http.md says so). Between claims the database is let go.
  let polled = false;
  const got = await pollUntil(once, (leases) => leases.length > 0, {
    deadline: Date.now() + waitMs,
    pauses: POLL,
    signal: ctx.signal,
    wait: async (ms) => {
      await ctx.idle(ms, ctx.signal);
      if (ctx.signal?.aborted) return;
      q = await ctx.queue();
      polled = true;
      await ctx.stillThere?.();
    },
  });
  if (polled && got.length > 0 && ctx.stillThere) {
    // Taken from a queue made again meanwhile under the name (its databases named as the old
    // one's): not this long poll's to have.
    try {
      await ctx.stillThere();
    } catch (e) {
      await Promise.allSettled(got.map((l) => q.release(l)));
      throw e;
    }
  }
  return handedOver(q, Promise.resolve(got), ctx);
}

/**
 * The leases, unless the client left while its claim was under way: then they go back at once,
 * unspent. A runtime that ends a request as its client leaves (workerd) never comes back from the
 * await below: the giving back starts from the hang-up itself, kept alive until the claim answers.
 */
async function handedOver(q: ServedQueue, claimed: Promise<Lease[]>, ctx: ClaimContext): Promise<Lease[]> {
  const signal = ctx.signal;
  if (signal === undefined) return claimed;
  let givenBack: Promise<void> | undefined;
  const giveBack = () => {
    givenBack ??= claimed.then(
      (got) => releaseAll(q, got),
      () => {},
    );
    return givenBack;
  };
  const onHangUp = () => ctx.keepAlive?.(giveBack());
  if (signal.aborted) onHangUp();
  else signal.addEventListener("abort", onHangUp, { once: true });
  try {
    const got = await claimed;
    if (!signal.aborted) return got;
    await giveBack();
    return [];
  } finally {
    signal.removeEventListener("abort", onHangUp);
  }
}

async function releaseAll(q: ServedQueue, leases: Lease[]): Promise<void> {
  const released = await Promise.allSettled(leases.map((l) => q.release(l)));
  for (const r of released) {
    // Not given back: it lapses at the end of its visibility, like any lease.
    if (r.status === "rejected")
      console.error("release of a departed client's lease failed", toQueueError(r.reason).message);
  }
}
