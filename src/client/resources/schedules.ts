/** Schedules (`/v1/schedules`): publishes on a clock, fired by the queue's writer. */
import type * as W from "../../contract/types.js";
import { scheduleFromWire, scheduleInputToWire } from "../../contract/wire.js";
import type { Schedule, ScheduleInput } from "../../core/types.js";
import { scheduleNameProblem } from "../../rules.js";
import { checkOptions } from "../args.js";
import { type Engine, json } from "../engine.js";
import { invalidArgument } from "../http-errors.js";
import type { CallOptions } from "../options.js";

/** A schedule's name as a path segment (the API checks the rest, croner included: the client carries none). */
function nameSegment(name: unknown): string {
  const problem = scheduleNameProblem(name);
  if (problem !== undefined) throw invalidArgument("name", problem);
  return name as string;
}

export class Schedules {
  readonly #engine: Engine;

  constructor(engine: Engine) {
    this.#engine = engine;
  }

  /** Putting the same schedule again changes nothing but its next tick: safe to send again. */
  put(name: string, input: ScheduleInput, options: CallOptions): Promise<Schedule & { created: boolean }> {
    checkOptions(options);
    const path = `/v1/schedules/${nameSegment(name)}`;
    return this.#engine.send(
      {
        method: "PUT",
        path,
        body: scheduleInputToWire(input),
        write: true,
        retryUnknown: true,
        ok: (a) => {
          const w = json<W.ScheduleAnswer>(a, path);
          return { ...scheduleFromWire(w), created: w.created };
        },
      },
      options,
    );
  }

  list(options: CallOptions): Promise<Schedule[]> {
    const path = "/v1/schedules";
    return this.#engine.read(path, options, (a) => json<W.ScheduleList>(a, path).schedules.map(scheduleFromWire));
  }

  delete(name: string, options: CallOptions): Promise<boolean> {
    return this.#engine.remove(`/v1/schedules/${nameSegment(name)}`, options, ["NOT_FOUND"]);
  }
}
