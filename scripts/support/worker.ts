/**
 * Runs the Worker (src/worker.ts, configured by wrangler.toml) in workerd through wrangler's own
 * dev server, on a free loopback port, bound to a given database: what `wrangler dev` serves, over
 * real HTTP, each request in its own request context as in production. Used by the HTTP load test
 * (the vitest pool's SELF.fetch slows down with every request it has sent, workers-sdk#15446, so a
 * long run cannot go through it).
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { unstable_startWorker } from "wrangler";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

export interface RunningWorker {
  url: string;
  stop(): Promise<void>;
}

export interface WorkerOptions {
  databaseUrl: string;
  queueToken: string;
  /** More [vars] (QUEUE_DATABASES, SQLD_ADMIN_URL, ...). */
  vars?: Record<string, string>;
}

export async function startWorker(o: WorkerOptions): Promise<RunningWorker> {
  process.env.WRANGLER_SEND_METRICS = "false";
  const worker = await unstable_startWorker({
    config: join(root, "wrangler.toml"),
    bindings: {
      TURSO_DATABASE_URL: { type: "plain_text", value: o.databaseUrl },
      QUEUE_TOKEN: { type: "plain_text", value: o.queueToken },
      ...Object.fromEntries(
        Object.entries(o.vars ?? {}).map(([k, value]) => [k, { type: "plain_text" as const, value }]),
      ),
    },
    dev: {
      server: { hostname: "127.0.0.1", port: 0 },
      inspector: false,
      watch: false,
      persist: false,
      logLevel: "error",
    },
  });
  await worker.ready;
  const url = (await worker.url).toString().replace(/\/$/, "");
  return { url, stop: () => worker.dispose() };
}
