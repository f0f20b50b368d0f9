/**
 * The busiest groups, for `GET /v1/groups` and the dashboard. The library has no call for it yet, so
 * this is one read-only statement through the transport's client (candidate for src/core/sql.ts).
 *
 * Cost: one pass over the `tq_messages_group_seq` index (every message's group id, as `stats()`'s
 * count does), then, for the `limit` groups listed only, two probes of the lock index each.
 */
import type { Group } from "../contract/types.js";
import { toQueueError } from "../core/errors.js";
import type { LibsqlTransport } from "../core/transport.js";

export const BUSIEST_GROUPS = `SELECT d.group_id, d.messages, coalesce(g.priority, 0) AS priority,
  g.last_claimed_at,
  EXISTS (SELECT 1 FROM messages m WHERE m.group_id = d.group_id AND m.locked_by IS NOT NULL
            AND m.locked_by <> '__parked__' AND m.lock_expiry >= unixepoch('subsec')) AS in_flight,
  EXISTS (SELECT 1 FROM messages m WHERE m.group_id = d.group_id AND m.locked_by = '__parked__'
            AND m.lock_expiry >= unixepoch('subsec')) AS parked
FROM (SELECT group_id, count(*) AS messages FROM messages INDEXED BY tq_messages_group_seq
       GROUP BY group_id ORDER BY messages DESC, group_id LIMIT ?) AS d
LEFT JOIN groups g ON g.group_id = d.group_id
ORDER BY d.messages DESC, d.group_id`;

export async function busiestGroups(queue: LibsqlTransport, limit: number): Promise<Group[]> {
  let rows: Record<string, unknown>[];
  try {
    // A positional argument: the library's local-file client takes no named ones.
    rows = (await queue.client.execute({ sql: BUSIEST_GROUPS, args: [limit] })).rows;
  } catch (e) {
    throw toQueueError(e);
  }
  return rows.map((r) => {
    const claimed = r.last_claimed_at === null ? 0 : Number(r.last_claimed_at);
    return {
      group_id: String(r.group_id),
      messages: Number(r.messages),
      priority: Number(r.priority),
      in_flight: Number(r.in_flight) === 1,
      parked: Number(r.parked) === 1,
      // The spec's tables store 0.0 for a group never claimed.
      last_claimed_at: claimed > 0 ? claimed : null,
    };
  });
}
