// What test/worker/global-setup.ts provides to the tests that run inside workerd (`inject()`).
import "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    workerSqldUrl: string;
    sqldCounterUrl: string;
    consumerUrl: string;
    consumerLogUrl: string;
    /** QUEUE_DATABASES: a static map of namespaces on a second sqld (emails, orders, spare, billing--0..3, mixed--0 and mixed--1 = billing--1, shaky--0..3). */
    workerQueueDatabases: string;
    nsSqldUrl: string;
    /** The control of the proxy between the Worker and its sqld (scripts/support/proxy.ts controlProxy). */
    sqldControlUrl: string;
    /** Another proxy to the same sqld, for the library inside workerd, and its control. */
    faultSqldUrl: string;
    faultControlUrl: string;
    /** The control of a proxy in front of shard 2 of the mapped queue `shaky` (a shard that goes down). */
    shardControlUrl: string;
    /** The admin API of the Worker's sqld (to block its writes as Turso blocks a database over quota). */
    sqldAdminUrl: string;
  }
}
