/** Every `/v1` route of the API, in the order the OpenAPI document lists them. */
import type { RouteSpec } from "../route.js";
import { claim } from "./claims.js";
import { deleteDeadLetter, listDeadLetters, redrive } from "./dead-letters.js";
import { peek, purge } from "./groups.js";
import { ack, extend, nack, release, settle } from "./leases.js";
import { publishBatch, publishOne } from "./messages.js";
import { metrics } from "./metrics.js";
import { QUEUE_ROUTES } from "./queues.js";
import { groups, history, stats } from "./stats.js";
import { deleteSubscription, listSubscriptions, putSubscription } from "./subscriptions.js";

export const API_ROUTES: readonly RouteSpec[] = [
  publishOne,
  publishBatch,
  claim,
  ack,
  nack,
  release,
  settle,
  extend,
  putSubscription,
  listSubscriptions,
  deleteSubscription,
  stats,
  history,
  groups,
  peek,
  purge,
  listDeadLetters,
  redrive,
  deleteDeadLetter,
  ...QUEUE_ROUTES,
  metrics,
];
