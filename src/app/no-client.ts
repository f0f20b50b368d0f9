/**
 * What the Worker's bundle has in place of `@libsql/client` (wrangler.toml, `[alias]`): the Worker
 * reaches its databases over HTTP through src/core/hrana.ts alone (src/app/databases.ts). The
 * library's `LibsqlTransport.create`, which opens embedded replicas and `ws://` URLs with the client,
 * is never called in it.
 */
export function createClient(): never {
  throw new Error("this Worker opens databases over HTTP only (src/app/databases.ts); @libsql/client is not bundled");
}
