/**
 * The package as a user gets it: `npm run pack` on a clean copy of the repo (no dist/: it builds,
 * then packs the published package.json, README.md and dist/), then `npm install <tarball>` into a
 * fresh project (npm cache first, the registry only for what is missing), where an ESM script, a
 * CommonJS script, the README's examples and `tsc` (nodenext and bundler resolution) use every entry.
 * `npm publish --dry-run <tarball>` lists the same files and sends nothing to its registry (a fake one
 * on 127.0.0.1 that records what it is asked); a plain `npm publish` of the repo itself refuses.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { freePort } from "../../scripts/support/sqld.js";
import { type RunningWorker, startWorker } from "../../scripts/support/worker.js";
import { sqldNamespaces } from "../../src/core/databases.js";
import { clientOf } from "../../src/core/internals.js";
import { listSubscriptions } from "../../src/core/subscriptions.js";
import { LibsqlTransport } from "../../src/index.js";
import { resetDatabase } from "../support/db.js";
import { waitFor } from "../support/wait.js";
import { cleanEnv, docExample as readmeExample } from "./tarball.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const run = promisify(execFile);
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  name: string;
  version: string;
  dependencies: Record<string, string>;
};

let work: string;
let app: string;
let tarball: string;
let packed: string[];
/** The tarball's package.json. */
let manifest: Record<string, unknown>;
/** What `npm install <tarball>` printed. */
let installOutput: string;
/** The files `npm publish --dry-run` lists, and the requests its (fake) registry received. */
let published: string[];
/** What a plain `npm publish` of the repo said. */
let repoPublish: string;
const registryRequests: { method: string; url: string }[] = [];
let registry: Server | undefined;
let admin: LibsqlTransport;
/** The API the client's examples talk to: the Worker under `wrangler dev`, on the shared sqld. */
let worker: RunningWorker;
const QUEUE_TOKEN = "pack-test-queue-token-0123456789";

/** Runs `file` with node in the consumer project; returns stdout (throws with stderr on failure). */
async function node(args: string[], env: Record<string, string> = {}): Promise<string> {
  try {
    const { stdout } = await run(process.execPath, args, { cwd: app, env: cleanEnv(env), timeout: 60_000 });
    return stdout;
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; message: string };
    throw new Error(`node ${args.join(" ")} failed: ${err.message}\n${err.stdout ?? ""}\n${err.stderr ?? ""}`);
  }
}

/** A Worker under `wrangler dev` whose named queues are namespaces of the shared sqld. */
async function namespacesWorker(): Promise<RunningWorker> {
  const provider = sqldNamespaces({ url: inject("nsSqldUrl"), adminUrl: inject("nsAdminUrl") });
  await provider.create("default");
  return startWorker({
    databaseUrl: inject("nsSqldUrl"),
    queueToken: QUEUE_TOKEN,
    vars: { QUEUE_DATABASES: "namespaces", SQLD_ADMIN_URL: inject("nsAdminUrl") },
  });
}

/**
 * Runs a consumer script until it has logged `count` handled messages (`<group> #<seq> attempt <n>: ...`),
 * then stops it with SIGTERM; it must exit 0 with nothing on stderr. Returns its output lines.
 */
async function consumeUntil(file: string, env: Record<string, string>, count: number): Promise<string[]> {
  const child: ChildProcess = spawn(process.execPath, [file], {
    cwd: app,
    env: cleanEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout?.on("data", (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    err += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  try {
    const deadline = Date.now() + 30_000;
    while (out.split("\n").filter((l) => / #\d+ attempt /.test(l)).length < count) {
      if (child.exitCode !== null) throw new Error(`${file} exited early: ${out}\n${err}`);
      if (Date.now() > deadline) throw new Error(`${file} handled too little: ${out}\n${err}`);
      await new Promise((r) => setTimeout(r, 25));
    }
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
  expect(err).toBe("");
  return out.split("\n");
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "turso-queue-pack-"));
  // A clean copy of what a clone holds (tracked files, plus new ones not ignored), sharing node_modules.
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
  expect(existsSync(join(clone, "dist")), "a clean copy has no dist/").toBe(false);
  symlinkSync(join(ROOT, "node_modules"), join(clone, "node_modules"), "dir");

  // `npm run pack`, as a release runs it (docs/contributing.md).
  const tgzDir = join(work, "tgz");
  mkdirSync(tgzDir);
  await run("npm", ["run", "pack", "--", tgzDir], { cwd: clone, env: cleanEnv(), timeout: 180_000 });
  const [name] = readdirSync(tgzDir).filter((f) => f.endsWith(".tgz"));
  tarball = join(tgzDir, name as string);
  packed = (await run("tar", ["-tzf", tarball])).stdout
    .split("\n")
    .filter(Boolean)
    .map((p) => p.replace(/^package\//, ""));
  manifest = JSON.parse((await run("tar", ["-xzOf", tarball, "package/package.json"])).stdout);

  // `npm publish --dry-run <tarball>`, and a plain `npm publish` of the repo with a token, against a fake
  // registry that answers 404 to everything and records each request: `--dry-run` asks for the
  // package's metadata (the versions already published) and must never send it (a PUT); the repo's own
  // package.json is private, so its publish stops before sending anything.
  const fake = createServer((req, res) => {
    registryRequests.push({ method: req.method ?? "", url: req.url ?? "" });
    req.resume();
    res.writeHead(404, { "content-type": "application/json" }).end('{"error":"not found"}');
  });
  registry = fake;
  await new Promise<void>((r) => fake.listen(0, "127.0.0.1", r));
  const { port } = fake.address() as { port: number };
  const registryArgs = [`--registry=http://127.0.0.1:${port}/`, `--//127.0.0.1:${port}/:_authToken=not-a-token`];
  const { stdout: publishOut } = await run("npm", ["publish", "--dry-run", "--json", ...registryArgs, tarball], {
    cwd: work,
    env: cleanEnv(),
    timeout: 180_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  const report = (JSON.parse(publishOut) as Record<string, { files: { path: string }[] } | undefined>)[pkg.name];
  if (!report) throw new Error(`npm publish --dry-run --json printed no report for ${pkg.name}: ${publishOut}`);
  published = report.files.map((f) => f.path);
  repoPublish = await run("npm", ["publish", ...registryArgs], { cwd: clone, env: cleanEnv(), timeout: 180_000 }).then(
    () => "published",
    (e: { stderr?: string }) => e.stderr ?? "",
  );

  // A fresh project installs the tarball, and hono (for mounting the API), as the README says.
  app = join(work, "app");
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  const installed = await run(
    "npm",
    ["install", tarball, `hono@${pkg.dependencies.hono}`, "--prefer-offline", "--no-audit", "--no-fund"],
    { cwd: app, env: cleanEnv(), timeout: 180_000 },
  );
  installOutput = installed.stdout + installed.stderr;

  admin = await LibsqlTransport.create(inject("sqldUrl"));
  await resetDatabase(clientOf(admin));
  worker = await startWorker({ databaseUrl: inject("sqldUrl"), queueToken: QUEUE_TOKEN });
}, 300_000);

afterAll(async () => {
  registry?.close();
  await worker?.stop();
  admin?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("npm pack → npm install → import", () => {
  it("the tarball holds the built entries with their types, and nothing else", () => {
    for (const f of [
      "package.json",
      "README.md",
      "dist/index.js",
      "dist/index.d.ts",
      "dist/client/index.js",
      "dist/client/index.d.ts",
      "dist/client/client.js",
      "dist/client/client.d.ts",
      "dist/hono.js",
      "dist/hono.d.ts",
    ]) {
      expect(packed, f).toContain(f);
    }
    const stray = packed.filter((p) => !["package.json", "README.md"].includes(p) && !/^dist\/.+\.(js|d\.ts)$/.test(p));
    expect(stray, "files that should not ship").toEqual([]);
    expect(
      packed.filter((p) => /worker/i.test(p)),
      "the Worker bundle",
    ).toEqual([]);
  });

  it("its package.json holds what an install reads and nothing of the repo's (no scripts, no devDependencies)", () => {
    expect(Object.keys(manifest).sort()).toEqual(
      [
        "name",
        "version",
        "description",
        "type",
        "license",
        "engines",
        "main",
        "types",
        "exports",
        "dependencies",
        "sideEffects",
      ].sort(),
    );
    expect(manifest.dependencies).toEqual(pkg.dependencies);
    // npm 11.16+ lists unreviewed install scripts after an install; npm 12 refuses them.
    expect(installOutput).not.toMatch(/install script|allowScripts|approve-scripts/i);
  });

  it("npm publish --dry-run <tarball> lists the same files and sends nothing; the repo itself refuses to publish", () => {
    expect([...published].sort()).toEqual([...packed].sort());
    expect(published).toContain("dist/index.js");
    expect(repoPublish).toContain("EPRIVATE");
    expect(
      registryRequests.filter((r) => r.method !== "GET"),
      "requests that could publish",
    ).toEqual([]);
  });

  it("turso-queue/client imports nothing but its own files and the OpenTelemetry API (no Node-only module)", () => {
    const base = join(app, "node_modules", "turso-queue", "dist");
    const seen = new Set<string>();
    const outside: string[] = [];
    const walk = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const code = readFileSync(file, "utf8");
      for (const m of code.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)["']([^"']+)["']/g)) {
        const spec = m[1] as string;
        if (spec.startsWith(".")) walk(resolve(dirname(file), spec));
        // The OpenTelemetry API runs anywhere, and is a no-op until an SDK is registered.
        else if (spec !== "@opentelemetry/api") outside.push(`${file.slice(base.length + 1)} -> ${spec}`);
      }
    };
    walk(join(base, "client", "index.js"));
    expect(outside).toEqual([]);
    expect(seen.size).toBeGreaterThan(2);
  });

  it("an ESM project imports every entry and consumes messages over sqld", async () => {
    writeFileSync(
      join(app, "esm.mjs"),
      `import assert from "node:assert/strict";
import { consume, LibsqlTransport, QueueError } from "turso-queue";
import * as client from "turso-queue/client";
import * as hono from "turso-queue/hono";

assert.equal(client.consume, consume, "one consume() for both entries");
assert.equal(client.QueueError, QueueError, "one QueueError class");
for (const f of ["createApp", "sharedTransports", "perRequestTransports"]) assert.equal(typeof hono[f], "function", f);
const q = await LibsqlTransport.create(process.env.SQLD_URL);
await q.publishMany([0, 1, 2].map((n) => ({ groupId: "esm", event: { n } })));
const stop = new AbortController();
const seen = [];
const summary = await client.consume(q, (e) => { seen.push(e.n); if (seen.length === 3) stop.abort(); },
  { workerId: "esm", concurrency: 4, signal: stop.signal });
assert.deepEqual(seen, [0, 1, 2]);
assert.equal(summary.acked, 3);
await assert.rejects(consume(q, () => {}, { workerId: "" }), (e) => e instanceof QueueError && e.field === "options.workerId");
q.close();

// The HTTP client against the Worker: the library's methods, the library's error class.
const api = client.createClient({ url: process.env.QUEUE_URL, token: process.env.QUEUE_TOKEN });
const seq = await api.publish("esm-http", { n: 1 });
const lease = await api.claim("esm", 30);
assert.equal(lease.seq, seq);
await api.ack(lease);
await assert.rejects(api.ack(lease), (e) => e instanceof QueueError && e instanceof client.QueueHttpError &&
  e.code === "LEASE_NOT_FOUND" && e.status === 404 && e.field === "lease_id");
console.log("esm ok");
`,
    );
    const env = { SQLD_URL: inject("sqldUrl"), QUEUE_URL: worker.url, QUEUE_TOKEN };
    expect(await node(["esm.mjs"], env)).toContain("esm ok");
  });

  it("a CommonJS project require()s every entry (Node's require(esm)) and uses it", async () => {
    writeFileSync(
      join(app, "cjs.cjs"),
      `const assert = require("node:assert/strict");
const { LibsqlTransport, consume, QueueError } = require("turso-queue");
const client = require("turso-queue/client");
const hono = require("turso-queue/hono");
assert.equal(client.consume, consume);
assert.equal(client.QueueError, QueueError);
assert.equal(typeof hono.createApp, "function");
assert.equal(typeof client.createClient, "function");
assert.ok(new client.QueueHttpError("NOT_FOUND", "x", { status: 404 }) instanceof QueueError);
(async () => {
  const q = await LibsqlTransport.create(process.env.SQLD_URL);
  const seq = await q.publish("cjs", { ok: true });
  const lease = await q.claim("cjs", 30);
  assert.equal(lease.seq, seq);
  await q.ack(lease);
  q.close();
  console.log("cjs ok");
})().catch((e) => { console.error(e); process.exit(1); });
`,
    );
    expect(await node(["cjs.cjs"], { SQLD_URL: inject("sqldUrl") })).toContain("cjs ok");
  });

  it("tsc type-checks every entry with nodenext (ESM and CommonJS files) and bundler resolution", async () => {
    const use = `import { consume, type ConsumeOptions, type Lease, LibsqlTransport, QueueError } from "turso-queue";
import {
  type ConsumerQueue,
  consume as consumeAnywhere,
  type ConsumeSummary,
  createClient,
  type QueueClient,
  QueueHttpError,
} from "turso-queue/client";
import { type AppEnv, createApp, perRequestTransports, sharedTransports } from "turso-queue/hono";
import { Hono } from "hono";

export async function main(): Promise<number> {
  const t: LibsqlTransport = await LibsqlTransport.create(":memory:");
  const queue: ConsumerQueue = t;
  const options: ConsumeOptions = { workerId: "w", concurrency: 2 };
  const summary: ConsumeSummary = await consumeAnywhere<{ n: number }>(queue, (event, lease: Lease<{ n: number }>) => {
    const n: number = event.n + lease.seq;
    return n;
  }, options);
  const app = new Hono();
  app.route("/queue", createApp(perRequestTransports()));
  const own: Hono<AppEnv> = createApp(sharedTransports(), { dbConcurrency: 2 });
  const e: QueueError | undefined = undefined;
  const api: QueueClient = createClient({ url: "http://127.0.0.1:8787", token: "t", fetch: globalThis.fetch });
  const overHttp: ConsumerQueue = api;
  const lease: Lease<{ n: number }> | null = await api.claim<{ n: number }>("w", 30, 0, { wait: 5 });
  const status: number | undefined = new QueueHttpError("LEASE_LOST", "lost").status;
  void consume; void own; void e; void overHttp; void lease; void status;
  return summary.acked;
}
`;
    writeFileSync(join(app, "use.mts"), use);
    writeFileSync(join(app, "use-bundler.ts"), use);
    writeFileSync(
      join(app, "use.cts"),
      `import { consume, LibsqlTransport } from "turso-queue";
import { consume as consumeAnywhere } from "turso-queue/client";
import { createApp } from "turso-queue/hono";
export const entries: [typeof LibsqlTransport, typeof consume, typeof consumeAnywhere, typeof createApp] =
  [LibsqlTransport, consume, consumeAnywhere, createApp];
`,
    );
    // A type error that must be reported, so that a passing check means the types were read.
    writeFileSync(
      join(app, "wrong.mts"),
      `import { LibsqlTransport } from "turso-queue";\nexport const n: string = (await (await LibsqlTransport.create(":memory:")).stats()).ready;\n`,
    );
    const base = {
      target: "es2022",
      strict: true,
      noEmit: true,
      lib: ["es2022", "dom"],
      types: [],
      skipLibCheck: false,
    };
    const config = (name: string, compilerOptions: object, files: string[]) =>
      writeFileSync(join(app, name), JSON.stringify({ compilerOptions: { ...base, ...compilerOptions }, files }));
    config("tsconfig.nodenext.json", { module: "nodenext", moduleResolution: "nodenext" }, ["use.mts", "use.cts"]);
    config("tsconfig.bundler.json", { module: "esnext", moduleResolution: "bundler" }, ["use-bundler.ts"]);
    config("tsconfig.wrong.json", { module: "nodenext", moduleResolution: "nodenext" }, ["wrong.mts"]);
    const tsc = join(ROOT, "node_modules", "typescript", "bin", "tsc");
    await node([tsc, "-p", "tsconfig.nodenext.json"]);
    await node([tsc, "-p", "tsconfig.bundler.json"]);
    await expect(node([tsc, "-p", "tsconfig.wrong.json"])).rejects.toThrow(/TS2322.*number.*string/);
  });

  it("the README's consumer example runs as written and stops cleanly on SIGTERM", async () => {
    writeFileSync(join(app, "consumer.mjs"), readmeExample("consumer.mjs"));
    await resetDatabase(clientOf(admin));
    await admin.publishMany([
      ...[1, 2, 3].map((n) => ({ groupId: "orders", event: { order: n } })),
      ...[1, 2].map((n) => ({ groupId: "emails", event: { mail: n } })),
    ]);
    const lines = await consumeUntil("consumer.mjs", { TURSO_DATABASE_URL: inject("sqldUrl") }, 5);
    expect(lines.filter((l) => l.startsWith("orders "))).toEqual([
      'orders #1 attempt 1: {"order":1}',
      'orders #2 attempt 1: {"order":2}',
      'orders #3 attempt 1: {"order":3}',
    ]);
    expect(lines.filter((l) => l.startsWith("emails "))).toEqual([
      'emails #4 attempt 1: {"mail":1}',
      'emails #5 attempt 1: {"mail":2}',
    ]);
    const stopped = lines.find((l) => l.startsWith("stopped: "));
    expect(JSON.parse((stopped ?? "stopped: null").slice(9))).toMatchObject({ acked: 5, nacked: 0, abandoned: 0 });
    expect((await admin.stats()).groups).toBe(0);
  });

  // This test and the next run before the HTTP consumer: its long polls, aborted at SIGTERM, live on
  // in the writer until their wait ends (docs/guarantees.md, "Open") and would take the messages
  // published here.
  it("the README's push consumer subscribes, verifies and prints deliveries, and unsubscribes on SIGTERM", async () => {
    await resetDatabase(clientOf(admin));
    const env = { QUEUE_URL: worker.url, QUEUE_TOKEN, PORT: String(await freePort()) };
    writeFileSync(join(app, "push-consumer.mjs"), readmeExample("push-consumer.mjs"));
    const lines = consumeUntil("push-consumer.mjs", env, 2);
    await waitFor(async () => (await listSubscriptions(admin)).length === 1, {
      what: "the subscription",
      timeoutMs: 30_000,
    });
    const publish = (event: unknown) =>
      fetch(`${worker.url}/v1/groups/push-7/messages`, {
        method: "POST",
        headers: { authorization: `Bearer ${QUEUE_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ event }),
      }).then(async (r) => ((await r.json()) as { seq: number }).seq);
    const first = await publish({ n: 1 });
    const second = await publish({ n: 2 });
    expect((await lines).filter((l) => l.startsWith("push-7 "))).toEqual([
      `push-7 #${first} attempt 1: {"n":1}`,
      `push-7 #${second} attempt 1: {"n":2}`,
    ]);
    await waitFor(async () => (await admin.stats()).groups === 0, { what: "the acks" });
    expect(await listSubscriptions(admin)).toEqual([]);
  });

  it("the README's Hono example mounts the API in another app", async () => {
    writeFileSync(join(app, "hono-app.mjs"), readmeExample("hono-app.mjs"));
    writeFileSync(
      join(app, "drive-hono.mjs"),
      `import assert from "node:assert/strict";
import app from "./hono-app.mjs";
const env = { TURSO_DATABASE_URL: process.env.SQLD_URL, QUEUE_TOKEN: "a-token-of-at-least-16-chars" };
const auth = { authorization: "Bearer a-token-of-at-least-16-chars", "content-type": "application/json" };
assert.equal(await (await app.request("/", {}, env)).text(), "my own app");
assert.equal((await app.request("/queue/v1/stats", {}, env)).status, 401);
const pub = await app.request("/queue/v1/groups/orders/messages",
  { method: "POST", headers: auth, body: JSON.stringify({ event: { order: 7 } }) }, env);
assert.equal(pub.status, 201, await pub.clone().text());
const { seq } = await pub.json();
const stats = await (await app.request("/queue/v1/stats", { headers: auth }, env)).json();
assert.equal(stats.ready, 1);
console.log(JSON.stringify({ seq }));
`,
    );
    await resetDatabase(clientOf(admin));
    const out = await node(["drive-hono.mjs"], { SQLD_URL: inject("sqldUrl") });
    const { seq } = JSON.parse(out.trim()) as { seq: number };
    const lease = await admin.claim("check", 30);
    expect(lease).toMatchObject({ seq, groupId: "orders", event: { order: 7 } });
  });

  it("the README's serverless publisher and HTTP consumer run as written against the Worker", async () => {
    await resetDatabase(clientOf(admin));
    const env = { QUEUE_URL: worker.url, QUEUE_TOKEN };
    writeFileSync(join(app, "publish-fn.mjs"), readmeExample("publish-fn.mjs"));
    writeFileSync(
      join(app, "invoke-fn.mjs"),
      `import { POST } from "./publish-fn.mjs";
const answers = [];
// Orders 1 and 2 of customer 7, then order 1 again (a retried invocation): stored once.
for (const id of [1, 2, 1]) {
  const res = await POST(new Request("http://localhost/api/orders", {
    method: "POST", body: JSON.stringify({ id, customerId: 7, amount: 1200 }),
  }));
  answers.push([res.status, await res.json()]);
}
console.log(JSON.stringify(answers));
`,
    );
    const answers = JSON.parse((await node(["invoke-fn.mjs"], env)).trim()) as [number, { queued: number }][];
    const [first, second] = answers.map(([, a]) => a.queued) as [number, number];
    expect(answers).toEqual([
      [202, { queued: first }],
      [202, { queued: first + 1 }],
      [202, { queued: first }],
    ]);

    writeFileSync(join(app, "http-consumer.mjs"), readmeExample("http-consumer.mjs"));
    const lines = await consumeUntil("http-consumer.mjs", env, 2);
    expect(lines.filter((l) => l.startsWith("customer-7 "))).toEqual([
      `customer-7 #${first} attempt 1: {"type":"charge","order":1}`,
      `customer-7 #${second} attempt 1: {"type":"charge","order":2}`,
    ]);
    const stopped = lines.find((l) => l.startsWith("stopped: "));
    expect(JSON.parse((stopped ?? "stopped: null").slice(9))).toMatchObject({ acked: 2, nacked: 0, abandoned: 0 });
    expect((await admin.stats()).groups).toBe(0);
  });

  it("the README's named and sharded queues example runs as written against a Worker on sqld namespaces", async () => {
    const nsWorker = await namespacesWorker();
    try {
      writeFileSync(join(app, "queues.mjs"), readmeExample("queues.mjs"));
      const lines = (await node(["queues.mjs"], { QUEUE_URL: nsWorker.url, QUEUE_TOKEN })).trim().split("\n");
      for (let c = 0; c < 4; c++) {
        expect(lines.filter((l) => l.startsWith(`customer-${c}:`))).toEqual([
          `customer-${c}: invoice ${c}`,
          `customer-${c}: invoice ${c + 4}`,
        ]);
      }
      expect(lines).toContain("emails: 1 shard(s), 1 ready");
      expect(lines).toContain("billing: 4 shard(s), 0 ready");
      // The billing queue's databases: four namespaces, its messages spread over them.
      for (let i = 0; i < 4; i++) {
        const shard = await LibsqlTransport.create(inject("nsSqldUrl"), { namespace: `billing--${i}` });
        expect((await shard.stats()).groups).toBe(0);
        shard.close();
      }
    } finally {
      const api = `${nsWorker.url}/v1/queues`;
      const auth = { authorization: `Bearer ${QUEUE_TOKEN}` };
      for (const q of ["emails", "billing"]) await fetch(`${api}/${q}?force=true`, { method: "DELETE", headers: auth });
      await nsWorker.stop();
    }
  });

  it("docs/deploying.md's keys example runs as written: each key does what it may, and is refused the rest", async () => {
    const nsWorker = await namespacesWorker();
    try {
      writeFileSync(join(app, "keys.mjs"), readmeExample("keys.mjs"));
      const lines = (await node(["keys.mjs"], { QUEUE_URL: nsWorker.url, QUEUE_TOKEN })).trim().split("\n");
      expect(lines).toEqual([
        expect.stringMatching(/^worker handled customer-7 #[0-9]+$/),
        "function claims: 403 FORBIDDEN",
        "function publishes to another queue: 403 FORBIDDEN",
        "worker purges: 403 FORBIDDEN",
        "prometheus scrapes: 200",
      ]);
      const orders = await LibsqlTransport.create(inject("nsSqldUrl"), { namespace: "orders" });
      expect(await orders.stats()).toMatchObject({ ready: 0, inFlight: 0, groups: 0 });
      orders.close();
    } finally {
      await fetch(`${nsWorker.url}/v1/queues/orders?force=true`, {
        method: "DELETE",
        headers: { authorization: `Bearer ${QUEUE_TOKEN}` },
      });
      await nsWorker.stop();
    }
  });
});
