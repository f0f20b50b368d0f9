/**
 * A throwaway PostgreSQL (Debian's `postgresql` package: `apt-get install -y postgresql`) on a free
 * loopback port, in a temp directory removed on stop, for the pg-boss side of the benchmark.
 * Durable as shipped: fsync and synchronous_commit on. Run as the `postgres` user when we are root
 * (initdb refuses root). `startPostgres()` answers undefined when PostgreSQL is not installed.
 */
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./sqld.js";

export interface Postgres {
  url: string;
  port: number;
  version: string;
  stop(): Promise<void>;
}

/** The directory of initdb/pg_ctl/postgres: pg_config's, else the newest /usr/lib/postgresql/<v>/bin. */
export function postgresBin(): string | undefined {
  try {
    const dir = execFileSync("pg_config", ["--bindir"], { stdio: ["ignore", "pipe", "ignore"] })
      .toString()
      .trim();
    if (existsSync(join(dir, "pg_ctl"))) return dir;
  } catch {
    // no pg_config (it comes with libpq-dev): look where Debian puts the server
  }
  const base = "/usr/lib/postgresql";
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base)
    .filter((v) => existsSync(join(base, v, "bin", "pg_ctl")))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(base, versions[0], "bin");
}

export async function startPostgres(): Promise<Postgres | undefined> {
  const bin = postgresBin();
  if (!bin) return undefined;
  const root = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), "turso-queue-pg-"));
  const data = join(dir, "data");
  let uid: number | undefined;
  if (root) {
    uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    chownSync(dir, uid, gid);
    chmodSync(dir, 0o700);
  }
  // As the postgres user when we are root; as ourselves otherwise.
  const as = (cmd: string, args: string[]) =>
    root
      ? execFileSync("runuser", ["-u", "postgres", "--", cmd, ...args], { stdio: "pipe" })
      : execFileSync(cmd, args, { stdio: "pipe" });
  const port = await freePort();
  try {
    as(join(bin, "initdb"), ["-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"]);
    const opts = [
      `-p ${port}`,
      `-k ${dir}`,
      "-c listen_addresses=127.0.0.1",
      "-c fsync=on",
      "-c synchronous_commit=on",
      "-c max_connections=200",
    ].join(" ");
    as(join(bin, "pg_ctl"), ["-D", data, "-l", join(dir, "log"), "-w", "-t", "60", "-o", opts, "start"]);
  } catch (e) {
    const log = existsSync(join(dir, "log")) ? readFileSync(join(dir, "log"), "utf8").slice(-2000) : "";
    rmSync(dir, { recursive: true, force: true });
    const err = e as { stderr?: Buffer; message: string };
    throw new Error(`PostgreSQL did not start: ${err.message}\n${err.stderr?.toString() ?? ""}\n${log}`);
  }
  const pid = Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]);
  // If we die without stopping it, a watchdog shuts it down (SIGQUIT: immediate) and removes the dir.
  spawn(
    "sh",
    [
      "-c",
      `while kill -0 ${process.pid} 2>/dev/null && kill -0 ${pid} 2>/dev/null; do sleep 1; done; kill -QUIT ${pid} 2>/dev/null; sleep 2; rm -rf '${dir}'`,
    ],
    { detached: true, stdio: "ignore" },
  ).unref();
  const version = execFileSync(join(bin, "postgres"), ["--version"]).toString().trim();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    version,
    async stop() {
      try {
        as(join(bin, "pg_ctl"), ["-D", data, "-m", "fast", "-w", "-t", "30", "stop"]);
      } catch {
        try {
          process.kill(pid, "SIGQUIT");
        } catch {
          // already gone
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
