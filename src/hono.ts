/**
 * `turso-queue/hono`: the queue's HTTP API as a Hono app, to mount in your own Hono app or Worker
 * (`app.route("/queue", createApp(sharedTransports()))`), with the two transport factories the
 * Worker itself uses.
 */
export type { AppEnv, AppOptions, TransportFactory } from "./app/app.js";
export { createApp } from "./app/app.js";
export type { Bindings, Config } from "./app/env.js";
export { perRequestTransports, sharedTransports } from "./app/transports.js";
