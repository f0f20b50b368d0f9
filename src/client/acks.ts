/**
 * Acks that ride with claims: one round trip per message for consume(). An ack issued in the same
 * tick as a claim travels in that claim's request (`"ack": [...]`), the HTTP counterpart of the
 * library's group commit; an ack no claim took by the end of its tick goes on its own.
 *
 * Acks are fenced, so sending one again is safe; a resent ack that finds its message gone reports
 * success, as the library does for its own resends (the attempt whose answer was lost deleted it).
 */
import type * as W from "../contract/types.js";
import { MAX_CLAIM_ACKS } from "../rules.js";
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

/** The ack codes a claim's answer may report, with the status each has on its own route. */
const STATUS_OF_ACK_ERROR: Record<string, number> = { LEASE_LOST: 409, LEASE_NOT_FOUND: 404, INVALID_ARGUMENT: 400 };

export class PendingAcks {
  readonly #engine: Engine;
  readonly #features: ServerFeatures;
  /** Acks waiting for a claim in this tick; sent on their own at the end of it otherwise. */
  #waiting: PendingAck[] = [];
  #flushQueued = false;

  constructor(engine: Engine, features: ServerFeatures) {
    this.#engine = engine;
    this.#features = features;
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
          this.ackEachInOwnRequest(this.#waiting.splice(0), false);
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
          status: STATUS_OF_ACK_ERROR[o.error.code],
          field: "lease_id",
        });
        if (ackDone(e, retried)) r.resolve();
        else r.reject(e);
      }
    });
  }

  /**
   * Sends each ack in its own request, each to its own answer (after a claim that carried them
   * failed: `mayHaveApplied` when that claim may have applied them, so that they are read as resends).
   */
  ackEachInOwnRequest(acks: PendingAck[], mayHaveApplied: boolean): void {
    for (const r of acks) this.ackInOwnRequest(r.id, {}, mayHaveApplied).then(r.resolve, r.reject);
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
