/**
 * For the tests that install the package as users get it: the tarball `npm run pack` makes from this
 * tree (built once for each content of what goes into it, and kept under node_modules/.cache), and the
 * examples of the docs.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const run = promisify(execFile);

/** What `npm run pack` reads: the sources, the build's script and configuration, the manifest and README. */
const INPUTS = [
  "src",
  "scripts/build.ts",
  "package.json",
  "README.md",
  "tsconfig.base.json",
  "tsconfig.json",
  "tsconfig.build.json",
];

/** The environment without what `npm test` itself set (npm_config_*, npm_package_*): a user's shell. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  return { ...env, ...extra };
}

/** The path of the packed tarball of this tree. */
export async function packedTarball(): Promise<string> {
  const { stdout } = await run("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard", ...INPUTS], {
    cwd: ROOT,
    maxBuffer: 16 * 1024 * 1024,
  });
  const hash = createHash("sha256");
  for (const f of stdout.split("\0").sort()) {
    if (f === "" || !existsSync(join(ROOT, f))) continue;
    hash
      .update(f)
      .update("\0")
      .update(readFileSync(join(ROOT, f)))
      .update("\0");
  }
  const cache = join(ROOT, "node_modules", ".cache", "turso-queue-tarball");
  const dir = join(cache, hash.digest("hex").slice(0, 16));
  if (!existsSync(dir)) {
    mkdirSync(cache, { recursive: true });
    const tmp = mkdtempSync(join(cache, "tmp-"));
    try {
      await run("npm", ["run", "pack", "--", tmp], { cwd: ROOT, env: cleanEnv(), timeout: 300_000 });
      renameSync(tmp, dir);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }
  const [name] = readdirSync(dir).filter((f) => f.endsWith(".tgz"));
  if (!name) throw new Error(`no tarball in ${dir}`);
  return join(dir, name);
}

/** The code block that follows `<!-- example: <name> ... -->` in the README, or else in a page of docs/. */
export function docExample(name: string): string {
  const marker = `<!-- example: ${name}`;
  const pages = readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => join("docs", f));
  const file = ["README.md", ...pages].find((f) => readFileSync(join(ROOT, f), "utf8").includes(marker));
  if (!file) throw new Error(`no example ${name} in README.md or docs/*.md`);
  const text = readFileSync(join(ROOT, file), "utf8");
  const m = /```[a-z]*\n([\s\S]*?)```/.exec(text.slice(text.indexOf(marker)));
  if (!m) throw new Error(`no code block after the marker for ${name} in ${file}`);
  return m[1] as string;
}
