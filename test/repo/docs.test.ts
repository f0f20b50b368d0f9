/**
 * The docs and the comments name only paths that exist: a README, a doc page, the changelog, a
 * benchmark note or a comment that names `src/...`, `test/...`, `scripts/...` or `docs/...` is
 * checked against the tree, so that a file moved or removed cannot leave a pointer to nowhere.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

function filesUnder(dir: string, ext: RegExp): string[] {
  if (!existsSync(join(ROOT, dir))) return [];
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    return statSync(join(ROOT, path)).isDirectory() ? filesUnder(path, ext) : ext.test(name) ? [path] : [];
  });
}

const sources = [
  ...["README.md", "CHANGELOG.md", "BENCHMARKS.md", "wrangler.toml", "vitest.config.ts"].filter((f) =>
    existsSync(join(ROOT, f)),
  ),
  ...filesUnder("docs", /\.md$/),
  ...filesUnder("src", /\.ts$/),
  ...filesUnder("test", /\.ts$/),
  ...filesUnder("scripts", /\.ts$/),
  ...filesUnder(".ci", /.*/),
];

/** `src/app/writer/pusher.ts`, `test/worker/`, `docs/http.md`: a path from the repo's root, as written. */
const PATH = /(?<![\w./@-])((?:src|test|scripts|docs)\/[\w./-]*[\w/])/g;
/** `writer/pusher.ts`, `schema.ts`: a file named by its tail, in a doc or a comment. */
const TAIL = /(?<![\w./@:-])((?:[\w-]+\/)*[\w-]+\.(?:ts|md))\b/g;
/** Files of other projects that the docs name on purpose (models the project follows). */
const ELSEWHERE = new Set(["plans.ts"]);

const tracked = [...sources, ...filesUnder("src", /.*/), ...filesUnder("docs", /.*/)];
const named = (tail: string) => tracked.some((f) => f === tail || f.endsWith(`/${tail}`));

/** What of a file is prose: all of a doc, the comments of a source file. */
function prose(file: string, text: string): string {
  if (!file.endsWith(".ts")) return text;
  const comments = text.match(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/g) ?? [];
  return comments.join("\n");
}

it("every path a doc or a comment names exists", () => {
  const missing: string[] = [];
  for (const file of sources) {
    const text = readFileSync(join(ROOT, file), "utf8");
    for (const m of text.matchAll(PATH)) {
      const path = (m[1] as string).replace(/\.js$/, ".ts");
      // A module named by its built name (`src/core/transport.js`) is its source.
      if (!existsSync(join(ROOT, path)) && !existsSync(join(ROOT, path.replace(/\.ts$/, ".js")))) {
        const line = text.slice(0, m.index).split("\n").length;
        missing.push(`${file}:${line} ${m[1]}`);
      }
    }
  }
  expect(missing).toEqual([]);
});

it("every file a doc or a comment names by its tail exists", () => {
  const missing: string[] = [];
  for (const file of sources) {
    for (const m of prose(file, readFileSync(join(ROOT, file), "utf8")).matchAll(TAIL)) {
      const tail = m[1] as string;
      if (!ELSEWHERE.has(tail) && !named(tail) && !named(tail.replace(/\.ts$/, ".js")))
        missing.push(`${file}: ${tail}`);
    }
  }
  expect([...new Set(missing)]).toEqual([]);
});
