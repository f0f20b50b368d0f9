import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";
import { TEST_ED25519, TEST_JWT_SECRET, TEST_TOKEN, TEST_TOKEN_NEXT } from "./test/worker/constants.js";

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "node",
          include: ["test/**/*.test.ts"],
          exclude: ["test/worker/**"],
          environment: "node",
          globalSetup: ["test/support/global-setup.ts"],
          // The files share one sqld and reset it: one file at a time.
          fileParallelism: false,
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        // The Worker (src/worker.ts) inside workerd, talking to a real sqld over 127.0.0.1.
        plugins: [
          cloudflareTest(({ inject }) => ({
            main: "./src/worker.ts",
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: {
              bindings: {
                TURSO_DATABASE_URL: inject("workerSqldUrl"),
                QUEUE_TOKEN: TEST_TOKEN,
                QUEUE_TOKEN_NEXT: TEST_TOKEN_NEXT,
                QUEUE_JWT_SECRET: TEST_JWT_SECRET,
                QUEUE_JWT_PUBLIC_KEYS: JSON.stringify(TEST_ED25519.public),
                QUEUE_DATABASES: inject("workerQueueDatabases"),
              },
            },
          })),
        ],
        test: {
          name: "workers",
          include: ["test/worker/**/*.test.ts"],
          globalSetup: ["test/worker/global-setup.ts"],
          // The files share one sqld and reset it between tests: one file at a time.
          fileParallelism: false,
          testTimeout: 120_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
