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
import { backoff, RETRY_MS, sleepOrThrow } from "./backoff.js";
import { failedWrite, newStats, type WriteEngine, type WriteSpec } from "./engine.js";
import { QueueError, toQueueError } from "./errors.js";
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
export type WriteStep = { stmt: InStatement; when?: (earlier: ResultSet[]) => boolean };

/** The local client behind a `Client`, for the transport's synchronous write path. */
export function localOf(client: Client): LocalClient | undefined {
  return client instanceof LocalClient ? client : undefined;
}

/** What a skipped step answers: nothing done. */
const NOTHING: ResultSet = resultSet(() => [], [], 0, undefined);

export class LocalClient {
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
   * A write transaction run to its end before this returns: in-process, with no request to lose,
   * a step whose `when` says it would change nothing is not run at all.
   */
  writeSync(steps: WriteStep[]): ResultSet[] {
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

interface LocalPending {
  plan: Plan<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

/**
 * The write path for a local file. In-process there is no request to lose and nothing to wait on
 * but the file's lock, so no timers and no resends: the writes submitted in one tick (concurrent
 * callers, an ack and the next claim of a consumer loop) run in one transaction, each statement
 * only when its plan says it is needed. Another process holding the lock (BUSY) is waited out with
 * backoff until the call's deadline.
 */
export class LocalWrites implements WriteEngine {
  readonly #client: LocalClient;
  readonly #timeoutMs: number;
  #queue: LocalPending[] = [];
  #closed = false;
  readonly stats = newStats();

  constructor(client: LocalClient, timeoutMs: number) {
    this.#client = client;
    this.#timeoutMs = timeoutMs;
  }

  submit<T>(spec: WriteSpec<T>): Promise<T> {
    if (this.#closed) return Promise.reject(new QueueError("CLOSED", "the transport is closed"));
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({ plan: spec, resolve: resolve as (v: unknown) => void, reject });
      if (this.#queue.length === 1) queueMicrotask(() => void this.#flush());
    });
  }

  close(): void {
    this.#closed = true;
  }

  async #flush(): Promise<void> {
    let writes = this.#queue;
    this.#queue = [];
    let deadline = 0;
    for (let attempt = 1; writes.length > 0; attempt++) {
      if (this.#client.closed || this.#closed) {
        for (const w of writes) w.reject(new QueueError("CLOSED", "the transport is closed"));
        return;
      }
      const steps: WriteStep[] = [];
      const starts: number[] = [];
      for (const w of writes) {
        const start = steps.length;
        starts.push(start);
        // Each plan's conditions see only its own statements' results.
        w.plan.stmts.forEach((stmt, i) => {
          const when = w.plan.when?.[i];
          steps.push({ stmt, when: when && ((earlier) => when(earlier.slice(start))) });
        });
      }
      let results: ResultSet[];
      try {
        results = this.#client.writeSync(steps);
      } catch (e) {
        const err = toQueueError(e);
        if (err.code === "BUSY") {
          deadline ||= Date.now() + this.#timeoutMs;
          if (Date.now() + 10 < deadline) {
            this.stats.busy++;
            this.stats.retries++;
            await sleepOrThrow(backoff(attempt, RETRY_MS));
            continue;
          }
        }
        // The transaction rolled back: only the write whose statement failed gets the error.
        const at =
          err.code === "BUSY"
            ? -1
            : failedWrite(
                writes.map((w) => w.plan.stmts.length),
                e,
              );
        if (at < 0) {
          for (const w of writes) w.reject(err);
          return;
        }
        (writes[at] as LocalPending).reject(err);
        writes = writes.filter((_, i) => i !== at);
        continue;
      }
      this.stats.batches++;
      this.stats.writes += writes.length;
      this.stats.statements += steps.length;
      writes.forEach((w, i) => {
        const start = starts[i] as number;
        try {
          w.resolve(w.plan.read(results.slice(start, start + w.plan.stmts.length), false));
        } catch (e) {
          w.reject(e);
        }
      });
      return;
    }
  }
}
