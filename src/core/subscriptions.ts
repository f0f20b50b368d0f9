/**
 * Push subscriptions, for the Worker's writer that delivers them (src/app/writer/pusher.ts) and the
 * API's `/v1/subscriptions` routes: checks, then the plans of src/core/sql/subscriptions.ts run on a
 * transport's connection. Internal to the package.
 */
import { pushUrlProblem, SUBSCRIPTION, signingSecretProblem, subscriptionNameProblem } from "../rules.js";
import { invalid } from "./errors.js";
import { internalsOf } from "./internals.js";
import { randomToken } from "./random.js";
import {
  deleteSubscriptionPlan,
  listSubscriptionsPlan,
  putSubscriptionPlan,
  type StoredSubscription,
} from "./sql/index.js";
import type { Subscription, SubscriptionInput } from "./types.js";
import { checkCount, checkObject, checkPositiveSeconds, checkPriority } from "./validate.js";

export type { StoredSubscription };

export function checkSubscriptionName(field: string, v: unknown): string {
  const problem = subscriptionNameProblem(v);
  if (problem !== undefined) throw invalid(field, problem);
  return v as string;
}

/** Checks everything before a byte is written, and fills the defaults; names each field as the library takes it. */
export function checkSubscription(name: unknown, input: SubscriptionInput): Subscription {
  checkObject("subscription", input);
  const url = pushUrlProblem(input.url);
  if (url !== undefined) throw invalid("url", url);
  if (input.signingSecret !== undefined) {
    const p = signingSecretProblem(input.signingSecret);
    if (p !== undefined) throw invalid("signingSecret", p);
  }
  if (input.nextSigningSecret !== undefined && input.nextSigningSecret !== null) {
    const p = signingSecretProblem(input.nextSigningSecret);
    if (p !== undefined) throw invalid("nextSigningSecret", p);
  }
  if (input.rotateSecret !== undefined) {
    if (input.rotateSecret !== "start" && input.rotateSecret !== "finish") {
      throw invalid("rotateSecret", `must be "start" or "finish", got ${JSON.stringify(input.rotateSecret)}`);
    }
    if (input.signingSecret !== undefined || input.nextSigningSecret !== undefined) {
      throw invalid("rotateSecret", "cannot be given with signingSecret or nextSigningSecret");
    }
  }
  return {
    name: checkSubscriptionName("name", name),
    url: input.url,
    minPriority: input.minPriority === undefined ? 0 : checkPriority("minPriority", input.minPriority),
    maxInFlight:
      input.maxInFlight === undefined
        ? SUBSCRIPTION.defaultInFlight
        : checkCount("maxInFlight", input.maxInFlight, SUBSCRIPTION.maxInFlight),
    visibility:
      input.visibility === undefined
        ? SUBSCRIPTION.defaultVisibility
        : checkPositiveSeconds("visibility", input.visibility),
  };
}

/**
 * Creates or updates a subscription; its signing secret is `input.signingSecret` when given,
 * otherwise drawn at creation and kept on update.
 */
export async function putSubscription(
  transport: object,
  name: string,
  input: SubscriptionInput,
): Promise<StoredSubscription> {
  const sharded = asStore(transport);
  if (sharded) return sharded.putSubscription(name, input);
  const internals = internalsOf(transport);
  const plan = putSubscriptionPlan(
    checkSubscription(name, input),
    input.signingSecret ?? randomToken() + randomToken(),
    input.signingSecret !== undefined,
    input.nextSigningSecret !== undefined
      ? { mode: "set", next: input.nextSigningSecret }
      : input.rotateSecret === "start"
        ? { mode: "start", next: randomToken() + randomToken() }
        : input.rotateSecret === "finish"
          ? { mode: "finish" }
          : { mode: "keep" },
  );
  const s = await internals.conn.writes.submit({ ...plan, idempotent: true });
  internals.subscriptionsChanged();
  return s;
}

/** Every subscription, by name, with its signing secret. */
export async function listSubscriptions(transport: object): Promise<StoredSubscription[]> {
  const sharded = asStore(transport);
  if (sharded) return sharded.listSubscriptions();
  return internalsOf(transport).conn.readPlan(listSubscriptionsPlan());
}

/** Deletes a subscription; false when there was none. */
export async function deleteSubscription(transport: object, name: string): Promise<boolean> {
  const sharded = asStore(transport);
  if (sharded) return sharded.deleteSubscription(name);
  const internals = internalsOf(transport);
  const plan = deleteSubscriptionPlan(checkSubscriptionName("name", name));
  const removed = await internals.conn.writes.submit({ ...plan, idempotent: true });
  internals.subscriptionsChanged();
  return removed;
}

/** A queue that keeps its subscriptions itself (a sharded queue, on every shard). */
export interface SubscriptionStore {
  putSubscription(name: string, input: SubscriptionInput): Promise<StoredSubscription>;
  listSubscriptions(): Promise<StoredSubscription[]>;
  deleteSubscription(name: string): Promise<boolean>;
}

function asStore(queue: object): SubscriptionStore | undefined {
  const q = queue as Partial<SubscriptionStore>;
  return typeof q.putSubscription === "function" && typeof q.listSubscriptions === "function"
    ? (q as SubscriptionStore)
    : undefined;
}
