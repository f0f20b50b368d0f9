/** Flow control: the queue's settings (`/v1/settings`) and a group's own (`/v1/groups/{group_id}`). */
import type * as W from "../../contract/types.js";
import {
  groupFlowFromWire,
  groupFlowInputToWire,
  queueFlowInputToWire,
  queueSettingsFromWire,
} from "../../contract/wire.js";
import type { GroupFlow, GroupFlowInput, QueueFlow, QueueFlowInput } from "../../core/types.js";
import { checkGroupFlow, checkQueueFlow } from "../../core/validate.js";
import { checkOptions, idSegment, library } from "../args.js";
import { type Engine, json } from "../engine.js";
import type { CallOptions } from "../options.js";

export class Flow {
  readonly #engine: Engine;

  constructor(engine: Engine) {
    this.#engine = engine;
  }

  queueSettings(options: CallOptions): Promise<QueueFlow> {
    const path = "/v1/settings";
    return this.#engine.read(path, options, (a) => queueSettingsFromWire(json<W.QueueSettings>(a, path)));
  }

  /** Setting what is given again changes nothing: safe to send again. */
  setQueue(settings: QueueFlowInput, options: CallOptions): Promise<QueueFlow> {
    checkOptions(options);
    const checked = library(() => checkQueueFlow("settings", settings));
    const path = "/v1/settings";
    return this.#engine.send(
      {
        method: "PUT",
        path,
        body: queueFlowInputToWire(checked),
        write: true,
        retryUnknown: true,
        ok: (a) => queueSettingsFromWire(json<W.QueueSettings>(a, path)),
      },
      options,
    );
  }

  groupSettings(groupId: string, options: CallOptions): Promise<GroupFlow> {
    const path = `/v1/groups/${idSegment("groupId", groupId)}`;
    return this.#engine.read(path, options, (a) => groupFlowFromWire(json<W.GroupSettingsAnswer>(a, path)));
  }

  setGroup(groupId: string, settings: GroupFlowInput, options: CallOptions): Promise<GroupFlow> {
    checkOptions(options);
    const checked = library(() => checkGroupFlow("settings", settings));
    const path = `/v1/groups/${idSegment("groupId", groupId)}`;
    return this.#engine.send(
      {
        method: "PUT",
        path,
        body: groupFlowInputToWire(checked),
        write: true,
        retryUnknown: true,
        ok: (a) => groupFlowFromWire(json<W.GroupSettingsAnswer>(a, path)),
      },
      options,
    );
  }

  resetGroup(groupId: string, options: CallOptions): Promise<GroupFlow> {
    checkOptions(options);
    const path = `/v1/groups/${idSegment("groupId", groupId)}`;
    return this.#engine.send(
      {
        method: "DELETE",
        path,
        write: true,
        retryUnknown: true,
        ok: (a) => groupFlowFromWire(json<W.GroupSettingsAnswer>(a, path)),
      },
      options,
    );
  }
}
