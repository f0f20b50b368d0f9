/**
 * Claims: leases, with acks riding along (./acks.ts: PendingAcks) and long polls (`wait`). Safe to send again
 * after a lost answer: a lease nobody holds lapses after its visibility.
 */
import type * as W from "../../contract/types.js";
import { leaseFromWire } from "../../contract/wire.js";
import { pollUntil, sleepOrThrow } from "../../core/backoff.js";
import type { Lease } from "../../core/types.js";
import { IDLE_POLL } from "../../rules.js";
import type { PendingAcks } from "../acks.js";
import { checkOptions } from "../args.js";
import { type Engine, json } from "../engine.js";
import type { ServerFeatures } from "../features.js";
import { QueueHttpError } from "../http-errors.js";
import type { ClaimOptions } from "../options.js";

export class Claims {
  readonly #engine: Engine;
  readonly #features: ServerFeatures;
  readonly #acks: PendingAcks;

  constructor(engine: Engine, features: ServerFeatures, acks: PendingAcks) {
    this.#engine = engine;
    this.#features = features;
    this.#acks = acks;
  }

  async claim<E>(
    workerId: string,
    visibility: number,
    minPriority: number | undefined,
    options: ClaimOptions,
  ): Promise<Lease<E> | null> {
    const [lease] = await this.claimMany<E>(workerId, visibility, 1, minPriority, options);
    return lease ?? null;
  }

  async claimMany<E>(
    workerId: string,
    visibility: number,
    n: number,
    minPriority: number | undefined,
    options: ClaimOptions,
  ): Promise<Lease<E>[]> {
    checkOptions(options);
    const wait = options.wait ?? 0;
    if (wait !== 0 && !this.#features.waits) return this.#poll<E>(workerId, visibility, n, minPriority, options);
    // Acks issued in this tick ride along, unless this claim may be held open (they would wait with it).
    // Taken before any await: an ack issued in the caller's tick is waiting now.
    const carried = wait === 0 ? this.#acks.take() : [];
    const body: W.ClaimRequest = { worker_id: workerId, visibility, max: n };
    if (minPriority !== undefined) body.min_priority = minPriority;
    if (wait !== 0) body.wait = wait;
    if (carried.length > 0) body.ack = carried.map((r) => r.id);
    const path = "/v1/claims";
    try {
      const { answer, retried } = await this.#engine.send(
        {
          method: "POST",
          path,
          body,
          write: true,
          retryUnknown: true,
          ok: (a, retried) => ({ answer: json<W.LeaseList>(a, path), retried }),
          extraMs: typeof body.wait === "number" ? body.wait * 1000 : 0,
        },
        options,
      );
      if (carried.length > 0) this.#acks.settle(carried, answer, retried);
      return answer.leases.map((l) => leaseFromWire<E>(l, workerId));
    } catch (e) {
      // The carried acks go without a claim, each to its own answer (read as a resend when the
      // claim may have applied them).
      this.#acks.sendWithoutClaim(carried, !(e instanceof QueueHttpError) || e.outcomeUnknown);
      // Refused for what the carried acks or `wait` added: the claim itself was fine, so send it without them.
      const sent = { acks: carried.length > 0, wait: body.wait !== undefined };
      if (e instanceof QueueHttpError && this.#features.refusedFor(e, sent)) {
        return this.claimMany<E>(workerId, visibility, n, minPriority, options);
      }
      throw e;
    }
  }

  /**
   * `wait` on a server without long polls: claims (with no wait) until a lease comes or the wait is
   * over, pausing as an idle consumer does; aborting `signal` rejects with its reason.
   */
  #poll<E>(
    workerId: string,
    visibility: number,
    n: number,
    minPriority: number | undefined,
    options: ClaimOptions,
  ): Promise<Lease<E>[]> {
    const signal = options.signal;
    return pollUntil(
      () => this.claimMany<E>(workerId, visibility, n, minPriority, { ...options, wait: 0 }),
      (leases) => leases.length > 0,
      {
        deadline: Date.now() + (options.wait ?? 0) * 1000,
        pauses: { initial: IDLE_POLL.minMs, max: IDLE_POLL.maxMs },
        signal,
        wait: (ms) => sleepOrThrow(ms, signal),
      },
    );
  }
}
