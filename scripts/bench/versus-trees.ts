/**
 * The two checkouts bench/versus.ts compares: A (this working tree, or a worktree of `--a=<rev>`) and B
 * (a worktree of `<rev>`), each with its own library (imported from its src/, a separate module instance)
 * and its own Worker bundle (built in /tmp, so as not to touch the dist-worker/ other benches serve).
 */
import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { ConsumerQueue, ConsumeSummary } from "../../src/consume/consume.js";
import { buildWorker } from "../support/miniflare.js";
import { ROOT } from "./config.js";

/** What the bench uses of a tree's LibsqlTransport: the same in both trees (checked when loaded). */
export interface Transport extends ConsumerQueue {
  publish(groupId: string, event: unknown): Promise<number>;
  publishMany(messages: { groupId: string; event: unknown }[]): Promise<number[]>;
  close(): void;
}

export interface Lib {
  LibsqlTransport: { create(database: string): Promise<Transport> };
  consume(
    queue: Transport,
    handler: (event: unknown) => unknown,
    options: {
      workerId: string;
      concurrency: number;
      visibility: number;
      signal: AbortSignal;
      onError: (e: unknown) => void;
    },
  ): Promise<ConsumeSummary>;
}

export interface Tree {
  label: "A" | "B";
  /** Commit, and the files that differ from it, for the report. */
  describe: string;
  root: string;
  lib: Lib;
  /** Its Worker bundle's directory (absolute). */
  outdir: string;
}

const git = (args: string[], cwd = ROOT): string =>
  execFileSync("git", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();

/**
 * A detached worktree of `rev` under /tmp (`preferred` when free or already at that commit), its
 * node_modules a symlink to ours: today's dependencies are a superset of the older trees'.
 */
export function worktreeAt(rev: string, preferred?: string): string {
  const sha = git(["rev-parse", "--verify", `${rev}^{commit}`]);
  const candidates = [preferred, `/tmp/tq-${sha.slice(0, 10)}`].filter((d): d is string => d !== undefined);
  let dir: string | undefined;
  for (const d of candidates) {
    if (!existsSync(d)) {
      git(["worktree", "add", "--detach", d, sha]);
      dir = d;
      break;
    }
    if (existsSync(join(d, ".git")) && git(["rev-parse", "HEAD"], d) === sha) {
      dir = d;
      break;
    }
  }
  if (dir === undefined) throw new Error(`no worktree at ${rev}: ${candidates.join(", ")} hold something else`);
  const nm = join(dir, "node_modules");
  if (!existsSync(nm) && !isLink(nm)) symlinkSync(join(ROOT, "node_modules"), nm);
  return dir;
}

const isLink = (p: string): boolean => {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
};

/** A checkout's commit and its uncommitted changes to what is measured (src/, wrangler.toml, package.json). */
function describe(root: string): string {
  const head = git(["rev-parse", "--short=10", "HEAD"], root);
  // Not trimmed: porcelain's first column may be a space.
  const dirty = execFileSync("git", ["status", "--porcelain", "--", "src", "wrangler.toml", "package.json"], {
    cwd: root,
    encoding: "utf8",
  })
    .split("\n")
    .filter(Boolean)
    .map((l) => l.slice(3));
  return dirty.length ? `${head} + uncommitted ${dirty.join(", ")}` : head;
}

/** Loads a tree's library and builds its Worker bundle (wrangler, ~4 s). */
export async function loadTree(label: "A" | "B", root: string): Promise<Tree> {
  // tsx compiles the tree's .ts on import; an absolute URL makes it a module instance of its own.
  const mod = (await import(pathToFileURL(join(root, "src", "index.ts")).href)) as Partial<Lib>;
  if (typeof mod.LibsqlTransport?.create !== "function" || typeof mod.consume !== "function") {
    throw new Error(`${root}/src/index.ts has no LibsqlTransport.create or consume`);
  }
  const outdir = join("/tmp/tq-versus", `${label}${root.replace(/[^A-Za-z0-9]+/g, "-")}`);
  mkdirSync(outdir, { recursive: true });
  buildWorker({ root, outdir });
  return { label, describe: describe(root), root, lib: mod as Lib, outdir };
}
