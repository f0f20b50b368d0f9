// What test/worker/global-setup.ts provides to the tests that run inside workerd (`inject()`).
import "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    workerSqldUrl: string;
    sqldCounterUrl: string;
    consumerUrl: string;
    consumerLogUrl: string;
  }
}
