/** What a request of the app carries (Hono's `Env`): the bindings, and what the middleware sets. Types only. */
import type { LibsqlTransport } from "../core/transport.js";
import type { ClaimContext } from "./claiming.js";
import type { Bindings, Config } from "./env.js";

/** Returns the transport for a configuration; expected to build it once and cache it. */
export type TransportFactory = (config: Config) => Promise<LibsqlTransport>;

export interface AppEnv {
  Bindings: Bindings;
  Variables: {
    config: Config;
    /** The transport, fetched only once the input has been validated. */
    queue: () => Promise<LibsqlTransport>;
    /** Lets go of the database for `ms` (a long poll's pause); the next `queue()` takes it again. */
    idle: (ms: number, signal?: AbortSignal) => Promise<void>;
    /** How a claim's `wait` is served (AppOptions.waits). */
    waits: ClaimContext["waits"];
  };
}
