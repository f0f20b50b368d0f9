/** Shared by vitest.config.ts (bindings) and the workers tests. */
export const TEST_TOKEN = "test-queue-token-0123456789abcdef";
