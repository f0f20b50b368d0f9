/** Starts one real sqld for a vitest project and provides its URL to the tests (`inject("sqldUrl")`). */
import type { TestProject } from "vitest/node";
import { startSqld } from "../../scripts/support/sqld.js";

declare module "vitest" {
  export interface ProvidedContext {
    sqldUrl: string;
  }
}

export default async function setup(project: TestProject) {
  const sqld = await startSqld();
  project.provide("sqldUrl", sqld.url);
  return async () => {
    await sqld.stop();
  };
}
