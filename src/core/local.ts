/**
 * A local-file client for Node: the subset of `@libsql/client`'s `Client` the transport uses, over the
 * `libsql` driver directly, with prepared statements kept in a cache. `@libsql/client` prepares every
 * statement on every call; for a claim (five statements plus BEGIN/COMMIT) that preparing is most of
 * the cost on a local file (measured: ~4x the cycle rate with the cache, see BENCHMARKS.md).
 *
 * Only for plain `file:` / `:memory:` databases; embedded replicas and remote databases use
 * `@libsql/client` itself.
 */
import type { Client, InStatement, ResultSet, Row, TransactionMode } from "@libsql/client";

interface Statement {
  reader: boolean;
  raw(toggle?: boolean): Statement;
  columns(): Array<{ name: string; type: string | null }>;
  all(...params: unknown[]): unknown[];
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

class LocalClient {
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
    this.#prepare(
      mode === "write" ? "BEGIN IMMEDIATE" : mode === "read" ? "BEGIN TRANSACTION READONLY" : "BEGIN DEFERRED",
    ).run();
    try {
      const out = stmts.map((s, i) => {
        try {
          return this.#run(s);
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
      return resultSet([], [], r.changes, BigInt(r.lastInsertRowid));
    }
    const columns = s.columns().map((c) => c.name);
    const rows = (s.raw(true).all(args) as unknown[][]).map((values) => toRow(values, columns));
    return resultSet(columns, rows, 0, undefined);
  }
}

/** Rows shaped as `@libsql/client` shapes them: by index and (enumerable) by column name. */
function toRow(values: unknown[], columns: string[]): Row {
  const row: Record<string | number, unknown> = {};
  Object.defineProperty(row, "length", { value: values.length });
  values.forEach((v, i) => {
    const value = typeof v === "bigint" ? Number(v) : v;
    Object.defineProperty(row, i, { value });
    const name = columns[i] as string;
    if (!Object.hasOwn(row, name)) {
      Object.defineProperty(row, name, { value, enumerable: true, configurable: true, writable: true });
    }
  });
  return row as unknown as Row;
}

function resultSet(
  columns: string[],
  rows: Row[],
  rowsAffected: number,
  lastInsertRowid: bigint | undefined,
): ResultSet {
  return {
    columns,
    columnTypes: columns.map(() => ""),
    rows,
    rowsAffected,
    lastInsertRowid,
    toJSON: () => ({ columns, rows, rowsAffected, lastInsertRowid: lastInsertRowid?.toString() }),
  };
}
