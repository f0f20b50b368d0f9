/**
 * `turso-queue/client`: what runs anywhere (Node, Workers, Deno, browsers) with no Node-only import:
 * the typed HTTP client for the Worker's API (`createClient`) and the consumer loop (`consume`).
 */

export type { QueueErrorCode } from "../core/errors.js";
export { QueueError } from "../core/errors.js";
export type { DeadLetter, GroupInfo, Lease, NackResult, PublishInput, QueueStats } from "../core/types.js";
export type {
  ConsumeErrorContext,
  ConsumeOptions,
  ConsumePhase,
  ConsumerQueue,
  ConsumeSummary,
  Handler,
  HandlerContext,
} from "./consume.js";
export { consume } from "./consume.js";
export type {
  CallOptions,
  ClaimOptions,
  ClientOptions,
  DeadLetterOptions,
  FetchLike,
  PublishCallOptions,
} from "./http.js";
export { createClient, QueueClient } from "./http.js";
export type { HttpErrorCode } from "./http-errors.js";
export { QueueHttpError } from "./http-errors.js";
export type { Subscription, SubscriptionOptions } from "./http-next.js";
export { SIGNATURE_HEADER, signPayload, verifySignature } from "./signature.js";
