/**
 * The HTTP API's contract: every request part, every answer, every error and the push delivery as
 * valibot schemas. The same schemas validate requests (src/app/route.ts), type the handlers
 * (`c.req.valid`), generate the OpenAPI document (src/app/openapi.ts) and, through
 * src/contract/types.ts, give plain TypeScript types to any client. Nothing here imports Hono.
 */
export * from "./answers.js";
export * from "./errors.js";
export * from "./keys.js";
export * from "./requests.js";
