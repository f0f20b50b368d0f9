/**
 * The queues the benchmarks compare with (pg-boss, and plainjob on better-sqlite3) are not
 * dependencies of the repo: the first benchmark that needs them installs them, at the versions
 * scripts/bench/peers/package-lock.json pins, into node_modules/.cache/bench-peers (again whenever
 * that lock changes). better-sqlite3 is a native addon, and its install script (prebuild-install,
 * else node-gyp) is the one script that runs there, by name.
 */
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { ROOT } from "./config.js";
import { progress } from "./lib.js";

const SOURCE = join(ROOT, "scripts", "bench", "peers");
const DIR = join(ROOT, "node_modules", ".cache", "bench-peers");
/** Written last, holding the lock it installed: a half-done install is done again. */
const STAMP = join(DIR, "installed-lock.json");

let ready: NodeJS.Require | undefined;

/** `require` from the peers' directory, after installing them if they are missing or stale. */
export function peerRequire(): NodeJS.Require {
  if (ready) return ready;
  const lock = readFileSync(join(SOURCE, "package-lock.json"), "utf8");
  if (!existsSync(STAMP) || readFileSync(STAMP, "utf8") !== lock) {
    progress(
      "installing the benchmarks' peers (pg-boss, plainjob, better-sqlite3) into node_modules/.cache/bench-peers",
    );
    rmSync(DIR, { recursive: true, force: true });
    mkdirSync(DIR, { recursive: true });
    for (const f of ["package.json", "package-lock.json"]) copyFileSync(join(SOURCE, f), join(DIR, f));
    const npm = (args: string[]) =>
      execFileSync("npm", [...args, "--no-audit", "--no-fund"], { cwd: DIR, stdio: ["ignore", "ignore", "inherit"] });
    npm(["ci", "--ignore-scripts"]);
    npm(["rebuild", "better-sqlite3", "--ignore-scripts=false"]);
    writeFileSync(STAMP, lock);
  }
  ready = createRequire(join(DIR, "package.json"));
  return ready;
}

/** A peer's ES module (pg-boss). */
export async function peerImport<T>(name: string): Promise<T> {
  return (await import(pathToFileURL(peerRequire().resolve(name)).href)) as T;
}
