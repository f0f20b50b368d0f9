/** The queue's state: its counts, its history, the groups worth watching, a group's next messages (and their purge). */
import type * as W from "../../contract/types.js";
import { groupFromWire, historyFromWire, queuedFromWire, statsFromWire } from "../../contract/wire.js";
import type { GroupInfo, QueuedMessage, QueueHistory, QueueStats } from "../../core/types.js";
import { checkOptions, idSegment, query } from "../args.js";
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

  async history(options: CallOptions): Promise<QueueHistory> {
    const path = "/v1/history";
    return this.#engine.read(path, options, (a) => historyFromWire(json<W.History>(a, path)));
  }

  async peek<E>(groupId: string, options: { limit?: number } & CallOptions): Promise<QueuedMessage<E>[]> {
    checkOptions(options);
    const path = `/v1/groups/${idSegment("groupId", groupId)}/messages${query({ limit: options.limit })}`;
    return this.#engine.read(path, options, (a) =>
      json<W.PeekAnswer>(a, path).messages.map((m) => queuedFromWire<E>(m)),
    );
  }

  /** Sent again when its answer is lost: a second purge deletes what the first left (and counts only that). */
  async purge(groupId: string, options: CallOptions): Promise<number> {
    const path = `/v1/groups/${idSegment("groupId", groupId)}/messages`;
    return this.#engine.send(
      { method: "DELETE", path, write: true, retryUnknown: true, ok: (a) => json<W.PurgeAnswer>(a, path).purged },
      options,
    );
  }
}
