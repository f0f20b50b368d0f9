/** The client's public options: of `createClient()`, and per call. */

/** The part of `fetch` the client uses (the platform's `fetch` is one). */
export type FetchLike = (
  url: string,
  init: { method: string; headers: Record<string, string>; body?: string; signal: AbortSignal },
) => Promise<{ status: number; headers: { get(name: string): string | null }; text(): Promise<string> }>;

export interface ClientOptions {
  /** Where the API is served, e.g. `https://turso-queue.example.workers.dev` (a path prefix is kept: `https://example.com/queue`). */
  url: string;
  /** The API's bearer token (`QUEUE_TOKEN`). */
  token: string;
  /** Default: in Node a keep-alive `fetch` with Nagle off (as the library's); elsewhere `globalThis.fetch`. */
  fetch?: FetchLike;
  /** A call's budget in ms, retries and their pauses included (default 30,000); a long poll adds its wait. */
  timeoutMs?: number;
  /** Most times a call is sent again after a failure it is safe to retry (default 4). */
  retries?: number;
  /**
   * The longest a claim waits for a message, in seconds, when consume() long-polls with this client
   * (0 to 20, default 20; 0: consume() polls with its idle backoff instead).
   */
  maxClaimWait?: number;
  /**
   * The named queue this client serves (`/v1/queues/{queue}/...`); default: the default queue
   * (`/v1/...`). `client.queue(name)` answers a client of another queue.
   */
  queue?: string;
  /**
   * Give every publish an Idempotency-Key of its own when the caller gives none (default true), so
   * that a publish whose answer was lost can be sent again without enqueuing twice. False: only the
   * caller's keys travel (a key costs the database a row), and a publish without one is not resent
   * after a lost answer.
   */
  autoIdempotencyKeys?: boolean;
}

/** Per call: `signal` aborts it (the call rejects with the signal's reason); `timeoutMs` replaces the client's. */
export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

export interface PublishCallOptions extends CallOptions {
  /** Makes a retry of the same publish return the first answer; default: one the client makes per call. */
  idempotencyKey?: string;
  /** The W3C trace context the messages carry to their consumers; default: the publish's own span (with an OpenTelemetry SDK). */
  traceparent?: string;
  /** Seconds before the message may be delivered (it keeps its place in its group). For publishMany: the default of messages that give none. */
  delay?: number;
}

export interface ClaimOptions extends CallOptions {
  /** Seconds (0-20) the API may hold the claim open until a message can be leased (long poll). */
  wait?: number;
}

export interface DeadLetterOptions extends CallOptions {
  groupId?: string;
  afterSeq?: number;
  limit?: number;
}
