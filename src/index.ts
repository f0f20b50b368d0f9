export { LibsqlTransport, MAX_CLAIM_BATCH, MAX_PUBLISH_BATCH, leaseRef } from "./core/transport.js";
export type {
  DeadLetter,
  Lease,
  NackResult,
  PublishInput,
  PublishOptions,
  QueueStats,
  TransportOptions,
} from "./core/transport.js";
export { QueueError, toQueueError } from "./core/errors.js";
export type { QueueErrorCode } from "./core/errors.js";
export { MAX_PRIORITY, MIN_PRIORITY } from "./core/validate.js";
