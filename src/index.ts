export type {
  ConsumeErrorContext,
  ConsumeOptions,
  ConsumePhase,
  ConsumerQueue,
  ConsumeSummary,
  Handler,
  HandlerContext,
} from "./client/consume.js";
export { consume } from "./client/consume.js";
export { SIGNATURE_HEADER, signPayload, verifySignature } from "./client/signature.js";
export type { QueueErrorCode } from "./core/errors.js";
export { QueueError, toQueueError } from "./core/errors.js";
export type {
  Subscription as PushSubscription,
  SubscriptionInput as PushSubscriptionInput,
} from "./core/subscriptions.js";
export type {
  Change,
  DeadLetter,
  GroupInfo,
  Lease,
  NackResult,
  PublishInput,
  PublishOptions,
  QueueStats,
  TransportOptions,
} from "./core/transport.js";
export { LibsqlTransport, leaseRef, MAX_CLAIM_BATCH, MAX_PUBLISH_BATCH } from "./core/transport.js";
export { MAX_PRIORITY, MIN_PRIORITY } from "./core/validate.js";
