/**
 * This repo's Worker as `npm run deploy:dry` builds it (wrangler.toml: minified, aliased): under its
 * gzip budget, with no database client in it (the Worker speaks Hrana itself, src/core/hrana.ts),
 * and a top level that formats nothing with a locale (in workerd the first locale loads ICU's data,
 * the largest cost of an isolate's start: BENCHMARKS.md, "The Worker's bundle and startup").
 * Sizes and calls are exact; the startup time itself is `npm run startup`'s to measure.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { cleanEnv, ROOT } from "./tarball.js";

/** The budget the bundle is held to, in KiB of gzip as wrangler reports it. */
const GZIP_BUDGET_KIB = 128;

const run = promisify(execFile);
let out: string;
let stdout: string;

beforeAll(async () => {
  out = mkdtempSync(join(tmpdir(), "turso-queue-bundle-"));
  ({ stdout } = await run(
    join(ROOT, "node_modules", ".bin", "wrangler"),
    ["deploy", "--dry-run", "--outdir", out, "--metafile", join(out, "meta.json")],
    { cwd: ROOT, env: cleanEnv({ WRANGLER_SEND_METRICS: "false" }), timeout: 120_000 },
  ));
}, 150_000);

afterAll(() => rmSync(out, { recursive: true, force: true }));

it(`is under ${GZIP_BUDGET_KIB} KiB of gzip`, () => {
  const gzip = /Total Upload: [\d.]+ KiB \/ gzip: ([\d.]+) KiB/.exec(stdout)?.[1];
  expect(gzip, stdout).toBeDefined();
  expect(Number(gzip)).toBeLessThan(GZIP_BUDGET_KIB);
});

it("bundles no database client: reads and writes go out as the Worker's own Hrana requests", () => {
  const meta = JSON.parse(readFileSync(join(out, "meta.json"), "utf8")) as { inputs: Record<string, unknown> };
  const inputs = Object.keys(meta.inputs);
  expect(inputs.some((f) => f.includes("src/core/hrana.ts"))).toBe(true);
  expect(inputs.filter((f) => /node_modules\/(@libsql|libsql|js-base64)\//.test(f))).toEqual([]);
});

it("runs its top level without formatting anything with a locale", async () => {
  const code = readFileSync(join(out, "worker.js"), "utf8");
  // Node has no cloudflare:workers: a stand-in for the one class the bundle takes from it.
  const runtime = /import\s*\{\s*DurableObject(?:\s+as\s+([\w$]+))?\s*\}\s*from\s*"cloudflare:workers";?/;
  const name = runtime.exec(code);
  expect(name, "the bundle's import of cloudflare:workers").not.toBeNull();
  const file = join(out, "top-level.mjs");
  writeFileSync(file, code.replace(runtime, `class ${name?.[1] ?? "DurableObject"} {}`));

  const calls: string[] = [];
  const restore: Array<() => void> = [];
  const watch = (owner: object, key: string, label: string) => {
    const original = Reflect.get(owner, key) as (...a: unknown[]) => unknown;
    const wrapped = function (this: unknown, ...args: unknown[]) {
      calls.push(label);
      return new.target ? Reflect.construct(original, args, new.target) : original.apply(this, args);
    };
    Reflect.set(owner, key, wrapped);
    restore.push(() => Reflect.set(owner, key, original));
  };
  watch(Number.prototype, "toLocaleString", "Number#toLocaleString");
  watch(BigInt.prototype, "toLocaleString", "BigInt#toLocaleString");
  watch(Array.prototype, "toLocaleString", "Array#toLocaleString");
  for (const k of ["toLocaleString", "toLocaleDateString", "toLocaleTimeString"]) watch(Date.prototype, k, `Date#${k}`);
  watch(String.prototype, "localeCompare", "String#localeCompare");
  for (const k of ["NumberFormat", "DateTimeFormat", "Collator", "PluralRules", "RelativeTimeFormat", "ListFormat"]) {
    watch(Intl, k, `Intl.${k}`);
  }
  try {
    const mod = (await import(pathToFileURL(file).href)) as { default?: { fetch?: unknown } };
    expect(typeof mod.default?.fetch).toBe("function");
  } finally {
    for (const r of restore) r();
  }
  expect(calls).toEqual([]);
});
