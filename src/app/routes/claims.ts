/** Claiming: one lease (or 204), or with `max` up to that many leases in distinct groups. */
import { type Context, Hono } from "hono";
import { ClaimAnswer, ClaimBody } from "../../contract/schemas.js";
import type * as T from "../../contract/types.js";
import { leaseToWire } from "../../contract/wire.js";
import { notFound } from "../../core/queues.js";
import type { Lease } from "../../core/types.js";
import { type ClaimInput, claimWithAcks } from "../claiming.js";
import type { AppEnv } from "../context.js";
import { badRequest } from "../errors.js";
import { LEASE_EXAMPLE } from "../examples.js";
import { defineRoute, handle } from "../route.js";

export const claim = defineRoute({
  method: "post",
  path: "/v1/claims",
  operationId: "claim",
  tag: "Consume",
  summary: "Claim the next message (or up to `max`, in distinct groups)",
  description:
    "Leases the oldest message of the group claimed longest ago (never-claimed groups first) among groups with nothing in flight and a priority of at least `min_priority`. A group is skipped while one of its messages holds a live lease or is parked. Ack, nack or extend the lease before `expires_at`; a lapsed lease is delivered again. With `wait`, a claim that finds nothing is held until something can be leased or the wait is over (long poll). With `ack`, those leases are acked in the same database batch, before the claim.",
  scope: "consume",
  request: { body: { schema: ClaimBody, required: true, example: { worker_id: "worker-1", visibility: 30 } } },
  responses: {
    200: {
      description: "Without `max`: one lease. With `max`: `{ leases: [...] }`, possibly empty.",
      schema: ClaimAnswer,
      example: LEASE_EXAMPLE,
    },
    204: { description: "Without `max`: nothing is deliverable now (no body)." },
  },
});

export const claims = new Hono<AppEnv>();

/** The claim's input as `claimWithAcks` takes it, from the validated body (shared with the edge's lean path). */
export function claimInputOf(body: T.ClaimRequest): ClaimInput {
  if (body.ack !== undefined && body.max === undefined) {
    throw badRequest("ack", 'needs "max" (the answer carries each ack\'s outcome beside the leases)');
  }
  return {
    workerId: body.worker_id,
    visibility: body.visibility,
    n: body.max ?? 1,
    minPriority: body.min_priority ?? 0,
    wait: body.wait ?? 0,
    acks: body.ack ?? [],
  };
}

/** The answer: one lease or 204 without `max`; the list (and the acks' outcomes) with it. */
export function claimAnswer(
  c: Context<AppEnv>,
  body: T.ClaimRequest,
  got: { leases: Lease[]; acks?: T.AckOutcome[] | undefined },
) {
  if (body.max === undefined) {
    const [lease] = got.leases;
    return lease ? c.json(leaseToWire(lease) satisfies T.Lease, 200) : c.body(null, 204);
  }
  const answer: T.LeaseList = { leases: got.leases.map(leaseToWire) };
  if (got.acks) answer.acks = got.acks;
  return c.json(answer, 200);
}

handle(claims, claim, async (c) => {
  const body = c.req.valid("json");
  const { catalog, queueName } = c.var;
  let made: number | undefined;
  const got = await claimWithAcks(claimInputOf(body), {
    queue: async () => {
      const q = await c.var.queue();
      // The queue as it was when first taken: one made again under the name is another queue.
      made ??= (await catalog.resolve(queueName)).createdAt;
      return q;
    },
    idle: c.var.idle,
    waits: c.var.waits,
    signal: c.req.raw.signal,
    keepAlive: (work) => keepAlive(c, work),
    stillThere: async () => {
      if ((await catalog.resolve(queueName)).createdAt !== made) throw notFound(queueName);
    },
  });
  return claimAnswer(c, body, got);
});

/** The Worker's `ctx.waitUntil`; elsewhere (Node) nothing ends a request's work when its client leaves. */
function keepAlive(c: Context<AppEnv>, work: Promise<unknown>): void {
  let ctx: { waitUntil(p: Promise<unknown>): void } | undefined;
  try {
    ctx = c.executionCtx;
  } catch {
    return;
  }
  ctx.waitUntil(work);
}
