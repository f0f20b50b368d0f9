/**
 * A lease's life: ack (done), nack (give back, optionally parked), release (give back without
 * spending an attempt), extend (heartbeat). All are fenced by the lease, so each is sent again
 * after a lost answer; a resend that finds the lost attempt's work done reports what that attempt
 * did, as the library does for its own resends.
 */
import type * as W from "../../contract/types.js";
import { extendFromWire } from "../../contract/wire.js";
import type { Lease, NackResult } from "../../core/types.js";
import { leaseId } from "../../rules.js";
import type { AckRiders } from "../acks.js";
import { leaseIdFrom, leaseSegment } from "../args.js";
import { type Engine, json } from "../engine.js";
import { QueueHttpError, withUnknownOutcome } from "../http-errors.js";
import type { CallOptions } from "../options.js";
import type { DeadLetters } from "./dead-letters.js";
import type { Inspect } from "./inspect.js";

export class Leases {
  readonly #engine: Engine;
  readonly #acks: AckRiders;
  readonly #inspect: Inspect;
  readonly #deadLetters: DeadLetters;

  constructor(engine: Engine, acks: AckRiders, inspect: Inspect, deadLetters: DeadLetters) {
    this.#engine = engine;
    this.#acks = acks;
    this.#inspect = inspect;
    this.#deadLetters = deadLetters;
  }

  /** Not async: the ack must be waiting for a claim of the caller's tick before this returns. */
  ack(lease: Lease | string, options: CallOptions | undefined): Promise<void> {
    let id: string;
    try {
      id = leaseIdFrom(lease);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#acks.ack(id, options);
  }

  async nack(lease: Lease | string, delay: number | undefined, options: CallOptions): Promise<NackResult> {
    const id = leaseIdFrom(lease);
    const body: W.NackRequest = delay === undefined ? {} : { delay };
    try {
      return await this.#engine.send(
        {
          method: "POST",
          path: `/v1/leases/${leaseSegment(id)}/nack`,
          body,
          write: true,
          retryUnknown: true,
          ok: (a) => ({ deadLettered: a.headers.get("dead-lettered") === "true" }),
        },
        options,
      );
    } catch (e) {
      if (!(e instanceof QueueHttpError && e.outcomeUnknown)) throw e;
      // An earlier attempt may have applied. Gone: it is a dead letter if that attempt moved it there.
      if (e.code === "LEASE_NOT_FOUND" && (await this.#isDeadLetter(leaseId.parse(id)?.seq ?? 0, options))) {
        return { deadLettered: true };
      }
      if (e.code === "LEASE_LOST") {
        await this.#releasedBefore(lease, e, options);
        return { deadLettered: false };
      }
      throw e;
    }
  }

  /**
   * Gives a lease back unhandled: the message is claimable again at once and this delivery does not
   * count among its attempts (a nack's does).
   */
  async release(lease: Lease | string, options: CallOptions): Promise<void> {
    const id = leaseIdFrom(lease);
    try {
      await this.#engine.send(
        {
          method: "POST",
          path: `/v1/leases/${leaseSegment(id)}/release`,
          write: true,
          retryUnknown: true,
          ok: () => {},
        },
        options,
      );
    } catch (e) {
      if (!(e instanceof QueueHttpError && e.outcomeUnknown)) throw e;
      // An earlier attempt may have applied. Gone: nothing is left to give back (the library reads
      // its own resent release the same way).
      if (e.code === "LEASE_NOT_FOUND") return;
      if (e.code === "LEASE_LOST") return this.#releasedBefore(lease, e, options);
      throw e;
    }
  }

  async extend<E>(
    lease: Lease<E> | string,
    visibility: number,
    options: CallOptions,
  ): Promise<Lease<E> | { id: string; expiresAt: number }> {
    const id = leaseIdFrom(lease);
    const path = `/v1/leases/${leaseSegment(id)}/extend`;
    const body: W.ExtendRequest = { visibility };
    const extended = await this.#engine.send(
      { method: "POST", path, body, write: true, retryUnknown: true, ok: (a) => extendFromWire(json(a, path)) },
      options,
    );
    return typeof lease === "string" ? extended : { ...lease, expiresAt: extended.expiresAt };
  }

  /**
   * A resent nack or release found the message held by another lease. While our lease has not
   * lapsed nobody else can have claimed the message, so the attempt whose answer was lost gave it
   * back. Past that, it may have lapsed and been claimed before our call: the API cannot tell.
   */
  async #releasedBefore(lease: Lease | string, e: QueueHttpError, options: CallOptions): Promise<void> {
    if (typeof lease === "object" && (await this.#notLapsed(lease.expiresAt, options))) return;
    throw withUnknownOutcome(e, "an earlier attempt's answer was lost: it may have released the message");
  }

  /** True when a lease expiring at `expiresAt` has not lapsed yet, by the database's clock. */
  async #notLapsed(expiresAt: unknown, options: CallOptions): Promise<boolean> {
    if (typeof expiresAt !== "number") return false;
    return expiresAt > (await this.#inspect.stats({ signal: options.signal })).now;
  }

  async #isDeadLetter(seq: number, options: CallOptions): Promise<boolean> {
    if (!Number.isSafeInteger(seq)) return false;
    const [first] = await this.#deadLetters.list({ afterSeq: seq - 1, limit: 1, signal: options.signal });
    return first?.seq === seq;
  }
}
