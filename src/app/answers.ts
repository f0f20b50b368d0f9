/**
 * The library's results in the API's shape (src/contract/types.ts), and the few reads the routes
 * compose. Plain functions: no Hono, no HTTP.
 */
import type {
  DeadLetter as DeadLetterAnswer,
  DeadLetterPage,
  ExtendAnswer,
  Group,
  Lease as LeaseAnswer,
  Stats,
} from "../contract/types.js";
import type { DeadLetter, GroupInfo, Lease, LibsqlTransport, QueueStats } from "../core/transport.js";

export function leaseAnswer(l: Lease): LeaseAnswer {
  return {
    lease_id: l.id,
    seq: l.seq,
    group_id: l.groupId,
    event: l.event,
    expires_at: l.expiresAt,
    attempts: l.attempts,
  };
}

export const extendAnswer = (l: Pick<Lease, "id" | "expiresAt">): ExtendAnswer => ({
  lease_id: l.id,
  expires_at: l.expiresAt,
});

export function statsAnswer(s: QueueStats): Stats {
  return {
    ready: s.ready,
    waiting: s.waiting,
    in_flight: s.inFlight,
    parked: s.parked,
    delayed: s.delayed,
    groups: s.groups,
    dead_letters: s.deadLetters,
    now: s.now,
  };
}

export const groupAnswer = (g: GroupInfo): Group => ({
  group_id: g.groupId,
  messages: g.messages,
  priority: g.priority,
  in_flight: g.inFlight,
  parked: g.parked,
  // The spec's tables store 0.0 for a group never claimed.
  last_claimed_at: g.lastClaimedAt > 0 ? g.lastClaimedAt : null,
});

function deadLetterAnswer(d: DeadLetter): DeadLetterAnswer {
  return {
    seq: d.seq,
    group_id: d.groupId,
    event: d.event,
    priority: d.priority,
    attempts: d.attempts,
    reason: d.reason,
    dead_at: d.deadAt,
  };
}

/** The library's largest dead-letter page. */
const LIBRARY_PAGE = 1000;

/**
 * One page of dead letters, with `next_after_seq` only when another page follows: the library is
 * asked for one more than the page holds (or, for a page of the library's maximum, probed once more).
 */
export async function deadLetterPage(
  queue: LibsqlTransport,
  q: { groupId: string | undefined; afterSeq: number; limit: number },
): Promise<DeadLetterPage> {
  const list = await queue.deadLetters({ ...q, limit: Math.min(q.limit + 1, LIBRARY_PAGE) });
  let more = list.length > q.limit;
  const page = list.slice(0, q.limit);
  const last = page[page.length - 1];
  if (!more && last !== undefined && page.length === q.limit) {
    more = (await queue.deadLetters({ groupId: q.groupId, afterSeq: last.seq, limit: 1 })).length > 0;
  }
  return { dead_letters: page.map(deadLetterAnswer), next_after_seq: more && last ? last.seq : null };
}
