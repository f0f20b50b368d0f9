/**
 * No dependency's install script runs at `npm install`, on any npm the README's commands meet (10.8
 * and later): the repo's .npmrc turns scripts off, and every dependency that has one is listed in
 * package.json's `allowScripts` (what npm 11.16+ reads) as reviewed and not run. A dependency that
 * gains an install script fails this test until someone reviews it and lists it.
 */
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const read = (f: string) => readFileSync(join(ROOT, f), "utf8");
const pkg = JSON.parse(read("package.json")) as {
  scripts: Record<string, string>;
  allowScripts?: Record<string, boolean>;
};
const lock = JSON.parse(read("package-lock.json")) as {
  packages: Record<string, { hasInstallScript?: boolean }>;
};

/** `node_modules/a/node_modules/@b/c` → `@b/c`. */
const nameOf = (path: string) => path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length);

it("the repo's .npmrc turns install scripts off (npm 10 has no allowScripts to enforce)", () => {
  const settings = read(".npmrc")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  expect(settings).toContain("ignore-scripts=true");
  expect(settings.filter((l) => /^ignore-scripts\s*=/.test(l))).toEqual(["ignore-scripts=true"]);
});

it("every dependency with an install script is listed in allowScripts as not run, and nothing else is", () => {
  const withScripts = [
    ...new Set(
      Object.entries(lock.packages)
        .filter(([path, p]) => path !== "" && p.hasInstallScript)
        .map(([path]) => nameOf(path)),
    ),
  ].sort();
  expect(withScripts.length).toBeGreaterThan(0);
  expect(Object.keys(pkg.allowScripts ?? {}).sort()).toEqual(withScripts);
  // `true` would be a promise the .npmrc breaks: nothing runs.
  expect(Object.values(pkg.allowScripts ?? {}).every((v) => v === false)).toBe(true);
});

it("the repo has no install-time script of its own (an install runs none of them)", () => {
  for (const hook of ["preinstall", "install", "postinstall", "prepare", "preprepare", "postprepare"]) {
    expect(pkg.scripts[hook], hook).toBeUndefined();
  }
});
