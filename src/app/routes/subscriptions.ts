/** Push subscriptions: create or update, list, delete (the writer delivers them, src/app/writer/pusher.ts). */
import { Hono } from "hono";
import { SubscriptionAnswer, SubscriptionBody, SubscriptionList, SubscriptionPath } from "../../contract/schemas.js";
import type * as T from "../../contract/types.js";
import { subscriptionInputFromWire, subscriptionToWire } from "../../contract/wire.js";
import {
  listSubscriptions as list,
  putSubscription as put,
  deleteSubscription as remove,
} from "../../core/subscriptions.js";
import type { AppEnv } from "../context.js";
import { badRequest, notFound } from "../errors.js";
import { defineRoute, handle } from "../route.js";

const EXAMPLE = {
  name: "orders",
  url: "https://consumer.example.com/queue",
  min_priority: 0,
  max_in_flight: 10,
  visibility: 30,
};

export const putSubscription = defineRoute({
  method: "put",
  path: "/v1/subscriptions/{name}",
  operationId: "putSubscription",
  tag: "Push",
  summary: "Create or update a push subscription",
  description:
    'From then on the queue POSTs each deliverable message (`min_priority` and up) to `url`, at most `max_in_flight` at once, signed with `signing_secret` (header `Turso-Queue-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`). A 2xx answer acks it, 202 leaves the lease to the consumer, anything else (or no answer within `visibility`) retries it with backoff. The secret is drawn at creation and kept on update; `rotate_secret` changes it without a moment where deliveries fail to verify (docs/http.md, Push). Subscriptions compete: each message goes to one of them.',
  scope: "manage",
  audit: ["url"],
  request: {
    params: SubscriptionPath,
    body: { schema: SubscriptionBody, required: true, example: { url: EXAMPLE.url, max_in_flight: 10 } },
  },
  responses: {
    200: {
      description: "The subscription as stored, with its signing secret.",
      schema: SubscriptionAnswer,
      example: {
        ...EXAMPLE,
        signing_secret: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        next_signing_secret: null,
      },
    },
  },
});

export const listSubscriptions = defineRoute({
  method: "get",
  path: "/v1/subscriptions",
  operationId: "listSubscriptions",
  tag: "Push",
  summary: "List push subscriptions",
  scope: "read",
  responses: {
    200: {
      description: "Every subscription (no secrets).",
      schema: SubscriptionList,
      example: { subscriptions: [EXAMPLE] },
    },
  },
});

export const deleteSubscription = defineRoute({
  method: "delete",
  path: "/v1/subscriptions/{name}",
  operationId: "deleteSubscription",
  tag: "Push",
  summary: "Delete a push subscription",
  description:
    "No delivery starts after this answer; deliveries already under way finish (their leases stay valid until acked or expired).",
  scope: "manage",
  request: { params: SubscriptionPath },
  responses: { 204: { description: "Deleted." } },
  errors: ["NOT_FOUND"],
});

export const subscriptions = new Hono<AppEnv>();

handle(subscriptions, putSubscription, async (c) => {
  const { name } = c.req.valid("param");
  const body = c.req.valid("json");
  if (
    body.rotate_secret !== undefined &&
    (body.signing_secret !== undefined || body.next_signing_secret !== undefined)
  ) {
    throw badRequest("rotate_secret", "cannot be given with signing_secret or next_signing_secret");
  }
  const s = await put(await c.var.queue(), name, subscriptionInputFromWire(body));
  return c.json(
    {
      ...subscriptionToWire(s),
      signing_secret: s.signingSecret,
      next_signing_secret: s.nextSigningSecret ?? null,
    } satisfies T.SubscriptionAnswer,
    200,
  );
});

handle(subscriptions, listSubscriptions, async (c) => {
  const all = await list(await c.var.queue());
  return c.json({ subscriptions: all.map(subscriptionToWire) } satisfies T.SubscriptionList, 200);
});

handle(subscriptions, deleteSubscription, async (c) => {
  const { name } = c.req.valid("param");
  if (!(await remove(await c.var.queue(), name))) throw notFound(`name: no subscription ${name}`);
  return c.body(null, 204);
});
