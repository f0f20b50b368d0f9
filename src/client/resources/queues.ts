/** Named queues: list them with their counts, make one, read one, delete one (the API's `/v1/queues`). */
import type * as W from "../../contract/types.js";
import { queueFromWire, statsFromWire } from "../../contract/wire.js";
import type { QueueDescription, QueueStats } from "../../core/types.js";
import { queueNameProblem } from "../../rules.js";
import { checkOptions } from "../args.js";
import { type Engine, json } from "../engine.js";
import { invalidArgument } from "../http-errors.js";
import type { CallOptions } from "../options.js";

export type QueueWithStats = QueueDescription & { stats: QueueStats };
/** A queue in the list: its counts, or null and why, when its databases could not be reached. */
export type ListedQueue = QueueDescription & { stats: QueueStats | null; error?: { code: string; message: string } };

/** A queue's name as a path segment, refused before sending when no queue could have it. */
export function queueSegment(name: unknown): string {
  const problem = queueNameProblem(name);
  if (problem !== undefined) throw invalidArgument("queue", problem);
  return name as string;
}

const withStats = (w: W.QueueWithStats): QueueWithStats => ({ ...queueFromWire(w), stats: statsFromWire(w.stats) });
const listed = (w: W.QueueListItem): ListedQueue => ({
  ...queueFromWire(w),
  stats: w.stats === null ? null : statsFromWire(w.stats),
  ...(w.error === undefined ? {} : { error: w.error }),
});

export class Queues {
  readonly #engine: Engine;

  constructor(engine: Engine) {
    this.#engine = engine;
  }

  async list(options: CallOptions): Promise<ListedQueue[]> {
    const path = "/v1/queues";
    return this.#engine.read(path, options, (a) => json<W.QueueList>(a, path).queues.map(listed));
  }

  async get(name: string, options: CallOptions): Promise<QueueWithStats> {
    const path = `/v1/queues/${queueSegment(name)}`;
    return this.#engine.read(path, options, (a) => withStats(json<W.QueueWithStats>(a, path)));
  }

  /** Idempotent: answers the queue as it is when it exists (`created: false`). */
  async create(
    name: string,
    options: { shards?: number; locationHint?: string } & CallOptions,
  ): Promise<QueueDescription & { created: boolean }> {
    checkOptions(options);
    const path = `/v1/queues/${queueSegment(name)}`;
    const body: W.QueueRequest = {};
    if (options.shards !== undefined) body.shards = options.shards;
    if (options.locationHint !== undefined) body.location_hint = options.locationHint;
    return this.#engine.send(
      {
        method: "PUT",
        path,
        body,
        write: true,
        retryUnknown: true,
        ok: (a) => {
          const q = json<W.QueueAnswer>(a, path);
          return { ...queueFromWire(q), created: q.created };
        },
      },
      options,
    );
  }

  /** False when there was no such queue; QUEUE_NOT_EMPTY while it holds messages, unless `force`. */
  async delete(name: string, options: { force?: boolean } & CallOptions): Promise<boolean> {
    checkOptions(options);
    const path = `/v1/queues/${queueSegment(name)}${options.force === true ? "?force=true" : ""}`;
    return this.#engine.remove(path, options, ["QUEUE_NOT_FOUND"]);
  }
}
