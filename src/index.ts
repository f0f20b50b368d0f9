/** `turso-queue`: the library (LibsqlTransport), consume(), the error class and the shapes they use. */
export type {
  ConsumeErrorContext,
  ConsumeOptions,
  ConsumePhase,
  ConsumerQueue,
  ConsumeSummary,
  Handler,
  HandlerContext,
  LeftLease,
} from "./consume/consume.js";
export { consume } from "./consume/consume.js";
export type { DrainOptions } from "./consume/drain.js";
export { drain } from "./consume/drain.js";
export { SIGNATURE_HEADER, signPayload, verifySignature } from "./contract/signature.js";
export type { PushDelivery } from "./contract/types.js";
export type { QueueErrorCode } from "./core/errors.js";
export { QueueError, toQueueError } from "./core/errors.js";
export type { Shard } from "./core/sharded.js";
export { ShardedQueue } from "./core/sharded.js";
export type { ClientOptions, TransportOptions } from "./core/transport.js";
export { LibsqlTransport } from "./core/transport.js";
export type {
  DeadLetter,
  GroupInfo,
  Lease,
  NackResult,
  PublishInput,
  PublishOptions,
  QueuedMessage,
  QueueHistory,
  QueueSample,
  QueueStats,
  Settlement,
  SettleOutcome,
  Subscription,
  SubscriptionInput,
} from "./core/types.js";
export { MAX_CLAIM_BATCH, MAX_PRIORITY, MAX_PUBLISH_BATCH, MAX_SETTLE_BATCH, MIN_PRIORITY } from "./rules.js";
