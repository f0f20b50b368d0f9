/**
 * The layout holds: no import cycle in src/ or scripts/, and each layer imports only what it may
 * (src/core never Hono, the app, the client, consume() or the Worker runtime; src/rules.ts
 * nothing; the contract no runtime code of the library; the client no valibot, Hono, app or Node
 * built-in; consume() neither the client nor the library's transports; scripts no tests). Read
 * from the sources' import statements. A cycle counts type-only imports too (a module that needs
 * a type from one that needs it back is tangled, erased or not); the layers are about what runs,
 * so they count runtime imports only.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(ROOT, dir))) {
    const path = join(dir, name);
    if (statSync(join(ROOT, path)).isDirectory()) out.push(...filesUnder(path));
    else if (/\.ts$/.test(name) && !name.endsWith(".d.ts")) out.push(path);
  }
  return out;
}

/** A file's imports (runtime only, or types too): relative ones resolved to repo paths, the rest as written. */
function importsOf(file: string, types: boolean): string[] {
  const code = readFileSync(join(ROOT, file), "utf8");
  const specs: string[] = [];
  const re =
    /^\s*(import|export)\s+(type\s)?(?:[^;'"]*?\sfrom\s+)?["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/gm;
  for (const m of code.matchAll(re)) if (types || m[2] === undefined) specs.push((m[3] ?? m[4]) as string);
  return specs.map((s) =>
    s.startsWith(".") ? relative(ROOT, resolve(ROOT, dirname(file), s)).replace(/\.js$/, ".ts") : s,
  );
}

const files = [...filesUnder("src"), ...filesUnder("scripts")];
const graph = new Map(files.map((f) => [f, importsOf(f, false)]));
const withTypes = new Map(files.map((f) => [f, importsOf(f, true)]));

/** Strongly connected components with more than one file, or a file importing itself (Tarjan). */
function cycles(): string[][] {
  let index = 0;
  const stack: string[] = [];
  const on = new Set<string>();
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const out: string[][] = [];
  const visit = (v: string) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of withTypes.get(v) ?? []) {
      if (!withTypes.has(w)) continue;
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v) as number, idx.get(w) as number));
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop() as string;
        on.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (withTypes.get(v) ?? []).includes(v)) out.push(scc.sort());
    }
  };
  for (const f of files) if (!idx.has(f)) visit(f);
  return out;
}

/** Every runtime import of the files under `dir` that `allowed` refuses, as `file -> import`. */
function offending(dir: string, allowed: (spec: string) => boolean): string[] {
  return files
    .filter((f) => f === dir || f.startsWith(`${dir}/`))
    .flatMap((f) => (graph.get(f) ?? []).filter((s) => !allowed(s)).map((s) => `${f} -> ${s}`));
}

describe("imports", () => {
  it("make no cycle in src/ or scripts/", () => {
    expect(cycles()).toEqual([]);
  });

  it("src/rules.ts imports nothing", () => {
    expect(graph.get("src/rules.ts")).toEqual([]);
  });

  it("the library (src/core) never imports Hono, the app, the client, consume(), the contract's schemas or the Worker runtime", () => {
    expect(
      offending(
        "src/core",
        (s) =>
          !/^(hono|cloudflare:|src\/app|src\/client|src\/consume|src\/worker|valibot)/.test(s) &&
          s !== "src/contract/schemas.ts",
      ),
    ).toEqual([]);
  });

  it("the contract runs nothing of the library: only rules.ts, its own modules and valibot", () => {
    expect(offending("src/contract", (s) => /^(src\/rules\.ts|src\/contract\/|valibot$|@valibot\/)/.test(s))).toEqual(
      [],
    );
  });

  it("the client (turso-queue/client) loads no valibot, Hono, app code or Node built-in (only the OpenTelemetry API)", () => {
    expect(
      offending(
        "src/client",
        (s) =>
          s === "@opentelemetry/api" ||
          /^src\/(rules\.ts|client\/|consume\/|contract\/(wire|signature)\.ts|core\/(errors|validate|backoff|node-fetch|types|telemetry|settle)\.ts)/.test(
            s,
          ),
      ),
    ).toEqual([]);
  });

  it("consume() (src/consume), which both entries export, loads neither entry's own code: only the rules and the pure parts of core", () => {
    expect(
      offending(
        "src/consume",
        (s) =>
          s === "@opentelemetry/api" ||
          /^src\/(rules\.ts|consume\/|core\/(errors|validate|backoff|types|telemetry)\.ts)/.test(s),
      ),
    ).toEqual([]);
  });

  it("scripts import no test code", () => {
    expect(offending("scripts", (s) => !s.startsWith("test/"))).toEqual([]);
  });
});
