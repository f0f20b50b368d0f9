/**
 * What the client refuses before sending anything: the rules of src/rules.ts (through
 * src/core/validate.ts) and what cannot travel in a URL or a header, named as the API names the
 * field. Everything else (a visibility, a claim's `max`, a page's `limit`) is left to the API, so
 * that the caller sees the API's own answer (status 400) for it.
 */
import { QueueError } from "../core/errors.js";
import { checkId, checkInteger, checkObject, checkSeq } from "../core/validate.js";
import { describe, MAX_ID_LENGTH } from "../rules.js";
import { invalidArgument, QueueHttpError } from "./http-errors.js";

/** Runs a library check, reporting its refusal as the client's error (same code, field and message). */
export function library<R>(f: () => R): R {
  try {
    return f();
  } catch (e) {
    if (e instanceof QueueError && !(e instanceof QueueHttpError)) {
      throw new QueueHttpError(e.code, e.message, { field: e.field });
    }
    throw e;
  }
}

export const checkOptions = (options: unknown): void => void library(() => checkObject("options", options));

/** An integer option from `min` to `max`, `d` when absent. */
export const intOption = (field: string, v: unknown, d: number, min: number, max: number): number =>
  v === undefined ? d : library(() => checkInteger(field, v, min, max));

/** A call's budget in ms. */
export const timeoutOf = (field: string, v: unknown, d: number): number => intOption(field, v, d, 1, 3_600_000);

/** The API's root: an http(s) URL, its path prefix kept, without a trailing slash. */
export function baseUrl(url: unknown): string {
  let parsed: URL;
  try {
    parsed = new URL(String(url));
  } catch {
    throw invalidArgument("options.url", `must be an http(s) URL, got ${describe(url)}`);
  }
  if (typeof url !== "string" || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) {
    throw invalidArgument("options.url", `must be an http(s) URL, got ${describe(url)}`);
  }
  if (parsed.search || parsed.hash) throw invalidArgument("options.url", "must not have a query or a fragment");
  return parsed.href.replace(/\/+$/, "");
}

/** A path segment; encoding refuses what cannot travel (a lone surrogate). */
function segment(field: string, v: string): string {
  try {
    return encodeURIComponent(v);
  } catch {
    throw invalidArgument(field, "must be well-formed Unicode (no lone surrogates)");
  }
}

/** An id (group, subscription name) as a path segment, checked as the library checks ids. */
export const idSegment = (field: string, v: unknown): string =>
  segment(
    field,
    library(() => checkId(field, v)),
  );

/** A dead letter's seq as a path segment. */
export const seqSegment = (seq: unknown): string => String(library(() => checkSeq("seq", seq)));

/**
 * A lease's id as a path segment. Only its presence is checked here: the API refuses a malformed
 * one itself (400, `lease_id`).
 */
export function leaseSegment(lease: unknown): string {
  return segment("lease_id", leaseIdFrom(lease));
}

/** The id of a lease given as itself or as its id (checked for presence only). */
export function leaseIdFrom(lease: unknown): string {
  const id = typeof lease === "string" ? lease : (lease as { id?: unknown } | null)?.id;
  if (typeof id !== "string" || id === "") {
    throw invalidArgument("lease_id", `must be a lease or a lease id, got ${describe(lease)}`);
  }
  return id;
}

/** Idempotency keys travel in a header: visible ASCII, inner spaces allowed, 1 to MAX_ID_LENGTH characters. */
const KEY = new RegExp(`^[!-~](?:[ -~]{0,${MAX_ID_LENGTH - 2}}[!-~])?$`);

/** The caller's Idempotency-Key, or a fresh one (each publish carries one, so that it can be resent). */
export function idempotencyKey(key: unknown): string {
  if (key === undefined) return `tq-client-${randomHex(16)}`;
  if (typeof key !== "string" || !KEY.test(key)) {
    throw invalidArgument(
      "Idempotency-Key",
      `must be 1 to ${MAX_ID_LENGTH} visible ASCII characters (inner spaces allowed; it travels in an HTTP header), got ${describe(key)}`,
    );
  }
  return key;
}

function randomHex(bytes: number): string {
  const b = crypto.getRandomValues(new Uint8Array(bytes));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/** `?a=1&b=x` from the values given (undefined ones left out), strictly encoded. */
export function query(params: Record<string, unknown>): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined) continue;
    try {
      parts.push(`${k}=${encodeURIComponent(String(v))}`);
    } catch {
      throw invalidArgument(k, "must be well-formed Unicode (no lone surrogates)");
    }
  }
  return parts.length === 0 ? "" : `?${parts.join("&")}`;
}
