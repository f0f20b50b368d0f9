// What test/worker/global-setup.ts provides to the tests that run inside workerd (`inject()`).
import "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    workerSqldUrl: string;
    sqldCounterUrl: string;
    consumerUrl: string;
    consumerLogUrl: string;
    /** QUEUE_DATABASES: a static map of namespaces on a second sqld (emails, orders, spare, billing--0..3). */
    workerQueueDatabases: string;
    nsSqldUrl: string;
  }
}
