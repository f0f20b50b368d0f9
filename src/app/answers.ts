/** The reads the routes compose from the library's. Plain functions: no Hono, no HTTP. */
import type { DeadLetterPage } from "../contract/types.js";
import { deadLetterToWire } from "../contract/wire.js";
import { DEAD_LETTER_PAGE } from "../rules.js";
import type { ServedQueue } from "./context.js";

/**
 * One page of dead letters, with `next_after_seq` only when another page follows: the library is
 * asked for one more than the page holds (or, for a page of the library's maximum, probed once more).
 */
export async function deadLetterPage(
  queue: ServedQueue,
  q: { groupId: string | undefined; afterSeq: number; limit: number },
): Promise<DeadLetterPage> {
  const list = await queue.deadLetters({ ...q, limit: Math.min(q.limit + 1, DEAD_LETTER_PAGE.max) });
  let more = list.length > q.limit;
  const page = list.slice(0, q.limit);
  const last = page[page.length - 1];
  if (!more && last !== undefined && page.length === q.limit) {
    more = (await queue.deadLetters({ groupId: q.groupId, afterSeq: last.seq, limit: 1 })).length > 0;
  }
  return { dead_letters: page.map(deadLetterToWire), next_after_seq: more && last ? last.seq : null };
}
