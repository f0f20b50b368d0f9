/** Dead letters: a page of them, a redrive back into their group, a delete for good. */
import type * as W from "../../contract/types.js";
import { deadLetterFromWire } from "../../contract/wire.js";
import type { DeadLetter } from "../../core/types.js";
import { checkOptions, query, seqSegment } from "../args.js";
import { type Engine, json } from "../engine.js";
import type { CallOptions, DeadLetterOptions } from "../options.js";

/** What a 404 of a dead letter says: DEAD_LETTER_NOT_FOUND, or NOT_FOUND from an API that predates it. */
const MISSING = ["DEAD_LETTER_NOT_FOUND", "NOT_FOUND"] as const;

export class DeadLetters {
  readonly #engine: Engine;

  constructor(engine: Engine) {
    this.#engine = engine;
  }

  async list<E>(options: DeadLetterOptions): Promise<DeadLetter<E>[]> {
    checkOptions(options);
    const q = { group_id: options.groupId, after_seq: options.afterSeq, limit: options.limit };
    const path = `/v1/dead-letters${query(q)}`;
    return this.#engine.read(path, options, (a) =>
      json<W.DeadLetterPage>(a, path).dead_letters.map((d) => deadLetterFromWire<E>(d)),
    );
  }

  /**
   * Not sent again once an attempt may have applied: a second redrive would find nothing and could
   * not tell the new seq. A missing dead letter fails with DEAD_LETTER_NOT_FOUND (404, `seq`).
   */
  async redrive(seq: number, options: CallOptions): Promise<number> {
    const path = `/v1/dead-letters/${seqSegment(seq)}/redrive`;
    return this.#engine.send(
      { method: "POST", path, write: true, retryUnknown: false, ok: (a) => json<W.RedriveAnswer>(a, path).seq },
      options,
    );
  }

  /** False when there was none (true when an earlier attempt whose answer was lost may have deleted it). */
  async delete(seq: number, options: CallOptions): Promise<boolean> {
    return this.#engine.remove(`/v1/dead-letters/${seqSegment(seq)}`, options, MISSING);
  }
}
