/**
 * Serves the Worker's production bundle (what `npm run deploy:dry` writes to dist-worker/) with
 * Miniflare, QueueWriter Durable Object bound, against a given database: the Worker as workerd runs
 * it, without `wrangler dev`'s proxy in front (about 5 ms a request here), and on a socket straight to
 * the Worker (`unsafeDirectSockets`): Miniflare's default socket runs its own entry Worker before ours
 * on every request (URL and header rewriting, error pages, logging; 0.21 of the 0.30 ms of workerd CPU
 * a `/healthz` costs), which a deployed Worker does not have. For the benchmarks of the Worker's path.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare, type MiniflareOptions } from "miniflare";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

export interface ServedWorker {
  url: string;
  stop(): Promise<void>;
  /**
   * Stops workerd and starts it again on the same storage (with `persist`): every Durable Object is
   * reset, whatever it was doing. Answers the new URL (the port changes).
   */
  restart(): Promise<string>;
}

/**
 * Builds dist-worker/worker.js (wrangler deploy --dry-run), once per process. `root` and `outdir`
 * (relative to `root`) build another checkout's bundle, or this one's elsewhere (bench/versus.ts).
 */
const built = new Set<string>();
export function buildWorker(o: { root?: string; outdir?: string } = {}): string {
  const root = o.root ?? ROOT;
  const outdir = resolve(root, o.outdir ?? "dist-worker");
  const bundle = join(outdir, "worker.js");
  if (built.has(bundle)) return bundle;
  const r = spawnSync("npx", ["wrangler", "deploy", "--dry-run", "--outdir", outdir], {
    cwd: root,
    stdio: ["ignore", "ignore", "inherit"],
    env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
  });
  if (r.status !== 0) throw new Error(`wrangler deploy --dry-run failed in ${root} (${r.status})`);
  built.add(bundle);
  return bundle;
}

/** wrangler.toml's compatibility date and flags, so that the bundle runs as it would deployed. */
function compat(root: string): { date: string; flags: string[] } {
  const toml = readFileSync(join(root, "wrangler.toml"), "utf8");
  const date = /^compatibility_date\s*=\s*"([^"]+)"/m.exec(toml)?.[1] ?? "2026-04-20";
  const flags = /^compatibility_flags\s*=\s*\[([^\]]*)\]/m.exec(toml)?.[1] ?? "";
  return { date, flags: [...flags.matchAll(/"([^"]+)"/g)].map((m) => m[1] as string) };
}

export async function serveWorker(o: {
  databaseUrl: string;
  queueToken: string;
  /** Extra [vars] (QUEUE_RECHECK_SECONDS, ...). */
  vars?: Record<string, string>;
  /** Serve without the QueueWriter (each request serves itself). */
  noWriter?: boolean;
  /** Keep the Durable Object's storage (its alarm) in this directory, across restarts. */
  persist?: string;
  /** The checkout whose bundle (and wrangler.toml) to serve (default: this one). */
  root?: string;
  /** Where its bundle is built, relative to `root` (default dist-worker). */
  outdir?: string;
}): Promise<ServedWorker> {
  const bundle = buildWorker({ root: o.root, outdir: o.outdir });
  const { date, flags } = compat(o.root ?? ROOT);
  const options: MiniflareOptions = {
    host: "127.0.0.1",
    port: 0,
    unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
    // One module: the bundle has no other (its dynamic imports serve Node-only paths it never takes).
    modulesRoot: dirname(bundle),
    modules: [{ type: "ESModule" as const, path: bundle }],
    compatibilityDate: date,
    compatibilityFlags: flags,
    bindings: { TURSO_DATABASE_URL: o.databaseUrl, QUEUE_TOKEN: o.queueToken, ...(o.vars ?? {}) },
    ...(o.noWriter ? {} : { durableObjects: { QUEUE_WRITER: "QueueWriter" } }),
    ...(o.persist ? { durableObjectsPersist: o.persist } : {}),
  };
  const start = async () => {
    const mf = new Miniflare(options);
    await mf.ready;
    return { mf, url: (await mf.unsafeGetDirectURL()).toString().replace(/\/$/, "") };
  };
  let current = await start();
  const served: ServedWorker = {
    url: current.url,
    stop: () => current.mf.dispose(),
    async restart() {
      await current.mf.dispose();
      current = await start();
      served.url = current.url;
      return current.url;
    },
  };
  return served;
}

// `tsx scripts/support/miniflare.ts <database url> <token>`: serve until Ctrl-C.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [databaseUrl = "http://127.0.0.1:8080", queueToken = "local-dev-token-0123456789"] = process.argv.slice(2);
  const w = await serveWorker({ databaseUrl, queueToken });
  console.log(`Worker bundle on ${w.url} (Miniflare), database ${databaseUrl}`);
  process.once("SIGINT", () => void w.stop().then(() => process.exit(0)));
}
