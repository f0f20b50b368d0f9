/**
 * A lease's life: ack (done), nack (give back, optionally parked), release (give back without
 * spending an attempt), extend (heartbeat), and settle (many acks, nacks and releases in one
 * request). All are fenced by the lease, so each is sent again after a lost answer; a resend that
 * finds the lost attempt's work done reports what that attempt did, as the library does for its own
 * resends.
 */
import type * as W from "../../contract/types.js";
import { extendFromWire, settlementToWire, settleOutcomeFromWire } from "../../contract/wire.js";
import { type CheckedSettlement, checkSettlements, outcomeOf } from "../../core/settle.js";
import type { Lease, NackResult, Settlement, SettleOutcome } from "../../core/types.js";
import { leaseId } from "../../rules.js";
import { type PendingAcks, STATUS_OF_LEASE_ERROR } from "../acks.js";
import { leaseIdFrom, leaseSegment, library } from "../args.js";
import { type Engine, json } from "../engine.js";
import type { ServerFeatures } from "../features.js";
import { QueueHttpError, withUnknownOutcome } from "../http-errors.js";
import type { CallOptions } from "../options.js";
import type { DeadLetters } from "./dead-letters.js";
import type { Inspect } from "./inspect.js";

/** A resend's refusals that may only mean the lost attempt applied (see `#appliedBefore`). */
const FENCED = new Set(["LEASE_LOST", "LEASE_NOT_FOUND"]);

export class Leases {
  readonly #engine: Engine;
  readonly #acks: PendingAcks;
  readonly #inspect: Inspect;
  readonly #deadLetters: DeadLetters;
  readonly #features: ServerFeatures;

  constructor(engine: Engine, features: ServerFeatures, acks: PendingAcks, inspect: Inspect, deadLetters: DeadLetters) {
    this.#engine = engine;
    this.#features = features;
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
      return (await this.#appliedBefore("nack", lease, e, options)) as NackResult;
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
      await this.#appliedBefore("release", lease, e, options);
    }
  }

  /**
   * Many leases in one request, each with its own outcome (in the order given); on an API without
   * the settle route, one request each, all at once. `mayHaveApplied`: an earlier request carrying
   * them (a claim with acks) may have applied them, so an outcome is read as a resend's.
   */
  async settle(settlements: Settlement[], options: CallOptions, mayHaveApplied = false): Promise<SettleOutcome[]> {
    const list = library(() => checkSettlements(settlements));
    const leases = settlements.map((s) => s.lease);
    if (!this.#features.settle) return this.#settleEach(list, leases, options);
    const path = "/v1/settlements";
    const body: W.SettleRequest = { leases: list.map(settlementToWire) };
    let answer: { outcomes: SettleOutcome[]; retried: boolean };
    try {
      answer = await this.#engine.send(
        {
          method: "POST",
          path,
          body,
          write: true,
          retryUnknown: true,
          ok: (a, retried) => ({
            outcomes: json<W.SettleAnswer>(a, path).outcomes.map((o) => settleOutcomeFromWire(o, outcomeError)),
            retried,
          }),
        },
        options,
      );
    } catch (e) {
      if (e instanceof QueueHttpError && this.#features.lacksRoute(e)) return this.#settleEach(list, leases, options);
      throw e;
    }
    const resent = answer.retried || mayHaveApplied;
    return Promise.all(
      list.map(async (s, i): Promise<SettleOutcome> => {
        const o = answer.outcomes[i];
        if (o === undefined || o.leaseId !== s.id) {
          const error = new QueueHttpError("INTERNAL", `${path}: the answer has no outcome for lease ${s.id}`);
          return { leaseId: s.id, action: s.action, error };
        }
        const e = o.error;
        if (!(resent && e instanceof QueueHttpError && FENCED.has(e.code))) return o;
        try {
          const applied = await this.#appliedBefore(s.action, leases[i] as Lease | string, e, options);
          return { leaseId: o.leaseId, action: o.action, ...applied };
        } catch (err) {
          return { ...o, error: err as QueueHttpError };
        }
      }),
    );
  }

  /** Each settlement by its own route, all at once (an API without the settle route). */
  #settleEach(list: CheckedSettlement[], leases: (Lease | string)[], options: CallOptions): Promise<SettleOutcome[]> {
    return Promise.all(
      list.map((s, i) => {
        const lease = leases[i] as Lease | string;
        return outcomeOf(
          s,
          s.action === "ack"
            ? this.#acks.ackInOwnRequest(s.id, options, false)
            : s.action === "nack"
              ? this.nack(lease, s.delay, options)
              : this.release(lease, options),
        );
      }),
    );
  }

  /**
   * What an earlier attempt whose answer was lost did, read from the resend's refusal `e`: gone,
   * an ack or a release applied, and a nack either moved it to the dead letters or (held by another
   * lease) released it. Throws `e`, its outcome unknown, when that cannot be told.
   */
  async #appliedBefore(
    action: Settlement["action"],
    lease: Lease | string,
    e: QueueHttpError,
    options: CallOptions,
  ): Promise<{ deadLettered?: boolean }> {
    if (e.code === "LEASE_NOT_FOUND") {
      if (action === "ack" || action === "release") return {};
      if (await this.#isDeadLetter(leaseId.parse(leaseIdFrom(lease))?.seq ?? 0, options)) return { deadLettered: true };
    }
    if (e.code === "LEASE_LOST") {
      // Still there with another lease: an ack was lost whatever happened before (one that applied leaves no message).
      if (action === "ack") throw e;
      await this.#releasedBefore(lease, e, options);
      return action === "nack" ? { deadLettered: false } : {};
    }
    throw e.outcomeUnknown ? e : withUnknownOutcome(e);
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

/** The error of one lease's outcome, as its own route would have answered it. */
function outcomeError(e: { code: string; message: string }): QueueHttpError {
  const status = STATUS_OF_LEASE_ERROR[e.code];
  return new QueueHttpError(e.code as QueueHttpError["code"], e.message, {
    ...(status === undefined ? {} : { status, field: "lease_id" }),
    // The database's failures (UNAVAILABLE, TIMEOUT) may have left it applied.
    outcomeUnknown: e.code === "TIMEOUT" || e.code === "UNAVAILABLE",
  });
}
