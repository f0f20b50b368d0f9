/**
 * Publishing. A publish carries an `Idempotency-Key` (the caller's, or by default one made per
 * call), so that it is safe to send again after a lost answer: the API answers the first answer
 * again and stores nothing twice. One without a key is not sent again once it may have applied.
 */
import type * as W from "../../contract/types.js";
import { publishInputToWire } from "../../contract/wire.js";
import type { PublishInput, PublishResult } from "../../core/types.js";
import { checkId, encodeEvent } from "../../core/validate.js";
import { describe } from "../../rules.js";
import { checkOptions, idempotencyKey, idSegment, library } from "../args.js";
import { type Engine, json } from "../engine.js";
import { invalidArgument } from "../http-errors.js";
import type { PublishCallOptions } from "../options.js";

export class Messages {
  readonly #engine: Engine;
  readonly #autoKeys: boolean;

  constructor(engine: Engine, autoKeys: boolean) {
    this.#engine = engine;
    this.#autoKeys = autoKeys;
  }

  /**
   * The publish's headers: its key (and whether it may be resent after a lost answer), and the trace
   * context the messages are published in (client.ts gives the publish's span's), which they carry.
   */
  #keyed(options: PublishCallOptions): { headers: Record<string, string>; retryUnknown: boolean } {
    const trace = options.traceparent;
    const headers: Record<string, string> = trace === undefined ? {} : { traceparent: trace };
    if (options.idempotencyKey === undefined && !this.#autoKeys) return { headers, retryUnknown: false };
    return { headers: { ...headers, "idempotency-key": idempotencyKey(options.idempotencyKey) }, retryUnknown: true };
  }

  async publish(groupId: string, event: unknown, priority?: number, options: PublishCallOptions = {}): Promise<number> {
    checkOptions(options);
    const path = `/v1/groups/${idSegment("group_id", groupId)}/messages`;
    // What JSON would change (NaN, a Date, a cycle) is refused here: the API could not tell.
    library(() => encodeEvent("event", event));
    const body: W.PublishRequest = { event };
    if (priority !== undefined) body.priority = priority;
    if (options.delay !== undefined) body.delay = options.delay;
    return this.#engine.send(
      {
        method: "POST",
        path,
        body,
        ...this.#keyed(options),
        write: true,
        ok: (a) => json<W.PublishAnswer>(a, path).seq,
      },
      options,
    );
  }

  /** A publish with a singleton key: what it did (deduplicated, replaced). */
  async publishSingleton(
    groupId: string,
    event: unknown,
    priority: number | undefined,
    options: PublishCallOptions & { singletonKey?: string; replace?: boolean },
  ): Promise<PublishResult> {
    checkOptions(options);
    const path = `/v1/groups/${idSegment("group_id", groupId)}/messages`;
    library(() => encodeEvent("event", event));
    const body: W.PublishRequest = { event };
    if (priority !== undefined) body.priority = priority;
    if (options.delay !== undefined) body.delay = options.delay;
    if (options.singletonKey !== undefined)
      body.singleton_key = library(() => checkId("singletonKey", options.singletonKey));
    if (options.replace !== undefined) body.replace = options.replace;
    return this.#engine.send(
      {
        method: "POST",
        path,
        body,
        ...this.#keyed(options),
        write: true,
        ok: (a) => {
          const w = json<W.PublishAnswer>(a, path);
          return { seq: w.seq, deduplicated: w.deduplicated === true, replaced: w.replaced === true };
        },
      },
      options,
    );
  }

  async publishMany(messages: PublishInput[], options: PublishCallOptions = {}): Promise<number[]> {
    checkOptions(options);
    if (!Array.isArray(messages)) throw invalidArgument("messages", `must be an array, got ${describe(messages)}`);
    const list = messages.map((m, i): W.BatchMessage => {
      if (typeof m !== "object" || m === null) {
        throw invalidArgument(`messages[${i}]`, `must be an object, got ${describe(m)}`);
      }
      library(() => encodeEvent(`messages[${i}].event`, m.event));
      return publishInputToWire(m, options.delay);
    });
    const path = "/v1/messages";
    return this.#engine.send(
      {
        method: "POST",
        path,
        body: { messages: list } satisfies W.PublishBatchRequest,
        ...this.#keyed(options),
        write: true,
        ok: (a) => json<W.PublishBatchAnswer>(a, path).seqs,
      },
      options,
    );
  }
}
