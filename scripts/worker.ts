/**
 * Runs the Worker (src/worker.ts, configured by wrangler.toml) in workerd through wrangler's own
 * dev server, on a free loopback port, bound to a given database: what `wrangler dev` serves, over
 * real HTTP, each request in its own request context as in production. Used by the HTTP load test
 * and the Worker benchmark (the vitest pool's SELF.fetch slows down with every request it has
 * sent, workers-sdk#15446, so a long run cannot go through it).
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { unstable_startWorker } from "wrangler";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

export interface RunningWorker {
  url: string;
  stop(): Promise<void>;
}

export interface WorkerOptions {
  databaseUrl: string;
  queueToken: string;
  /** false: a config without the QueueWriter Durable Object (every request served by the Worker itself). */
  writer?: boolean;
}

export async function startWorker(o: WorkerOptions): Promise<RunningWorker> {
  let config = join(root, "wrangler.toml");
  if (o.writer === false) {
    // The same Worker, without the Durable Object binding and its migration.
    config = join(mkdtempSync(join(tmpdir(), "tq-worker-")), "wrangler.toml");
    writeFileSync(
      config,
      `name = "turso-queue"\nmain = "${join(root, "src", "worker.ts")}"\ncompatibility_date = "2026-04-20"\n`,
    );
  }
  process.env.WRANGLER_SEND_METRICS = "false";
  const worker = await unstable_startWorker({
    config,
    bindings: {
      TURSO_DATABASE_URL: { type: "plain_text", value: o.databaseUrl },
      QUEUE_TOKEN: { type: "plain_text", value: o.queueToken },
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
