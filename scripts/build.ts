/**
 * `npm run build` (and `prepare`, so `npm pack` / `npm publish` / a git install build too): the
 * package's three entries compiled to ESM JavaScript plus declarations in a fresh `dist/`.
 *
 *   src/index.ts         -> turso-queue         (the library)
 *   src/client/index.ts  -> turso-queue/client  (what runs anywhere: consume(), later the HTTP client)
 *   src/hono.ts          -> turso-queue/hono    (the HTTP API as a Hono app)
 *
 * Compiler options come from tsconfig.build.json; the entries are listed here, so the build follows
 * whatever those entries import and nothing else (no tests, no scripts, not the Worker's own entry).
 * The Worker bundle goes to dist-worker/ (`npm run deploy:dry`), never into the package.
 */
import { rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const ENTRIES = ["src/index.ts", "src/client/index.ts", "src/hono.ts"];

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

process.exitCode = build();
