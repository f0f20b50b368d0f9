/** Every statement the queue runs, by concern (see ./plan.ts). */
export * from "./claim.js";
export * from "./dead-letters.js";
export * from "./groups.js";
export * from "./inspect.js";
export * from "./keys.js";
export * from "./leases.js";
export * from "./plan.js";
export * from "./publish.js";
export * from "./queues.js";
export * from "./schedules.js";
export * from "./settings.js";
export * from "./shard.js";
export * from "./subscriptions.js";
