/**
 * `npm run build`: the package's three entries compiled to ESM JavaScript plus declarations in a
 * fresh `dist/`.
 *
 *   src/index.ts         -> turso-queue         (the library)
 *   src/client/index.ts  -> turso-queue/client  (what runs anywhere: consume(), the HTTP client)
 *   src/hono.ts          -> turso-queue/hono    (the HTTP API as a Hono app)
 *
 * Compiler options come from tsconfig.build.json; the entries are listed here, so the build follows
 * whatever those entries import and nothing else (no tests, no scripts, not the Worker's own entry).
 * The Worker bundle goes to dist-worker/ (`npm run deploy:dry`), never into the package.
 *
 * `npm run pack [-- <dir>]`: that build, then the package as users get it, packed into
 * `<dir>/turso-queue-<version>.tgz` (default: the current directory): `dist/`, README.md and a
 * package.json holding only what a user's install reads (`PUBLISHED`): no scripts and no
 * devDependencies, so nothing runs or asks to run when it is installed. `npm publish <tarball>`
 * releases exactly that file; the repo's own package.json is private, so a plain `npm publish` refuses.
 */
import { execFileSync } from "node:child_process";
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const ENTRIES = ["src/index.ts", "src/client/index.ts", "src/hono.ts"];

/** The fields of the repo's package.json that the published one keeps; everything else is the repo's own. */
export const PUBLISHED = [
  "name",
  "version",
  "description",
  "keywords",
  "homepage",
  "bugs",
  "repository",
  "license",
  "author",
  "type",
  "engines",
  "main",
  "types",
  "exports",
  "sideEffects",
  "dependencies",
  "peerDependencies",
  "peerDependenciesMeta",
];

function build(): number {
  const configPath = join(root, "tsconfig.build.json");
  const host: ts.ParseConfigFileHost = {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => report([d]),
  };
  const parsed = ts.getParsedCommandLineOfConfigFile(configPath, {}, host);
  if (!parsed) return 1;
  const options: ts.CompilerOptions = {
    ...parsed.options,
    noEmit: false,
    declaration: true,
    outDir: join(root, "dist"),
    rootDir: join(root, "src"),
  };
  rmSync(join(root, "dist"), { recursive: true, force: true });
  const program = ts.createProgram(
    ENTRIES.map((e) => join(root, e)),
    options,
  );
  const emitted = program.emit();
  const diagnostics = [...ts.getPreEmitDiagnostics(program), ...emitted.diagnostics];
  report(diagnostics);
  const errors = diagnostics.filter((d) => d.category === ts.DiagnosticCategory.Error).length;
  if (errors === 0) {
    const files = program.getSourceFiles().filter((f) => !f.isDeclarationFile && f.fileName.startsWith(root)).length;
    process.stdout.write(`built ${files} modules into dist/ (${ENTRIES.join(", ")})\n`);
  }
  return errors === 0 && !emitted.emitSkipped ? 0 : 1;
}

function report(diagnostics: readonly ts.Diagnostic[]): void {
  if (diagnostics.length === 0) return;
  process.stderr.write(
    ts.formatDiagnosticsWithColorAndContext(diagnostics, {
      getCanonicalFileName: (f) => f,
      getCurrentDirectory: () => root,
      getNewLine: () => "\n",
    }),
  );
}

/** The package.json users get: the published fields of ours, in our order. */
function publishedManifest(): Record<string, unknown> {
  const ours = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as Record<string, unknown>;
  return Object.fromEntries(Object.entries(ours).filter(([k]) => PUBLISHED.includes(k)));
}

/** Stages the package (dist/, README.md, its package.json) and packs it into `dest`; answers the tarball's path. */
function pack(dest: string): string {
  const stage = mkdtempSync(join(tmpdir(), "turso-queue-stage-"));
  try {
    cpSync(join(root, "dist"), join(stage, "dist"), { recursive: true });
    copyFileSync(join(root, "README.md"), join(stage, "README.md"));
    writeFileSync(join(stage, "package.json"), `${JSON.stringify(publishedManifest(), null, 2)}\n`);
    mkdirSync(dest, { recursive: true });
    const out = execFileSync("npm", ["pack", "--json", "--pack-destination", dest], { cwd: stage, encoding: "utf8" });
    const [packed] = JSON.parse(out) as { filename: string }[];
    if (!packed) throw new Error(`npm pack answered no file: ${out}`);
    return join(dest, packed.filename);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

const args = process.argv.slice(2);
process.exitCode = build();
if (process.exitCode === 0 && args[0] === "--pack") {
  process.stdout.write(`packed ${pack(resolve(args[1] ?? "."))}\n`);
}
