/**
 * A Worker project of a user's, made fresh: the packed tarball installed the way pnpm lays packages
 * out (npm's `--install-strategy=linked`: a package sees only what it declares, so the tarball's
 * dependencies must be all it needs), the Worker examples of the docs copied in as written. `tsc` with
 * `skipLibCheck: false` checks them under `wrangler types` and under `@cloudflare/workers-types`, with
 * no Node global (`process`, `Buffer`) reachable; wrangler bundles docs/deploying.md's Worker, and
 * workerd runs it against the shared sqld.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { resetDatabase } from "../support/db.js";
import { cleanEnv, docExample, packedTarball, ROOT } from "./tarball.js";

const run = promisify(execFile);
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const wrangler = join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js");
const tsc = join(ROOT, "node_modules", "typescript", "bin", "tsc");
const COMPATIBILITY_DATE = "2026-04-20";

let work: string;
let project: string;

/** Runs node with `args` in the project; returns stdout (throws with both outputs on failure). */
async function node(args: string[]): Promise<string> {
  try {
    const { stdout } = await run(process.execPath, args, {
      cwd: project,
      env: cleanEnv({ WRANGLER_SEND_METRICS: "false" }),
      timeout: 180_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    return stdout;
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${args.join(" ")} failed: ${err.message}\n${err.stdout ?? ""}\n${err.stderr ?? ""}`);
  }
}

const write = (file: string, text: string) => {
  mkdirSync(join(project, file, ".."), { recursive: true });
  writeFileSync(join(project, file), text);
};

beforeAll(async () => {
  const tarball = await packedTarball();
  work = mkdtempSync(join(tmpdir(), "turso-queue-worker-types-"));
  project = join(work, "my-worker");
  mkdirSync(project);
  write("package.json", JSON.stringify({ name: "my-worker", private: true, type: "module" }));
  await run(
    "npm",
    [
      "install",
      "--install-strategy=linked",
      "--prefer-offline",
      "--no-audit",
      "--no-fund",
      tarball,
      `hono@${pkg.dependencies.hono}`,
      `@cloudflare/workers-types@${pkg.devDependencies["@cloudflare/workers-types"]}`,
    ],
    { cwd: project, env: cleanEnv(), timeout: 300_000 },
  );
  write(
    "wrangler.json",
    JSON.stringify({ name: "my-worker", main: "worker/library.ts", compatibility_date: COMPATIBILITY_DATE }),
  );

  // The docs' Worker examples, as written.
  write("worker/library.ts", docExample("worker-library"));
  write("worker/hono-app.js", docExample("hono-app.mjs"));
  // Every entry, used as a Worker would.
  write(
    "worker/entries.ts",
    `import { consume, type Lease, LibsqlTransport, QueueError } from "turso-queue";
import { createClient, type ConsumerQueue, verifySignature } from "turso-queue/client";
import type { PushDelivery } from "turso-queue/contract";
import { createApp, perRequestTransports } from "turso-queue/hono";

export const app = createApp(perRequestTransports());

export async function drain(env: { QUEUE_URL: string; QUEUE_TOKEN: string }, signal: AbortSignal): Promise<number> {
  const queue: ConsumerQueue = createClient({ url: env.QUEUE_URL, token: env.QUEUE_TOKEN, fetch: (i, o) => fetch(i, o) });
  const summary = await consume(queue, (_event, lease: Lease) => void lease.seq, { workerId: "edge", signal });
  return summary.acked;
}

export const checks = { LibsqlTransport, QueueError, verifySignature };
export type Delivery = PushDelivery;
`,
  );
  // Node's globals are not there in a Worker without nodejs_compat: each line below must be an error.
  write(
    "worker/no-node.ts",
    `// @ts-expect-error process is Node's
export const env = process.env;
// @ts-expect-error Buffer is Node's
export const bytes = Buffer.from("x");
`,
  );
  const compilerOptions = {
    target: "es2022",
    module: "es2022",
    moduleResolution: "bundler",
    lib: ["es2023"],
    strict: true,
    noEmit: true,
    skipLibCheck: false,
    allowJs: true,
    checkJs: true,
  };
  write(
    "tsconfig.wrangler.json",
    JSON.stringify({
      compilerOptions: { ...compilerOptions, types: [] },
      include: ["worker-configuration.d.ts", "worker"],
    }),
  );
  write(
    "tsconfig.workers-types.json",
    JSON.stringify({
      compilerOptions: { ...compilerOptions, types: ["@cloudflare/workers-types"] },
      include: ["worker"],
    }),
  );
}, 600_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

it("the tarball's dependencies are all it reaches: nothing resolves through hoisting", () => {
  // Linked: the project's node_modules holds only what it installed; the rest is in the store.
  const manifest = JSON.parse(readFileSync(join(project, "node_modules", "turso-queue", "package.json"), "utf8"));
  expect(manifest.dependencies).toEqual(pkg.dependencies);
  expect(() => readFileSync(join(project, "node_modules", "@libsql", "client", "package.json"))).toThrow();
});

it("type-checks with skipLibCheck: false under wrangler types, with no Node global", async () => {
  await node([wrangler, "types"]);
  expect(readFileSync(join(project, "worker-configuration.d.ts"), "utf8")).toContain("interface Env");
  await node([tsc, "-p", "tsconfig.wrangler.json"]);
}, 300_000);

it("type-checks with skipLibCheck: false under @cloudflare/workers-types, with no Node global", async () => {
  await node([tsc, "-p", "tsconfig.workers-types.json"]);
}, 300_000);

it("wrangler bundles docs/deploying.md's Worker, and it publishes, claims and acks in workerd", async () => {
  await node([wrangler, "deploy", "--dry-run", "--outdir", "dist"]);
  const admin = await LibsqlTransport.create(inject("sqldUrl"));
  await resetDatabase(clientOf(admin));
  const mf = new Miniflare({
    modulesRoot: join(project, "dist"),
    modules: [{ type: "ESModule", path: join(project, "dist", "library.js") }],
    compatibilityDate: COMPATIBILITY_DATE,
    bindings: { TURSO_DATABASE_URL: inject("sqldUrl") },
  });
  try {
    const answers: { seq: number; claimed: number | null }[] = [];
    for (const order of ["1", "2", "1"]) {
      const res = await mf.dispatchFetch(`http://worker/?order=${order}`);
      expect(res.status, await res.clone().text()).toBe(200);
      answers.push((await res.json()) as { seq: number; claimed: number | null });
    }
    // The third request is the first again: its key stores nothing new, and there is nothing left to claim.
    const first = answers[0]?.seq as number;
    expect(answers).toEqual([
      { seq: first, claimed: first },
      { seq: first + 1, claimed: first + 1 },
      { seq: first, claimed: null },
    ]);
    expect((await admin.stats()).ready).toBe(0);
  } finally {
    await mf.dispose();
    admin.close();
  }
}, 300_000);
