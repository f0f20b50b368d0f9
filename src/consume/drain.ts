/**
 * drain(): consume() for one run that must end when its work is done and within its budget — a
 * Cron Trigger's `scheduled()`, or a request's `ctx.waitUntil()`.
 */
import { invalid } from "../core/errors.js";
import { consume } from "./consume.js";
import type { ConsumeOptions, ConsumerQueue, ConsumeSummary, Handler } from "./options.js";

/** consume()'s options for a drain: `budgetMs` or `deadline` is required, and `until` is `"drained"`. */
export type DrainOptions = Omit<ConsumeOptions, "until"> &
  ({ budgetMs: number; deadline?: undefined } | { deadline: number | Date; budgetMs?: undefined });

/**
 * Handles what the queue has for this consumer now, then resolves: once the queue has had nothing
 * for it for `idleGraceMs` (default 200 ms), or at its deadline at the latest, having given back
 * every lease it holds. The summary says what became of each (docs/library.md, "Consuming at the edge").
 */
export function drain<E = unknown>(
  queue: ConsumerQueue,
  handler: Handler<E>,
  options: DrainOptions,
): Promise<ConsumeSummary> {
  if (
    typeof options === "object" &&
    options !== null &&
    options.budgetMs === undefined &&
    options.deadline === undefined
  ) {
    return Promise.reject(
      invalid("options.budgetMs", "is required (or options.deadline): a drain ends within its budget"),
    );
  }
  return consume(queue, handler, { ...options, until: "drained" });
}
