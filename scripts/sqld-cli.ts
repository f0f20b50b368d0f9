/**
 * `npm run sqld`: a local sqld for using the library over HTTP, with its data under ./.data/sqld.
 * Options: --port N (default 8080), --data DIR. Ctrl-C stops it.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { startSqld } from "./support/sqld.js";

const { values } = parseArgs({
  options: { port: { type: "string", default: "8080" }, data: { type: "string", default: join(".data", "sqld") } },
});
const port = Number(values.port);
if (!Number.isInteger(port) || port < 1 || port > 65535) {
  console.error(`--port: must be an integer from 1 to 65535, got ${values.port}`);
  process.exit(2);
}
mkdirSync(values.data as string, { recursive: true });
const sqld = await startSqld({ port, dataDir: join(values.data as string, "data.sqld") });
console.log(`sqld is serving ${sqld.url} (data in ${sqld.dataDir}); Ctrl-C stops it`);
const stop = async () => {
  await sqld.stop();
  process.exit(0);
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
sqld.process.once("exit", (code) => {
  console.error(`sqld exited (${code})`);
  process.exit(1);
});
