/**
 * `turso-queue/client`: what runs anywhere (Node, Workers, Deno, browsers) with no Node-only import.
 * For now the consumer loop; the typed HTTP client for the Worker's API joins it here.
 */

export type { QueueErrorCode } from "../core/errors.js";
export { QueueError } from "../core/errors.js";
export type { Lease, NackResult } from "../core/transport.js";
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
