/**
 * The workers project's own sqld (separate from the node project's): started once, its URL
 * provided to vitest.config.ts, which binds it as TURSO_DATABASE_URL for the Worker under test.
 */
import type { TestProject } from "vitest/node";
import { startSqld } from "../../scripts/sqld.js";

declare module "vitest" {
  export interface ProvidedContext {
    workerSqldUrl: string;
  }
}

export default async function setup(project: TestProject) {
  const sqld = await startSqld();
  project.provide("workerSqldUrl", sqld.url);
  return async () => {
    await sqld.stop();
  };
}
