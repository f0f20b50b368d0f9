/** Reads of the queue's state: its counts, and the groups worth watching. */
import type * as W from "../../contract/types.js";
import { groupFromWire, statsFromWire } from "../../contract/wire.js";
import type { GroupInfo, QueueStats } from "../../core/types.js";
import { checkOptions, query } from "../args.js";
import { type Engine, json } from "../engine.js";
import type { CallOptions } from "../options.js";

export class Inspect {
  readonly #engine: Engine;

  constructor(engine: Engine) {
    this.#engine = engine;
  }

  async stats(options: CallOptions): Promise<QueueStats> {
    const path = "/v1/stats";
    return this.#engine.read(path, options, (a) => statsFromWire(json<W.Stats>(a, path)));
  }

  async groups(options: { limit?: number } & CallOptions): Promise<GroupInfo[]> {
    checkOptions(options);
    const path = `/v1/groups${query({ limit: options.limit })}`;
    return this.#engine.read(path, options, (a) => json<W.GroupList>(a, path).groups.map(groupFromWire));
  }
}
