/**
 * The publisher slots of this process (see src/core/sql/publish.ts): over the network a request's
 * answer can be lost after it applied, so each publish under way holds a slot whose record proves,
 * when the publish is sent again, whether its first request applied. A slot is reused once its
 * publish settled; one whose publish ended with its outcome unknown rests for ten minutes first, in
 * case the abandoned request still lands. One allocator per process: slots are named by it.
 */
import { randomToken } from "./random.js";

const REST_MS = 600_000;
/** The first publish of a process, and every 1024th after, also collects the slots of processes gone for a day. */
const COLLECT_EVERY = 1024;

let process: string | undefined;
const free: number[] = [];
const resting: Array<{ n: number; until: number }> = [];
let next = 0;
let publishes = 0;

export interface Slot {
  /** `<process>:<n>`: the key of its record in `tq_publishers`. */
  name: string;
  /** This publish should also collect the slots of gone processes. */
  collect: boolean;
}

export function takeSlot(): Slot {
  const now = Date.now();
  while (resting.length > 0 && (resting[0] as { until: number }).until <= now) {
    free.push((resting.shift() as { n: number }).n);
  }
  process ??= randomToken().slice(0, 16);
  return { name: `${process}:${free.pop() ?? next++}`, collect: publishes++ % COLLECT_EVERY === 0 };
}

/** Gives the slot back: at once when its publish settled, after a rest when its outcome is unknown. */
export function giveSlot(slot: Slot, settled: boolean): void {
  const n = Number(slot.name.slice(slot.name.indexOf(":") + 1));
  if (settled) free.push(n);
  else resting.push({ n, until: Date.now() + REST_MS });
}
