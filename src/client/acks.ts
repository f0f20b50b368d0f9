/**
 * Acks that ride with claims: one round trip per message for consume(). An ack issued in the same
 * tick as a claim travels in that claim's request (`"ack": [...]`), the HTTP counterpart of the
 * library's group commit; the acks no claim took by the end of their tick go together in one
 * settle request (one alone by its own route).
 *
 * Acks are fenced, so sending one again is safe; a resent ack that finds its message gone reports
 * success, as the library does for its own resends (the attempt whose answer was lost deleted it).
 */
import type * as W from "../contract/types.js";
import type { SettleOutcome } from "../core/types.js";
import { MAX_CLAIM_ACKS, MAX_SETTLE_BATCH } from "../rules.js";
import { leaseSegment } from "./args.js";
import type { Engine } from "./engine.js";
import type { ServerFeatures } from "./features.js";
import { QueueHttpError } from "./http-errors.js";
import type { CallOptions } from "./options.js";

/** An ack waiting to ride with the next claim (or to go on its own at the end of the tick). */
export interface PendingAck {
  id: string;
  resolve(): void;
  reject(e: unknown): void;
}

/** The codes of a lease's outcome in a claim's or a settle's answer, with the status each has on its own route. */
export const STATUS_OF_LEASE_ERROR: Record<string, number> = {
  LEASE_LOST: 409,
  LEASE_NOT_FOUND: 404,
  INVALID_ARGUMENT: 400,
};

/** Acks many leases in one settle request (`mayHaveApplied`: as resends). */
export type SettleAcks = (ids: string[], mayHaveApplied: boolean) => Promise<SettleOutcome[]>;

export class PendingAcks {
  readonly #engine: Engine;
  readonly #features: ServerFeatures;
  readonly #settle: SettleAcks;
  /** Acks waiting for a claim in this tick; sent without one at the end of it otherwise. */
  #waiting: PendingAck[] = [];
  #flushQueued = false;

  constructor(engine: Engine, features: ServerFeatures, settle: SettleAcks) {
    this.#engine = engine;
    this.#features = features;
    this.#settle = settle;
  }

  /** Acks lease `id`: without per-call options, by the next claim of this tick if one comes. */
  ack(id: string, options: CallOptions | undefined): Promise<void> {
    if (options !== undefined || !this.#features.acks) return this.ackInOwnRequest(id, options ?? {}, false);
    return new Promise<void>((resolve, reject) => {
      this.#waiting.push({ id, resolve, reject });
      if (!this.#flushQueued) {
        this.#flushQueued = true;
        queueMicrotask(() => {
          this.#flushQueued = false;
          this.sendWithoutClaim(this.#waiting.splice(0), false);
        });
      }
    });
  }

  /** The acks a claim sent now carries (none when the server takes no acks with claims). */
  take(): PendingAck[] {
    return this.#features.acks ? this.#waiting.splice(0, MAX_CLAIM_ACKS) : [];
  }

  /** Settles the acks of a claim from its answer's outcomes; `retried`: the claim may have been applied before. */
  settle(acks: PendingAck[], answer: W.LeaseList, retried: boolean): void {
    const outcomes = ackOutcomes(
      answer,
      acks.map((r) => r.id),
    );
    acks.forEach((r, i) => {
      const o = outcomes[i];
      if (o === undefined) {
        // The answer does not say: ask again on its own (fenced, so sending it again is safe).
        this.ackInOwnRequest(r.id, {}, true).then(r.resolve, r.reject);
      } else if (o.error === undefined) {
        r.resolve();
      } else {
        const e = new QueueHttpError(o.error.code as QueueHttpError["code"], o.error.message, {
          status: STATUS_OF_LEASE_ERROR[o.error.code],
          field: "lease_id",
        });
        if (ackDone(e, retried)) r.resolve();
        else r.reject(e);
      }
    });
  }

  /**
   * Sends acks no claim carries, each to its own answer: together in settle requests (one alone by
   * its own route). `mayHaveApplied` when a claim that carried them failed and may have applied
   * them, so that they are read as resends.
   */
  sendWithoutClaim(acks: PendingAck[], mayHaveApplied: boolean): void {
    if (acks.length === 1 || (acks.length > 1 && !this.#features.settle)) {
      for (const r of acks) this.ackInOwnRequest(r.id, {}, mayHaveApplied).then(r.resolve, r.reject);
      return;
    }
    for (let i = 0; i < acks.length; i += MAX_SETTLE_BATCH) {
      const part = acks.slice(i, i + MAX_SETTLE_BATCH);
      this.#settle(
        part.map((r) => r.id),
        mayHaveApplied,
      ).then(
        (outcomes) =>
          part.forEach((r, k) => {
            const error = outcomes[k]?.error;
            if (error === undefined) r.resolve();
            else r.reject(error);
          }),
        (e) => {
          for (const r of part) r.reject(e);
        },
      );
    }
  }

  /** One ack, in its own request; `retried`: an earlier request with this ack may have applied it. */
  async ackInOwnRequest(id: string, options: CallOptions, retried: boolean): Promise<void> {
    const path = `/v1/leases/${leaseSegment(id)}/ack`;
    try {
      await this.#engine.send({ method: "POST", path, write: true, retryUnknown: true, ok: () => undefined }, options);
    } catch (e) {
      if (e instanceof QueueHttpError && ackDone(e, retried || e.outcomeUnknown)) return;
      throw e;
    }
  }
}

/**
 * A fenced ack that was sent before: a message now gone was deleted by the attempt whose answer
 * was lost (the library reads a resent ack the same way). Still present with another lease: the
 * lease was lost, whatever happened before (an ack that applied leaves no message).
 */
const ackDone = (e: QueueHttpError, retried: boolean): boolean => retried && e.code === "LEASE_NOT_FOUND";

/** The ack outcomes of a claim's answer, one per id sent (in order), or undefined where the answer does not say. */
function ackOutcomes(answer: W.LeaseList, ids: string[]): (W.AckOutcome | undefined)[] {
  const acks = Array.isArray(answer.acks) ? answer.acks : [];
  return ids.map((id, i) => (acks[i]?.lease_id === id ? acks[i] : undefined));
}
