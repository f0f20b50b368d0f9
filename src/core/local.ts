/**
 * A local-file client for Node: the subset of `@libsql/client`'s `Client` the transport uses, over the
 * `libsql` driver directly, with prepared statements kept in a cache. `@libsql/client` prepares every
 * statement on every call; for a claim (five statements plus BEGIN/COMMIT) that preparing is most of
 * the cost on a local file (BENCHMARKS.md, "Local file").
 *
 * Writes go through the same engine as over the network (src/core/committer.ts), which hands this
 * client each batch as plans (`InProcess`): in-process there is no request to lose, so a statement
 * its plan says would change nothing is not run at all.
 *
 * Only for plain `file:` / `:memory:` databases; embedded replicas and remote databases use
 * `@libsql/client` itself.
 */
import type { Client, InStatement, ResultSet, Row, TransactionMode } from "@libsql/client";
import type { InProcess } from "./engine.js";
import type { Plan } from "./sql/index.js";

interface Statement {
  reader: boolean;
  columns(): Array<{ name: string; type: string | null }>;
  all(...params: unknown[]): Array<Record<string, unknown>>;
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
}
interface Database {
  prepare(sql: string): Statement;
  exec(sql: string): void;
  close(): void;
  inTransaction: boolean;
}

const CACHE_SIZE = 256;

export async function openLocal(path: string): Promise<Client> {
  // A computed specifier keeps Worker bundlers from following this Node-only native module.
  const specifier = "libsql";
  const mod = (await import(/* @vite-ignore */ specifier)) as { default: new (path: string) => Database };
  return new LocalClient(new mod.default(path)) as unknown as Client;
}

/** A statement of a write, and whether to run it given the results so far (absent: always). */
type WriteStep = { stmt: InStatement; when?: (earlier: ResultSet[]) => boolean };

/** The local client behind a `Client`, for the write engine's in-process path. */
export function localOf(client: Client): LocalClient | undefined {
  return client instanceof LocalClient ? client : undefined;
}

/** What a skipped step answers: nothing done. */
const NOTHING: ResultSet = resultSet(() => [], [], 0, undefined);

export class LocalClient implements InProcess {
  readonly protocol = "file";
  closed = false;
  readonly #db: Database;
  readonly #cache = new Map<string, Statement>();

  constructor(db: Database) {
    this.#db = db;
    // BUSY is retried, with backoff, by the transport's write path: do not block the event loop here.
    db.exec("PRAGMA busy_timeout = 20");
  }

  async execute(stmt: InStatement): Promise<ResultSet> {
    return this.#run(stmt);
  }

  async batch(stmts: InStatement[], mode: TransactionMode = "deferred"): Promise<ResultSet[]> {
    return this.#transaction(
      mode === "write" ? "BEGIN IMMEDIATE" : mode === "read" ? "BEGIN TRANSACTION READONLY" : "BEGIN DEFERRED",
      stmts.map((stmt) => ({ stmt })),
    );
  }

  /**
   * The plans as one write transaction, run to its end before this returns: in-process, with no
   * request to lose, a step whose `when` says it would change nothing is not run at all. BUSY (another
   * process holds the lock) is thrown after a short wait, for the engine to retry with backoff.
   */
  writeNow(plans: ReadonlyArray<Plan<unknown>>): ResultSet[] {
    const steps: WriteStep[] = [];
    for (const p of plans) {
      const start = steps.length;
      // Each plan's conditions see only its own statements' results.
      p.stmts.forEach((stmt, i) => {
        const when = p.when?.[i];
        steps.push({ stmt, when: when && ((earlier) => when(earlier.slice(start))) });
      });
    }
    return this.#transaction("BEGIN IMMEDIATE", steps);
  }

  #transaction(begin: string, steps: WriteStep[]): ResultSet[] {
    this.#prepare(begin).run();
    try {
      const out: ResultSet[] = [];
      steps.forEach((step, i) => {
        if (step.when && !step.when(out)) {
          out.push(NOTHING);
          return;
        }
        try {
          out.push(this.#run(step.stmt));
        } catch (e) {
          // As LibsqlBatchError does: say which statement failed.
          throw Object.assign(new Error(e instanceof Error ? e.message : String(e), { cause: e }), {
            code: (e as { code?: unknown }).code,
            statementIndex: i,
          });
        }
      });
      this.#prepare("COMMIT").run();
      return out;
    } finally {
      if (this.#db.inTransaction) this.#db.exec("ROLLBACK");
    }
  }

  async sync(): Promise<undefined> {
    return undefined;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.#cache.clear();
    this.#db.close();
  }

  #prepare(sql: string): Statement {
    let s = this.#cache.get(sql);
    if (s) {
      // Refresh its place in the LRU order.
      this.#cache.delete(sql);
    } else {
      s = this.#db.prepare(sql);
      if (this.#cache.size >= CACHE_SIZE) this.#cache.delete(this.#cache.keys().next().value as string);
    }
    this.#cache.set(sql, s);
    return s;
  }

  #run(stmt: InStatement): ResultSet {
    const sql = typeof stmt === "string" ? stmt : stmt.sql;
    const args = typeof stmt === "string" || stmt.args === undefined ? [] : stmt.args;
    if (!Array.isArray(args)) throw new TypeError("the local client takes positional arguments only");
    const s = this.#prepare(sql);
    if (!s.reader) {
      const r = s.run(args);
      return resultSet(() => [], [], r.changes, BigInt(r.lastInsertRowid));
    }
    // Rows by column name only (the transport reads nothing by position): the driver builds them.
    const rows = s.all(args) as unknown as Row[];
    return resultSet(() => s.columns().map((c) => c.name), rows, 0, undefined);
  }
}

/** A ResultSet whose column names are only asked of the driver when someone reads them. */
function resultSet(
  columns: () => string[],
  rows: Row[],
  rowsAffected: number,
  lastInsertRowid: bigint | undefined,
): ResultSet {
  return {
    get columns() {
      return columns();
    },
    get columnTypes() {
      return columns().map(() => "");
    },
    rows,
    rowsAffected,
    lastInsertRowid,
    toJSON: () => ({ columns: columns(), rows, rowsAffected, lastInsertRowid: lastInsertRowid?.toString() }),
  };
}
