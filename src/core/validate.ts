/** Argument checks, run before any SQL so that bad input stores nothing. Pure functions. */
import { invalid } from "./errors.js";

/** Longest id we accept (group ids, worker ids, idempotency keys): generous, but bounded. */
export const MAX_ID_LENGTH = 512;
/** Largest event we store, as JSON text in UTF-16 code units (about 1 MiB of ASCII). */
export const MAX_EVENT_CHARS = 1_048_576;
export const MIN_PRIORITY = 0;
export const MAX_PRIORITY = 4;

export function checkId(field: string, value: unknown): string {
  if (typeof value !== "string") throw invalid(field, `must be a string, got ${describe(value)}`);
  if (value.length === 0) throw invalid(field, "must not be empty");
  if (value.length > MAX_ID_LENGTH) throw invalid(field, `must be at most ${MAX_ID_LENGTH} characters`);
  if (value.includes("\u0000")) throw invalid(field, "must not contain NUL characters");
  if (!isWellFormed(value)) throw invalid(field, "must be well-formed Unicode (no lone surrogates)");
  return value;
}

/** What `messages.locked_by` holds besides worker ids: the spec's park, a delayed publish, a poison message. */
export const RESERVED_HOLDERS = ["__parked__", "__delayed__", "__dead__"];

/** Longest visibility, delay or park, in seconds (366 days). */
export const MAX_SECONDS = 366 * 24 * 3600;

/** Worker ids are ids that may not impersonate the markers `locked_by` also holds. */
export function checkWorkerId(field: string, value: unknown): string {
  const id = checkId(field, value);
  if (RESERVED_HOLDERS.includes(id)) {
    throw invalid(field, `must not be ${JSON.stringify(id)} (reserved: it marks parked, delayed or dead messages)`);
  }
  return id;
}

export function checkPriority(field: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < MIN_PRIORITY || value > MAX_PRIORITY) {
    throw invalid(field, `must be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY}, got ${describe(value)}`);
  }
  return value;
}

/** Seconds; finite and > 0. The upper bound keeps `now + visibility` a sane REAL. */
export function checkPositiveSeconds(field: string, value: unknown, max = MAX_SECONDS): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw invalid(field, `must be a finite number of seconds > 0, got ${describe(value)}`);
  }
  if (value > max) throw invalid(field, `must be at most ${max} seconds, got ${value}`);
  return value;
}

/** Seconds; finite and >= 0. */
export function checkDelay(field: string, value: unknown, max = MAX_SECONDS): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw invalid(field, `must be a finite number of seconds >= 0, got ${describe(value)}`);
  }
  if (value > max) throw invalid(field, `must be at most ${max} seconds, got ${value}`);
  return value;
}

export function checkCount(field: string, value: unknown, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > max) {
    throw invalid(field, `must be an integer from 1 to ${max}, got ${describe(value)}`);
  }
  return value;
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

const MAX_DEPTH = 64;

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
  if (depth >= MAX_DEPTH) throw invalid(path, `nests deeper than ${MAX_DEPTH} levels`);
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

function isWellFormed(s: string): boolean {
  // String.prototype.isWellFormed is Node 20+ and workerd; fall back to a regex elsewhere.
  const f = (s as { isWellFormed?: () => boolean }).isWellFormed;
  if (typeof f === "function") return f.call(s);
  return !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
}

export function describe(v: unknown): string {
  if (v === null) return "null";
  if (typeof v === "number") return String(v);
  if (typeof v === "string") return v.length > 40 ? `a string of ${v.length} characters` : JSON.stringify(v);
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : typeof v;
}
