/**
 * Every statement the queue runs lives in this folder, one module per concern. Each operation is a
 * `Plan`: its statements, named, and the function that reads their results by those names (and by
 * column name), so that the code sending a batch never counts positions in it. The schema and its
 * cost model are in src/core/schema.ts.
 *
 * Time is always the database's: statements read `unixepoch('subsec')`, so every claimer, wherever
 * its clock is, judges leases by the primary's clock.
 */
import type { InStatement, ResultSet, Row } from "@libsql/client";

/** An operation's statements, to run as one atomic batch, and how to read their results. */
export interface Plan<T> {
  stmts: InStatement[];
  /**
   * For a write run in-process (a local file), whether each statement needs to run given the
   * results before it; a batch sent over the network runs them all (they then change nothing).
   */
  when?: Array<((earlier: ResultSet[]) => boolean) | undefined>;
  /** Turns the results of `stmts` into the answer; may throw a QueueError. */
  read(results: ResultSet[], retried: boolean): T;
  /** What to send instead when the first request's answer never came (it may have applied). */
  resend?: Plan<T>;
}

type Results<N extends string> = Record<N, ResultSet>;

type Part<N extends string> = readonly [N, InStatement | undefined, ((r: Partial<Results<N>>) => boolean)?];

/**
 * Builds a plan from named statements; `read` gets each statement's result under its name. A
 * part's third element says when it is worth running at all (see `Plan.when`).
 */
export function plan<N extends string, T>(
  parts: ReadonlyArray<Part<N>>,
  read: (r: Results<N>, retried: boolean) => T,
): Plan<T> {
  const named = parts.filter(
    (p): p is readonly [N, InStatement, ((r: Partial<Results<N>>) => boolean)?] => p[1] !== undefined,
  );
  const byName = (results: ResultSet[]) => {
    const r = {} as Partial<Results<N>>;
    results.forEach((rs, i) => {
      r[(named[i] as Part<N>)[0]] = rs;
    });
    return r;
  };
  return {
    stmts: named.map((p) => p[1]),
    when: named.map((p) => {
      const cond = p[2];
      return cond && ((earlier: ResultSet[]) => cond(byName(earlier)));
    }),
    read: (results, retried) => {
      const r = {} as Results<N>;
      named.forEach(([name], i) => {
        r[name] = results[i] as ResultSet;
      });
      return read(r, retried);
    },
  };
}

export const rowsOf = (rs: ResultSet | undefined): Row[] => rs?.rows ?? [];
export const flag = (rs: ResultSet | undefined, column: string): boolean => Number(rowsOf(rs)[0]?.[column]) === 1;

/**
 * Named arguments for readability here, positional `?` on the wire: embedded replicas (libsql 0.5)
 * panic on named arguments in delegated writes.
 */
export function stmt(sql: string, args: Args = {}): InStatement {
  let compiled = compiledSql.get(sql);
  if (!compiled) {
    const names: string[] = [];
    const text = sql.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, (_, name: string) => {
      names.push(name);
      return "?";
    });
    compiled = { text, names };
    // Statement texts are few (publish texts vary with the batch size): a bounded cache.
    if (compiledSql.size >= 512) compiledSql.clear();
    compiledSql.set(sql, compiled);
  }
  const values = compiled.names.map((name) => {
    if (!(name in args)) throw new Error(`statement uses :${name} but no argument is given`);
    return args[name] as string | number | null;
  });
  return { sql: compiled.text, args: values };
}
const compiledSql = new Map<string, { text: string; names: string[] }>();

/** `attempts <= :max` with no limit configured. */
export const UNLIMITED = Number.MAX_SAFE_INTEGER;

/** The database's clock, with milliseconds. */
export const NOW = "unixepoch('subsec')";

export type Args = Record<string, string | number | null>;
