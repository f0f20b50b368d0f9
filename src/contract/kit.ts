/**
 * The building blocks of the API's schemas. Each field's rule is src/rules.ts's: its limits give the
 * structural checks (which the OpenAPI document shows), and its problem text is the message of every
 * check that fails, worded as the library words it; src/app/route.ts puts the field in front
 * (`messages[3].priority: must be an integer from 0 to 4, got 9`).
 */
import * as v from "valibot";
import {
  countProblem,
  describe,
  idProblem,
  integerProblem,
  LEASE_ID,
  leaseIdProblem,
  MAX_EVENT_CHARS,
  MAX_EVENT_DEPTH,
  MAX_ID_LENGTH,
  MAX_PRIORITY,
  MAX_SECONDS,
  MIN_PRIORITY,
  secondsProblem,
} from "../rules.js";

type Issue = { input: unknown };
type Problem = (input: unknown) => string | undefined;

/** A message function for every check of one rule: the rule's own words about the input. */
export const ruleMessage =
  (problem: Problem) =>
  (issue: Issue): string =>
    problem(issue.input) ?? "is not valid";

/** The whole rule, after the structural checks (which the JSON Schema shows). */
export const ruleCheck = <T>(problem: Problem) => v.check((x: T) => problem(x) === undefined, ruleMessage(problem));

/**
 * A JSON object that refuses fields it does not declare (a typo must not be silently ignored),
 * with the messages route.ts expects: a missing field "is required", an unknown one is named.
 */
export function object<E extends v.ObjectEntries>(entries: E, what = "field") {
  const names = Object.keys(entries);
  const expected = names.length === 0 ? "none is accepted" : `expected ${names.map((n) => `"${n}"`).join(", ")}`;
  return v.strictObject(entries, (issue) => {
    if (issue.expected === "never") return `unknown ${what} (${expected})`;
    if (issue.expected?.startsWith('"')) return "is required";
    return "must be an object";
  });
}

/** Group ids, worker ids and idempotency keys (rules.ts `idProblem`, or a stricter one built on it). */
export function id(description: string, problem: Problem = idProblem) {
  const m = ruleMessage(problem);
  return v.pipe(
    v.string(m),
    v.minLength(1, m),
    v.maxLength(MAX_ID_LENGTH, m),
    v.regex(/^[^\0]*$/, m),
    ruleCheck<string>(problem),
    v.description(description),
  );
}

export function integer(min: number, max: number, description: string) {
  const m = ruleMessage((x) => integerProblem(x, min, max));
  return v.pipe(v.number(m), v.integer(m), v.minValue(min, m), v.maxValue(max, m), v.description(description));
}

export const priority = (description: string) => integer(MIN_PRIORITY, MAX_PRIORITY, description);

/** Seconds: `> 0` (a visibility) or `>= 0` (a delay), at most MAX_SECONDS. */
export function seconds(min: "> 0" | ">= 0", description: string) {
  const m = ruleMessage((x) => secondsProblem(x, min));
  return v.pipe(
    v.number(m),
    v.finite(m),
    min === "> 0" ? v.gtValue(0, m) : v.minValue(0, m),
    v.maxValue(MAX_SECONDS, m),
    v.description(description),
  );
}

/** A query parameter sent twice arrives as an array: say so rather than "must be a string". */
export const once = (problem: string) => (issue: Issue) =>
  Array.isArray(issue.input) ? "must be given once" : problem;

/** A path or query value holding a seq (a positive integer, or 0 for "from the start"); the handler gets a number. */
export function seqText(description: string, allowZero = false) {
  const problem = allowZero ? "must be an integer >= 0" : "must be a positive integer";
  return v.pipe(
    v.string(once(problem)),
    v.regex(allowZero ? /^(?:0|[1-9][0-9]{0,15})$/ : /^[1-9][0-9]{0,15}$/, problem),
    v.check((s) => Number.isSafeInteger(Number(s)), problem),
    v.description(description),
    v.transform(Number),
  );
}

/** A query value given at most once, holding a count from 1 to `max`; the handler gets a number. */
export function countText(max: number, description: string) {
  const problem = `must be an integer from 1 to ${max}`;
  return v.pipe(
    v.string(once(problem)),
    v.regex(/^[1-9][0-9]{0,6}$/, (issue) => `${problem}, got ${describe(issue.input)}`),
    v.check(
      (s) => countProblem(Number(s), max) === undefined,
      (issue) => `${problem}, got ${issue.input}`,
    ),
    v.description(description),
    v.transform(Number),
  );
}

/** A list of 1 to `max` items of `item`. */
export function list<S extends v.GenericSchema>(item: S, max: number, what: string, description: string) {
  const m = (issue: Issue) => `must hold 1 to ${max} ${what}, got ${(issue.input as unknown[]).length}`;
  return v.pipe(
    v.array(item, `must be an array of ${what}`),
    v.minLength(1, m),
    v.maxLength(max, m),
    v.description(description),
  );
}

export const seq = v.pipe(
  v.number(),
  v.integer(),
  v.minValue(1),
  v.description("The message's position in the queue."),
);

export const epochSeconds = (description: string) => v.pipe(v.number(), v.description(description));

export const count = (description: string) =>
  v.pipe(v.number(), v.integer(), v.minValue(0), v.description(description));

export const leaseId = v.pipe(
  v.string(ruleMessage(leaseIdProblem)),
  v.regex(LEASE_ID, ruleMessage(leaseIdProblem)),
  v.description(
    "`<seq>.<32 hex>`: the handle for ack, nack, extend and release. Its token fences off a holder whose lease lapsed and was claimed again.",
  ),
  v.examples(["1.e60920e7c2e2f9e880bfec5577612017"]),
);

/**
 * `1048576` → `1,048,576`, for descriptions built when the Worker starts. Not `toLocaleString`: a
 * locale there loads ICU's data first, the largest cost of a start (BENCHMARKS.md, "The Worker's
 * bundle and startup"; test/package/worker-bundle.test.ts holds it).
 */
export const withCommas = (n: number) => String(n).replace(/\B(?=(\d{3})+$)/g, ",");

export const event = v.pipe(
  v.unknown(),
  v.description(
    `Any JSON value, stored as JSON text: at most ${withCommas(MAX_EVENT_CHARS)} characters as JSON and ${MAX_EVENT_DEPTH} levels deep; numbers must be finite.`,
  ),
  v.examples([{ order: 1001, action: "charge" }]),
);
