/**
 * Starts the real sqld servers a vitest project's tests share: one plain (`inject("sqldUrl")`), and
 * one with namespaces (`inject("nsSqldUrl")`, its admin API `inject("nsAdminUrl")`) for the tests
 * of many databases (named and sharded queues).
 */
import type { TestProject } from "vitest/node";
import { startSqld } from "../../scripts/support/sqld.js";

declare module "vitest" {
  export interface ProvidedContext {
    sqldUrl: string;
    nsSqldUrl: string;
    nsAdminUrl: string;
  }
}

export default async function setup(project: TestProject) {
  const [sqld, ns] = await Promise.all([startSqld(), startSqld({ namespaces: true })]);
  project.provide("sqldUrl", sqld.url);
  project.provide("nsSqldUrl", ns.url);
  project.provide("nsAdminUrl", ns.adminUrl as string);
  return async () => {
    await Promise.all([sqld.stop(), ns.stop()]);
  };
}
