/**
 * The library's argument checks: the rules of src/rules.ts, thrown as INVALID_ARGUMENT naming the
 * field, before any SQL runs (so bad input stores nothing). Pure functions.
 */
import {
  concurrencyProblem,
  countProblem,
  describe,
  idProblem,
  integerProblem,
  isWellFormed,
  MAX_CLAIM_BATCH,
  MAX_EVENT_CHARS,
  MAX_EVENT_DEPTH,
  MAX_PUBLISH_BATCH,
  MAX_SECONDS,
  priorityProblem,
  RATE,
  secondsProblem,
  seqProblem,
  traceparentProblem,
  waitProblem,
  workerIdProblem,
} from "../rules.js";
import { invalid } from "./errors.js";
import type { PublishRow, Singleton } from "./sql/publish.js";
import type { GroupFlowInput, PublishInput, PublishOptions, QueueFlowInput, RateLimit } from "./types.js";

/** The value when `problem` finds nothing wrong with it; otherwise INVALID_ARGUMENT naming `field`. */
function check<T>(field: string, value: unknown, problem: string | undefined): T {
  if (problem !== undefined) throw invalid(field, problem);
  return value as T;
}

export const checkId = (field: string, v: unknown): string => check(field, v, idProblem(v));
export const checkWorkerId = (field: string, v: unknown): string => check(field, v, workerIdProblem(v));
export const checkPriority = (field: string, v: unknown): number => check(field, v, priorityProblem(v));
export const checkCount = (field: string, v: unknown, max: number): number => check(field, v, countProblem(v, max));
export const checkSeq = (field: string, v: unknown): number => check(field, v, seqProblem(v));
export const checkInteger = (field: string, v: unknown, min: number, max: number): number =>
  check(field, v, integerProblem(v, min, max));

/** Seconds; finite and > 0 (a visibility, a window), at most `max`. */
export const checkPositiveSeconds = (field: string, v: unknown, max = MAX_SECONDS): number =>
  check(field, v, secondsProblem(v, "> 0", max));

/** Seconds; finite and >= 0 (a delay), at most `max`. */
export const checkDelay = (field: string, v: unknown, max = MAX_SECONDS): number =>
  check(field, v, secondsProblem(v, ">= 0", max));

/** An options argument: an object (or absent, when the caller gives a default). */
export function checkObject<T>(field: string, v: T): T {
  if (typeof v !== "object" || v === null) throw invalid(field, `must be an object, got ${describe(v)}`);
  return v;
}

// -------------------------------------------------------------------------------------------------
// publish and claim: checked once, whoever routes them (LibsqlTransport, ShardedQueue)

/** A publish as checked: its messages as stored (events encoded), and its options. */
export interface CheckedPublish {
  rows: PublishRow[];
  idempotencyKey: string | undefined;
  traceparent: string | undefined;
  /** One message alone, stored only while no message with the key waits (`publishSingleton`). */
  singleton: Singleton | undefined;
}

/** One message (`publish`, `publishSingleton`). */
export function checkPublish(groupId: unknown, event: unknown, priority: unknown, options: unknown): CheckedPublish {
  const o = checkObject("options", options) as PublishOptions;
  const row = {
    groupId: checkId("groupId", groupId),
    event: encodeEvent("event", event),
    priority: checkPriority("priority", priority),
    delay: o.delay === undefined ? 0 : checkDelay("delay", o.delay),
  };
  return { rows: [row], singleton: singletonOf(o), ...keyAndTrace(o) };
}

/** A batch (`publishMany`): each message under its own index; `options.delay` for those that give none. */
export function checkPublishMany(messages: unknown, options: unknown): CheckedPublish {
  const o = checkObject("options", options) as PublishOptions;
  if (!Array.isArray(messages)) throw invalid("messages", "must be an array");
  checkCount("messages.length", messages.length, MAX_PUBLISH_BATCH);
  const delay = o.delay === undefined ? 0 : checkDelay("options.delay", o.delay);
  const rows = messages.map((m: PublishInput, i) => {
    if (typeof m !== "object" || m === null) throw invalid(`messages[${i}]`, "must be an object");
    return {
      groupId: checkId(`messages[${i}].groupId`, m.groupId),
      event: encodeEvent(`messages[${i}].event`, m.event),
      priority: checkPriority(`messages[${i}].priority`, m.priority ?? 0),
      delay: m.delay === undefined ? delay : checkDelay(`messages[${i}].delay`, m.delay),
    };
  });
  if (o.singletonKey !== undefined || o.replace !== undefined) {
    throw invalid("options.singletonKey", "is for one message (publish), not a batch");
  }
  return { rows, singleton: undefined, ...keyAndTrace(o) };
}

function singletonOf(o: PublishOptions): Singleton | undefined {
  if (o.singletonKey === undefined) {
    if (o.replace !== undefined) throw invalid("options.replace", "needs options.singletonKey");
    return undefined;
  }
  const key = checkId("options.singletonKey", o.singletonKey);
  return { key, replace: o.replace === undefined ? false : checkBoolean("options.replace", o.replace) };
}

function keyAndTrace(o: PublishOptions): Pick<CheckedPublish, "idempotencyKey" | "traceparent"> {
  const traceparent =
    o.traceparent === undefined
      ? undefined
      : check<string>("options.traceparent", o.traceparent, traceparentProblem(o.traceparent));
  const idempotencyKey = o.idempotencyKey === undefined ? undefined : checkId("idempotencyKey", o.idempotencyKey);
  return { idempotencyKey, traceparent };
}

/** A claim's arguments (`claimMany`; `options` where the queue takes them: a long poll's wait). */
export function checkClaim(
  workerId: unknown,
  visibility: unknown,
  n: unknown,
  minPriority: unknown,
  options: unknown = {},
): { workerId: string; visibility: number; n: number; minPriority: number; wait: number } {
  const claim = {
    workerId: checkWorkerId("workerId", workerId),
    visibility: checkPositiveSeconds("visibility", visibility),
    n: checkCount("n", n, MAX_CLAIM_BATCH),
    minPriority: checkPriority("minPriority", minPriority),
  };
  const o = checkObject("options", options) as { wait?: unknown };
  const wait = o.wait === undefined ? 0 : check<number>("options.wait", o.wait, waitProblem(o.wait));
  return { ...claim, wait };
}

/**
 * Serialises an event to the JSON text stored in `messages.event`. Refuses what JSON cannot carry
 * faithfully: undefined, functions, symbols, bigints, cycles, NaN/Infinity (JSON would turn them into
 * null), and non-plain objects such as Dates or Maps.
 */
export function encodeEvent(field: string, value: unknown): string {
  checkJsonValue(field, value, new Set(), 0);
  const text = JSON.stringify(value);
  if (text.length > MAX_EVENT_CHARS) {
    throw invalid(field, `is ${text.length} characters as JSON, more than the maximum of ${MAX_EVENT_CHARS}`);
  }
  return text;
}

function checkJsonValue(path: string, v: unknown, seen: Set<object>, depth: number): void {
  if (v === null || typeof v === "boolean") return;
  if (typeof v === "string") {
    if (!isWellFormed(v)) throw invalid(path, "contains a lone surrogate, which is not valid Unicode");
    return;
  }
  if (typeof v === "number") {
    if (!Number.isFinite(v)) throw invalid(path, `is ${v}, which JSON cannot represent`);
    return;
  }
  if (typeof v !== "object") throw invalid(path, `is a ${typeof v}, which is not JSON-serialisable`);
  if (depth >= MAX_EVENT_DEPTH) throw invalid(path, `nests deeper than ${MAX_EVENT_DEPTH} levels`);
  if (seen.has(v)) throw invalid(path, "is cyclic (refers to itself)");
  seen.add(v);
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) checkJsonValue(`${path}[${i}]`, v[i], seen, depth + 1);
  } else {
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) {
      throw invalid(path, `is a ${v.constructor?.name ?? "non-plain object"}, not a plain JSON object`);
    }
    for (const [k, child] of Object.entries(v)) {
      if (!isWellFormed(k)) throw invalid(path, "has a key with a lone surrogate");
      checkJsonValue(`${path}.${k}`, child, seen, depth + 1);
    }
  }
  seen.delete(v);
}

/** A rate (`{limit, period, burst?}`), or null where "no rate" may be said. */
export function checkRate(field: string, v: unknown): RateLimit {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw invalid(field, `must be an object {limit, period, burst?}, got ${describe(v)}`);
  }
  const r = v as Record<string, unknown>;
  for (const k of Object.keys(r)) {
    if (k !== "limit" && k !== "period" && k !== "burst") {
      throw invalid(`${field}.${k}`, 'unknown field (expected "limit", "period", "burst")');
    }
  }
  const limit = checkInteger(`${field}.limit`, r.limit, 1, RATE.maxLimit);
  const period = checkPositiveSeconds(`${field}.period`, r.period);
  const burst = r.burst === undefined ? RATE.defaultBurst : checkInteger(`${field}.burst`, r.burst, 1, limit);
  return { limit, period, burst };
}

function checkFields(field: string, v: object, allowed: string[]): Record<string, unknown> {
  for (const k of Object.keys(v)) {
    if (!allowed.includes(k)) {
      throw invalid(`${field}.${k}`, `unknown field (expected ${allowed.map((a) => `"${a}"`).join(", ")})`);
    }
  }
  return v as Record<string, unknown>;
}

/** A queue's flow settings: each given field checked, unknown ones refused. */
export function checkQueueFlow(field: string, v: unknown): QueueFlowInput {
  const o = checkFields(field, checkObject(field, v) as object, ["groupConcurrency", "groupRate", "paused"]);
  const out: QueueFlowInput = {};
  if (o.groupConcurrency !== undefined) {
    out.groupConcurrency = check(
      `${field}.groupConcurrency`,
      o.groupConcurrency,
      concurrencyProblem(o.groupConcurrency),
    );
  }
  if (o.groupRate !== undefined)
    out.groupRate = o.groupRate === null ? null : checkRate(`${field}.groupRate`, o.groupRate);
  if (o.paused !== undefined) out.paused = checkBoolean(`${field}.paused`, o.paused);
  return out;
}

/** A group's flow settings: each given field checked, unknown ones refused. */
export function checkGroupFlow(field: string, v: unknown): GroupFlowInput {
  const o = checkFields(field, checkObject(field, v) as object, ["concurrency", "rate", "paused"]);
  const out: GroupFlowInput = {};
  if (o.concurrency !== undefined) {
    out.concurrency = check(`${field}.concurrency`, o.concurrency, concurrencyProblem(o.concurrency));
  }
  if (o.rate !== undefined) out.rate = o.rate === null ? null : checkRate(`${field}.rate`, o.rate);
  if (o.paused !== undefined) out.paused = checkBoolean(`${field}.paused`, o.paused);
  return out;
}

export function checkBoolean(field: string, v: unknown): boolean {
  if (typeof v !== "boolean") throw invalid(field, `must be true or false, got ${describe(v)}`);
  return v;
}
