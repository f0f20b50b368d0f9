/**
 * `npm run bench:bundle`: what each part of the Worker's bundle costs. Builds it as `npm run
 * deploy:dry` does (wrangler.toml's settings: minified, aliases), then gives each byte of the bundle to
 * the source file its source map names, groups the files into parts (`PARTS`), and prints, for each
 * part, its bytes and the gzip KiB it adds: the gzip size of the bundle less that of the bundle with
 * that part's bytes cut out. The parts' gzip figures add up to about the whole (gzip shares its
 * dictionary across parts).
 *
 * `-- --out=DIR` keeps the bundle and its map in DIR; `-- --json` prints the figures as JSON.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Parts, first match wins, by the source path the map gives (relative to the repo). */
export const PARTS: Array<[name: string, test: RegExp]> = [
  ["`hono`", /node_modules\/hono\//],
  ["`croner` (schedules' cron expressions)", /node_modules\/croner\//],
  ["`@opentelemetry/api`", /node_modules\/@opentelemetry\/api\//],
  ["`valibot`", /node_modules\/valibot\//],
  [
    "the OpenAPI document (`openapi.ts`, `@valibot/to-json-schema`)",
    /node_modules\/@valibot\/to-json-schema\/|src\/app\/openapi\.ts/,
  ],
  ["`@libsql/client` and its dependencies", /node_modules\/(@libsql|libsql|js-base64|promise-limit)\//],
  ["other packages", /node_modules\//],
  [
    "Node-only code of the library (`local.ts`, `node-fetch.ts`), never run in a Worker",
    /src\/core\/(local|node-fetch)\.ts/,
  ],
  [
    "keys (issue 25: `keys.ts`, `jwt.ts`, `auth.ts`, their routes and SQL)",
    /src\/(core\/keys|core\/sql\/keys|app\/jwt|app\/keys|app\/key-port|app\/auth|app\/secrets|app\/routes\/keys|contract\/keys)\.ts/,
  ],
  [
    "flow control and schedules (issue 27: settings, schedules, their routes and SQL)",
    /src\/(core\/schedules|core\/sql\/settings|core\/sql\/schedules|app\/routes\/settings|app\/routes\/schedules|app\/writer\/schedules)\.ts/,
  ],
  ["the library's SQL plans (`src/core/sql`)", /src\/core\/sql\//],
  ["the rest of the library (`src/core`, `src/rules.ts`)", /src\/(core\/|rules\.ts|version\.ts)/],
  ["the pages (dashboard, docs page, stylesheet, charts)", /src\/app\/pages\/|src\/app\/routes\/pages\.ts/],
  ["the writer (`src/app/writer`, `src/worker.ts`)", /src\/app\/writer\/|src\/worker\.ts/],
  ["the rest of the API (`src/app`'s routes, env, edge; `src/contract`)", /src\/(app|contract)\//],
];
const UNMAPPED = "esbuild's glue (no source)";

interface SourceMap {
  sources: string[];
  mappings: string;
}

const B64 = new Map([..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"].map((c, i) => [c, i]));

/** A segment's fields (VLQ, as source maps encode them), relative to the previous segment's. */
function vlq(segment: string): number[] {
  const out: number[] = [];
  let value = 0;
  let shift = 0;
  for (const ch of segment) {
    const digit = B64.get(ch) as number;
    value += (digit & 31) << shift;
    if (digit & 32) {
      shift += 5;
    } else {
      out.push(value & 1 ? -(value >>> 1) : value >>> 1);
      value = 0;
      shift = 0;
    }
  }
  return out;
}

/** For each UTF-16 unit of `code`, the index of its source (-1: none), from the map's segments. */
export function sourceOfEachChar(code: string, map: SourceMap): Int32Array {
  const owner = new Int32Array(code.length).fill(-1);
  const lineStarts = [0];
  for (let i = 0; i < code.length; i++) if (code.charCodeAt(i) === 10) lineStarts.push(i + 1);
  let source = 0;
  const lines = map.mappings.split(";");
  for (let line = 0; line < lines.length; line++) {
    const start = lineStarts[line];
    if (start === undefined) break;
    const end = lineStarts[line + 1] ?? code.length;
    let col = 0;
    const segs: Array<[col: number, source: number]> = [];
    for (const seg of (lines[line] as string).split(",")) {
      if (seg === "") continue;
      const f = vlq(seg);
      col += f[0] as number;
      if (f.length >= 4) {
        source += f[1] as number;
        segs.push([col, source]);
      } else {
        segs.push([col, -1]);
      }
    }
    for (let k = 0; k < segs.length; k++) {
      const [from, src] = segs[k] as [number, number];
      const to = k + 1 < segs.length ? (segs[k + 1] as [number, number])[0] : end - start;
      owner.fill(src, start + from, Math.min(start + to, end));
    }
  }
  return owner;
}

export interface PartCost {
  part: string;
  bytes: number;
  gzipAdds: number;
}

export function partsOf(code: string, map: SourceMap): { total: { bytes: number; gzip: number }; parts: PartCost[] } {
  const owner = sourceOfEachChar(code, map);
  const partOfSource = map.sources.map((s) => {
    const path = s.replace(/^(\.\.\/)+/, "").replace(/^.*?(node_modules\/|src\/)/, "$1");
    return PARTS.find(([, test]) => test.test(path))?.[0] ?? (path.startsWith("src/") ? "other src" : "other packages");
  });
  const names = [...PARTS.map(([n]) => n), "other src", UNMAPPED];
  const partOf = (i: number) => {
    const s = owner[i] as number;
    return s < 0 ? UNMAPPED : (partOfSource[s] as string);
  };
  const pieces = new Map<string, string[]>(names.map((n) => [n, []]));
  // Runs of one part, in order, so that cutting a part keeps the rest in place.
  const runs: Array<[part: string, text: string]> = [];
  let from = 0;
  for (let i = 1; i <= code.length; i++) {
    if (i === code.length || partOf(i) !== partOf(from)) {
      const text = code.slice(from, i);
      runs.push([partOf(from), text]);
      pieces.get(partOf(from))?.push(text);
      from = i;
    }
  }
  const gzip = (s: string) => gzipSync(Buffer.from(s), { level: 9 }).length;
  const whole = gzip(code);
  const parts = names
    .map((part) => {
      const bytes = (pieces.get(part) ?? []).reduce((n, t) => n + Buffer.byteLength(t), 0);
      const rest = runs
        .filter(([p]) => p !== part)
        .map(([, t]) => t)
        .join("");
      return { part, bytes, gzipAdds: bytes === 0 ? 0 : whole - gzip(rest) };
    })
    .filter((p) => p.bytes > 0)
    .sort((a, b) => b.gzipAdds - a.gzipAdds);
  return { total: { bytes: Buffer.byteLength(code), gzip: whole }, parts };
}

function main(): void {
  const args = process.argv.slice(2);
  const outArg = args.find((a) => a.startsWith("--out="));
  const out = outArg ? resolve(outArg.slice(6)) : mkdtempSync(join(tmpdir(), "turso-queue-bundle-"));
  const r = spawnSync(join(ROOT, "node_modules", ".bin", "wrangler"), ["deploy", "--dry-run", "--outdir", out], {
    cwd: ROOT,
    encoding: "utf8",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
  });
  if (r.status !== 0) throw new Error(`wrangler deploy --dry-run failed:\n${r.stdout}\n${r.stderr}`);
  const upload = /Total Upload: ([\d.]+) KiB \/ gzip: ([\d.]+) KiB/.exec(r.stdout);
  const code = readFileSync(join(out, "worker.js"), "utf8");
  const map = JSON.parse(readFileSync(join(out, "worker.js.map"), "utf8")) as SourceMap;
  const { total, parts } = partsOf(code, map);
  const kib = (n: number) => (n / 1024).toFixed(1);
  if (args.includes("--json")) {
    console.log(JSON.stringify({ wrangler: upload?.slice(1), total, parts }, null, 2));
    return;
  }
  console.log(
    `wrangler: ${upload?.[1]} KiB, gzip ${upload?.[2]} KiB; worker.js ${kib(total.bytes)} KiB, gzip -9 ${kib(total.gzip)} KiB\n`,
  );
  console.log("| part | bytes | gzip KiB it adds |\n| --- | --- | --- |");
  for (const p of parts) console.log(`| ${p.part} | ${kib(p.bytes)} KiB | ${kib(p.gzipAdds)} |`);
  const sum = parts.reduce((n, p) => n + p.gzipAdds, 0);
  console.log(`\nthe parts' gzip KiB add up to ${kib(sum)} of ${kib(total.gzip)}`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
