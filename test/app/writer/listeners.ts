/** Counts the listeners hung on a transport's internals (onChange, onExtend, onSubscriptionsChange) and not yet removed. */
import { vi } from "vitest";
import { type Internals, internalsOf } from "../../../src/core/internals.js";
import type { LibsqlTransport } from "../../../src/core/transport.js";

type Hook = "onChange" | "onExtend" | "onSubscriptionsChange";

/** Spies on the transport's hooks from now on; answers how many listeners are attached. */
export function countListeners(t: LibsqlTransport): () => number {
  const hooks = internalsOf(t);
  let live = 0;
  for (const name of ["onChange", "onExtend", "onSubscriptionsChange"] as const satisfies Hook[]) {
    const on = hooks[name].bind(hooks) as (listener: never) => () => void;
    const counted = (listener: never) => {
      const off = on(listener);
      live++;
      let attached = true;
      return () => {
        if (attached) live--;
        attached = false;
        off();
      };
    };
    vi.spyOn(hooks as Internals, name).mockImplementation(counted as Internals[typeof name]);
  }
  return () => live;
}
