/**
 * `turso-queue/client`: what runs anywhere (Node, Workers, Deno, browsers) with no Node-only import:
 * the typed HTTP client for the Worker's API (`createClient`), the consumer loop (`consume`), and
 * what a push consumer needs (the signature check, and `leaseOfDelivery` to settle a delivery).
 */

export type {
  ConsumeErrorContext,
  ConsumeOptions,
  ConsumePhase,
  ConsumerQueue,
  ConsumeSummary,
  Handler,
  HandlerContext,
  LeftLease,
} from "../consume/consume.js";
export { consume } from "../consume/consume.js";
export type { DrainOptions } from "../consume/drain.js";
export { drain } from "../consume/drain.js";
export { SIGNATURE_HEADER, signPayload, verifySignature } from "../contract/signature.js";
export type { PushDelivery } from "../contract/types.js";
/** A push delivery (the body POSTed to a subscription's URL) as a `Lease` to ack, nack, extend or release through the client. */
export { pushDeliveryFromWire as leaseOfDelivery } from "../contract/wire.js";
export type { QueueErrorCode } from "../core/errors.js";
export { QueueError } from "../core/errors.js";
export type {
  DeadLetter,
  GroupInfo,
  Lease,
  NackResult,
  PublishInput,
  QueuedMessage,
  QueueHistory,
  QueueSample,
  QueueStats,
  Settlement,
  SettleOutcome,
  Subscription,
  SubscriptionInput,
  /** The settings of `subscribe()` (the name it had before it became the library's `SubscriptionInput`). */
  SubscriptionInput as SubscriptionOptions,
} from "../core/types.js";
export { createClient, QueueClient } from "./client.js";
export type { HttpErrorCode } from "./http-errors.js";
export { QueueHttpError } from "./http-errors.js";
export type {
  CallOptions,
  ClaimOptions,
  ClientOptions,
  DeadLetterOptions,
  FetchLike,
  PublishCallOptions,
} from "./options.js";
