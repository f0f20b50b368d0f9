/**
 * `turso-queue/hono`: the queue's HTTP API as a Hono app, to mount in your own Hono app or Worker
 * (`app.route("/queue", createApp(perRequestTransports()))`), with the two transport factories the
 * Worker itself uses: `perRequestTransports()` in a plain Worker (workerd does not let one request
 * wait on I/O another started), `sharedTransports()` in a Durable Object or a long-lived server.
 */
export type { AppOptions } from "./app/app.js";
export { createApp } from "./app/app.js";
export type { AppEnv, TransportFactory } from "./app/context.js";
export type { Bindings, Config } from "./app/env.js";
export { perRequestTransports, sharedTransports } from "./app/transports.js";
