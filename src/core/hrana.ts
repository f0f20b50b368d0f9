/**
 * The database over HTTP without `@libsql/client`: Hrana 3 pipelines (`/v3/pipeline`, JSON), as the
 * client sends them, without its general machinery (no stream object, no per-value protobuf-style
 * decoding; rows built as plain objects keyed by column name: the transport reads nothing by
 * position).
 *
 * - `httpWriter`: a `client.batch(stmts, "write")` as one request (BEGIN IMMEDIATE, each statement
 *   on the success of the one before and while the transaction is open, COMMIT, ROLLBACK if the
 *   commit did not happen). In a Worker the Durable Object's thread runs every write of the queue,
 *   so this is its hot loop. Batches that follow one another go on one stream kept open between
 *   them (`WriteStream`): the server keeps one connection for them rather than opening one per request.
 * - `HttpClient`: that, plus one read per request: the subset of `Client` a transport uses, for a
 *   Worker, which then bundles no database client at all.
 *
 * Errors look like the client's: a failed statement carries `code` and `statementIndex`
 * (committer.ts rejects only the write it belongs to), an HTTP error `status` and
 * `code: "SERVER_ERROR"`, an answer that is not a pipeline result `HRANA_PROTO_ERROR`; errors.ts
 * maps them all.
 */
import type { Client, InStatement, ResultSet, Row } from "@libsql/client";
import { retryAfterMs } from "./backoff.js";

export interface HttpTarget {
  /** An `http(s)://` URL of a sqld or Turso database. */
  url: string;
  authToken?: string | undefined;
  fetch: typeof fetch;
  /**
   * Whether the write path may keep its stream open between batches (`WriteStream`). Default: yes,
   * but not in a Worker, where a transport made per request could not close what it kept.
   */
  keepStream?: boolean | undefined;
  /** How long a kept stream waits for the next batch (default `STREAM_KEEP_MS`). */
  keepStreamMs?: number | undefined;
}

/**
 * The `http(s)://` URL the write path posts to, from a database URL: `libsql://` means HTTPS
 * (HTTP with `?tls=0`), as `@libsql/client` reads it. Undefined for anything else (files, ws).
 */
export function httpUrlOf(database: string): string | undefined {
  if (!/^(https?|libsql):\/\//i.test(database)) return undefined;
  const u = new URL(database.replace(/^libsql:/i, /[?&]tls=0\b/.test(database) ? "http:" : "https:"));
  u.search = "";
  u.hash = "";
  return u.toString();
}

/** What the database said about a statement, a step, or the whole request. */
export class HranaError extends Error {
  readonly code: string;
  /** The failing statement's index among those sent (not counting BEGIN), when one failed. */
  readonly statementIndex: number | undefined;
  /** The HTTP status, for an answer that was not 200. */
  readonly status: number | undefined;
  /** The answer's `Retry-After`, in ms, when it had one. */
  readonly retryAfterMs: number | undefined;

  constructor(
    message: string,
    code: string,
    opts: { statementIndex?: number; status?: number; retryAfterMs?: number | undefined } = {},
  ) {
    super(`${code}: ${message}`);
    this.name = "HranaError";
    this.code = code;
    this.statementIndex = opts.statementIndex;
    this.status = opts.status;
    this.retryAfterMs = opts.retryAfterMs;
  }
}

type WireValue =
  | { type: "null" }
  | { type: "integer"; value: string }
  | { type: "float"; value: number }
  | { type: "text"; value: string }
  | { type: "blob"; base64: string };

interface WireResult {
  cols: Array<{ name: string | null }>;
  rows: WireValue[][];
  affected_row_count: number;
  last_insert_rowid: string | null;
}

interface WireBatchResult {
  step_results: Array<WireResult | null>;
  step_errors: Array<{ message: string; code?: string | null } | null>;
}

type Cond =
  | { type: "ok"; step: number }
  | { type: "not"; cond: Cond }
  | { type: "and"; conds: Cond[] }
  | { type: "is_autocommit" };

/** Sends one write batch; `signal` abandons it (the write path's request deadline). */
export type Send = (stmts: InStatement[], signal?: AbortSignal) => Promise<ResultSet[]>;

const pipelineUrl = (base: string) => `${base.replace(/\/+$/, "")}/v3/pipeline`;

/** One pipeline, `requests` on the stream `baton` names (null: a new one), posted to `url`. */
type Post = (
  url: string,
  baton: string | null,
  requests: object[],
  signal: AbortSignal | undefined,
) => Promise<Response>;

function poster(target: HttpTarget): Post {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (target.authToken) headers.authorization = `Bearer ${target.authToken}`;
  return (url, baton, requests, signal) =>
    target.fetch(url, {
      method: "POST",
      headers,
      ...(signal === undefined ? {} : { signal }),
      body: JSON.stringify({ baton, requests }),
    });
}

/**
 * A stream is kept only while batches follow one another: a batch sent within this long of the last
 * answer keeps its stream for the next one, and a kept stream is closed after this long without a
 * batch. sqld gives each open stream one of its connections (128 by default; then it refuses with
 * 429), so a writer that stops leaves none open, and one that writes once in a while (or once, as a
 * transport per request does) opens and closes its stream with each batch, as before.
 */
const STREAM_KEEP_MS = 200;

/** In a Worker (workerd): nothing of a request runs after it ends, so a kept stream could not be closed. */
const inWorkers = () =>
  (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent === "Cloudflare-Workers";

/**
 * The write path's stream, kept open between its requests while they follow one another (a Hrana
 * baton): the server runs them on one connection instead of opening one per request. One request
 * at a time uses it; one sent while another is out goes on a stream of its own. After a failure the
 * next request opens a new stream; a request the server refused for its stream (expired, or unknown
 * after a restart: HTTP 400, nothing run) goes again at once on a new one.
 */
class WriteStream {
  readonly #target: HttpTarget;
  readonly #post: Post;
  readonly #keeps: boolean;
  readonly #keepMs: number;
  #kept: { baton: string; url: string } | undefined;
  #answeredAt = Number.NEGATIVE_INFINITY;
  #busy = false;
  #idle: ReturnType<typeof setTimeout> | undefined;

  constructor(target: HttpTarget) {
    this.#target = target;
    this.#post = poster(target);
    this.#keeps = target.keepStream ?? !inWorkers();
    this.#keepMs = target.keepStreamMs ?? STREAM_KEEP_MS;
  }

  /** The answer to `request`, its stream kept for the next one while batches follow one another. */
  async send(request: object, signal: AbortSignal | undefined): Promise<PipelineBody> {
    const fresh = pipelineUrl(this.#target.url);
    if (this.#busy) return pipelineBody(await this.#post(fresh, null, [request, { type: "close" }], signal));
    this.#busy = true;
    const keep = this.#keeps && Date.now() - this.#answeredAt < this.#keepMs;
    const kept = keep ? this.#kept : undefined;
    this.#kept = undefined;
    const requests = keep ? [request] : [request, { type: "close" }];
    try {
      let res = await this.#post(kept?.url ?? fresh, kept?.baton ?? null, requests, signal);
      if (kept !== undefined && res.status === 400) {
        await res.body?.cancel();
        res = await this.#post(fresh, null, requests, signal);
      }
      const body = await pipelineBody(res);
      this.#answeredAt = Date.now();
      if (keep && typeof body.baton === "string") {
        this.#kept = { baton: body.baton, url: typeof body.base_url === "string" ? pipelineUrl(body.base_url) : fresh };
      }
      if (this.#kept !== undefined) this.#idleAfter();
      return body;
    } finally {
      this.#busy = false;
    }
  }

  /**
   * Closes the kept stream, if any; resolves once the server answered (or failed to: it ends the
   * stream after 10 idle seconds anyway). A database about to be dropped waits for it.
   */
  async close(): Promise<void> {
    this.#stopIdle();
    const kept = this.#kept;
    this.#kept = undefined;
    if (kept === undefined) return;
    await this.#post(kept.url, kept.baton, [{ type: "close" }], AbortSignal.timeout(1_000)).then(
      (res) => res.body?.cancel(),
      () => {},
    );
  }

  /**
   * Closes the kept stream once no batch has followed for `keepMs`. One timer at a time, looking again
   * when it fires, rather than one set per batch: batches follow one another hundreds of times a second.
   */
  #idleAfter(ms = this.#keepMs): void {
    if (this.#idle !== undefined) return;
    this.#idle = setTimeout(() => {
      this.#idle = undefined;
      if (this.#busy || this.#kept === undefined) return; // the batch under way sets it again
      const left = this.#answeredAt + this.#keepMs - Date.now();
      if (left > 0) this.#idleAfter(left);
      else void this.close();
    }, ms);
    // Never what keeps a Node process alive.
    (this.#idle as { unref?: () => void }).unref?.();
  }

  #stopIdle(): void {
    if (this.#idle !== undefined) clearTimeout(this.#idle);
    this.#idle = undefined;
  }
}

interface PipelineBody {
  baton?: string | null;
  base_url?: string | null;
  results?: Array<
    { type: "ok"; response: unknown } | { type: "error"; error: { message: string; code?: string | null } }
  >;
}

/** A pipeline's 200 answer, read; any other answer is the server's error (or its text is not JSON). */
async function pipelineBody(res: Response): Promise<PipelineBody> {
  if (res.status !== 200) {
    const text = await res.text().catch(() => "");
    let message = text.slice(0, 500) || res.statusText;
    try {
      message = (JSON.parse(text) as { message?: string }).message ?? message;
    } catch {
      // not JSON: keep the text
    }
    throw new HranaError(`the server answered ${res.status}: ${message}`, "SERVER_ERROR", {
      status: res.status,
      retryAfterMs: retryAfterMs(res.headers.get("retry-after")),
    });
  }
  return (await res.json().catch((e: unknown) => {
    // A body cut short reads as JSON that ends early: the answer never came whole.
    if (e instanceof SyntaxError) throw new HranaError(`the server's answer is not JSON: ${e.message}`, PROTO);
    throw e;
  })) as PipelineBody;
}

/** The first request's response, or its error (the database's, or an answer that is not a pipeline's). */
function firstOf<T>(body: PipelineBody): T {
  const first = Array.isArray(body?.results) ? body.results[0] : undefined;
  if (first?.type !== "ok" && first?.type !== "error") {
    throw new HranaError("the server's answer is not a Hrana 3 pipeline result", PROTO);
  }
  if (first.type === "error") throw new HranaError(first.error.message, first.error.code ?? "UNKNOWN");
  return first.response as T;
}

const PROTO = "HRANA_PROTO_ERROR";

/**
 * Sends `stmts` as one atomic write batch and returns a result per statement. Hrana 3 over HTTP
 * (`/v3/pipeline`, JSON), which Turso and sqld since 0.21 speak. A server that does not know the
 * path (404: an older sqld) applied nothing; with a `fallback` (`client.batch`, which speaks whatever
 * the server does), that batch and every later one go through it.
 */
export function httpWriter(target: HttpTarget, fallback?: Send): Send & { close(): Promise<void> } {
  const stream = new WriteStream(target);
  let v3 = true;
  const send = async (stmts: InStatement[], signal?: AbortSignal): Promise<ResultSet[]> => {
    if (!v3 && fallback !== undefined) return fallback(stmts);
    let body: PipelineBody;
    try {
      body = await stream.send({ type: "batch", batch: { steps: steps(stmts) } }, signal);
    } catch (e) {
      if (!(e instanceof HranaError && e.status === 404 && fallback !== undefined)) throw e;
      v3 = false;
      return fallback(stmts);
    }
    return results(firstOf<{ result: WireBatchResult }>(body).result, stmts.length);
  };
  return Object.assign(send, { close: () => stream.close() });
}

/**
 * The subset of `@libsql/client`'s `Client` a transport uses (`execute`, `batch(..., "write")`,
 * `close`), over Hrana 3 alone: what the Worker opens its databases with. A server without Hrana 3
 * (sqld before 0.21) answers 404, which maps to UNAVAILABLE like a database that is not there.
 */
export class HttpClient {
  readonly protocol = "http";
  closed = false;
  /** The write path's request (committer.ts sends its batches through it). */
  readonly send: Send & { close(): Promise<void> };
  readonly #post: Post;
  readonly #url: string;
  readonly #readTimeoutMs: number;

  /** `readTimeoutMs`: each read's request is abandoned after it (writes carry their own deadline). */
  constructor(target: HttpTarget, readTimeoutMs: number) {
    this.#post = poster(target);
    this.#url = pipelineUrl(target.url);
    this.send = httpWriter(target);
    this.#readTimeoutMs = readTimeoutMs;
  }

  /** One statement on its own (autocommit), in one request, on a stream of its own. */
  async execute(stmt: InStatement): Promise<ResultSet> {
    this.#open();
    const res = await this.#post(
      this.#url,
      null,
      [{ type: "execute", stmt: wireStmt(stmt, true) }, { type: "close" }],
      AbortSignal.timeout(this.#readTimeoutMs),
    );
    return resultSet(firstOf<{ result: WireResult }>(await pipelineBody(res)).result);
  }

  /** A write batch (BEGIN IMMEDIATE ... COMMIT) in one request; the only mode a transport asks for. */
  async batch(stmts: InStatement[], mode?: string): Promise<ResultSet[]> {
    this.#open();
    if (mode !== "write") throw new TypeError(`HttpClient runs write batches only, not ${String(mode)}`);
    return this.send(stmts);
  }

  /** Pulls an embedded replica's frames: nothing to pull over HTTP. */
  async sync(): Promise<undefined> {
    return undefined;
  }

  close(): void {
    void this.shut();
  }

  /** Closes it, and resolves once its write stream is closed on the server too. */
  async shut(): Promise<void> {
    this.closed = true;
    await this.send.close();
  }

  #open(): void {
    if (this.closed) throw new HranaError("the client is closed", "CLIENT_CLOSED");
  }
}

/** An `HttpClient` where a transport takes a `Client` (as `openLocal` gives a local file's). */
export const httpClient = (target: HttpTarget, readTimeoutMs: number): Client =>
  new HttpClient(target, readTimeoutMs) as unknown as Client;

/** BEGIN IMMEDIATE, the statements, COMMIT, ROLLBACK: the steps `client.batch(..., "write")` sends. */
function steps(stmts: InStatement[]) {
  // Each step runs only if the one before succeeded and the transaction is still open.
  const open = (after: number): Cond => ({
    type: "and",
    conds: [
      { type: "ok", step: after },
      { type: "not", cond: { type: "is_autocommit" } },
    ],
  });
  const out: Array<{ condition?: Cond; stmt: WireStmt }> = [{ stmt: { sql: "BEGIN IMMEDIATE", want_rows: false } }];
  stmts.forEach((s, i) => {
    out.push({ condition: open(i), stmt: wireStmt(s, true) });
  });
  const commit = out.length;
  out.push({ condition: open(commit - 1), stmt: { sql: "COMMIT", want_rows: false } });
  out.push({
    condition: { type: "not", cond: { type: "ok", step: commit } },
    stmt: { sql: "ROLLBACK", want_rows: false },
  });
  return out;
}

interface WireStmt {
  sql: string;
  args?: WireValue[];
  want_rows: boolean;
}

function wireStmt(s: InStatement, wantRows: boolean): WireStmt {
  const sql = typeof s === "string" ? s : s.sql;
  const args = typeof s === "string" ? undefined : s.args;
  if (args !== undefined && !Array.isArray(args))
    throw new TypeError("Hrana requests here take positional arguments only");
  return { sql, args: (args ?? []).map(toWire), want_rows: wantRows };
}

/** As `@libsql/client` encodes arguments: every JS number as a float (SQLite's affinity does the rest). */
function toWire(v: unknown): WireValue {
  if (v === null || v === undefined) return { type: "null" };
  if (typeof v === "string") return { type: "text", value: v };
  if (typeof v === "number") {
    if (!Number.isFinite(v))
      throw new RangeError("Only finite numbers (not Infinity or NaN) can be passed as arguments");
    return { type: "float", value: v };
  }
  if (typeof v === "bigint") return { type: "integer", value: v.toString() };
  if (typeof v === "boolean") return { type: "integer", value: v ? "1" : "0" };
  throw new TypeError(`unsupported argument type: ${typeof v}`);
}

function results(batch: WireBatchResult, count: number): ResultSet[] {
  const begin = batch.step_errors[0];
  if (begin) throw new HranaError(begin.message, begin.code ?? "UNKNOWN");
  const out: ResultSet[] = [];
  for (let i = 0; i < count; i++) {
    const error = batch.step_errors[i + 1];
    if (error) throw new HranaError(error.message, error.code ?? "UNKNOWN", { statementIndex: i });
    const r = batch.step_results[i + 1];
    if (!r) {
      throw new HranaError(
        "Statement in a batch was not executed, probably because the transaction has been rolled back",
        "TRANSACTION_CLOSED",
        { statementIndex: i },
      );
    }
    out.push(resultSet(r));
  }
  const commit = batch.step_errors[count + 1];
  if (commit) throw new HranaError(commit.message, commit.code ?? "UNKNOWN");
  if (!batch.step_results[count + 1]) throw new HranaError("the transaction was not committed", "TRANSACTION_CLOSED");
  return out;
}

function resultSet(r: WireResult): ResultSet {
  const columns = r.cols.map((c) => c.name ?? "");
  const rows = r.rows.map((values) => {
    const row: Record<string, unknown> = {};
    for (let i = 0; i < values.length; i++) {
      const name = columns[i] as string;
      if (!(name in row)) row[name] = fromWire(values[i] as WireValue);
    }
    return row as Row;
  });
  const rowsAffected = r.affected_row_count;
  const lastInsertRowid = r.last_insert_rowid === null ? undefined : BigInt(r.last_insert_rowid);
  return {
    columns,
    columnTypes: columns.map(() => ""),
    rows,
    rowsAffected,
    lastInsertRowid,
    toJSON: () => ({ columns, rows, rowsAffected, lastInsertRowid: lastInsertRowid?.toString() }),
  };
}

/** As the client reads values with `intMode: "number"`: integers beyond 2^53 are refused, not rounded. */
function fromWire(v: WireValue): unknown {
  switch (v.type) {
    case "null":
      return null;
    case "integer": {
      const n = Number(v.value);
      if (!Number.isSafeInteger(n)) {
        throw new RangeError("Received integer which is too large to be safely represented as a JavaScript number");
      }
      return n;
    }
    case "float":
    case "text":
      return v.value;
    case "blob": {
      const bin = atob(v.base64);
      const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      return bytes.buffer;
    }
  }
}
