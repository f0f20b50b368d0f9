/**
 * The package as a release makes it, for the tests that install it into a fresh project: the
 * tarball packed from a clean copy of the repo (what a clone holds, no dist/), and the code blocks of
 * the docs that such a project runs (`<!-- example: NAME ... -->`).
 */
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const run = promisify(execFile);

/** The environment without what `npm test` itself set (npm_config_*, npm_package_*): a user's shell. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  return { ...env, ...extra };
}

/**
 * Packs a clean copy of the repo (tracked files and new ones not ignored, sharing node_modules) into
 * `work`, as a release does: `npm run pack` where the repo has that script, else a plain `npm pack`.
 * Answers the tarball's path.
 */
export async function packTarball(work: string): Promise<string> {
  const clone = join(work, "clone");
  const { stdout } = await run("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: ROOT,
    maxBuffer: 16 * 1024 * 1024,
  });
  for (const f of stdout.split("\0")) {
    if (f === "" || !existsSync(join(ROOT, f))) continue;
    mkdirSync(dirname(join(clone, f)), { recursive: true });
    cpSync(join(ROOT, f), join(clone, f));
  }
  symlinkSync(join(ROOT, "node_modules"), join(clone, "node_modules"), "dir");
  const tgzDir = join(work, "tgz");
  mkdirSync(tgzDir);
  const scripts = (
    JSON.parse(readFileSync(join(clone, "package.json"), "utf8")) as { scripts?: Record<string, string> }
  ).scripts;
  const args = scripts?.pack === undefined ? ["pack", "--pack-destination", tgzDir] : ["run", "pack", "--", tgzDir];
  await run("npm", args, { cwd: clone, env: cleanEnv(), timeout: 180_000 });
  const [name] = readdirSync(tgzDir).filter((f) => f.endsWith(".tgz"));
  if (name === undefined) throw new Error(`npm ${args.join(" ")} made no tarball`);
  return join(tgzDir, name);
}

/** The code block that follows `<!-- example: <name> ... -->` in the README, or else in a page of docs/. */
export function docExample(name: string): string {
  const marker = `<!-- example: ${name}`;
  const pages = readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => join("docs", f));
  const file = ["README.md", ...pages].find((f) => readFileSync(join(ROOT, f), "utf8").includes(marker));
  if (file === undefined) throw new Error(`no example ${name} in README.md or docs/*.md`);
  const text = readFileSync(join(ROOT, file), "utf8");
  const m = /```[a-z]*\n([\s\S]*?)```/.exec(text.slice(text.indexOf(marker)));
  if (!m) throw new Error(`no code block after the marker for ${name} in ${file}`);
  return m[1] as string;
}
