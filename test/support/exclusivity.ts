/**
 * A log of lease intervals, as the claimers saw them, and the checks a sceptical user would run on it.
 * A lease is held from before its claim answered to after its ack was sent, so if two leases of one
 * group were ever live at once, their [claimAnswered, ackSent] intervals overlap.
 */
import { expect } from "vitest";

export interface Held {
  groupId: string;
  seq: number;
  event: unknown;
  claimedAt: number;
  ackSentAt: number;
}

export function checkDeliveryLog(log: Held[], published: Map<number, { groupId: string }>): void {
  // Every published message acked exactly once, and nothing that was not published.
  const seen = new Map<number, number>();
  for (const h of log) seen.set(h.seq, (seen.get(h.seq) ?? 0) + 1);
  const twice = [...seen].filter(([, n]) => n > 1).map(([s]) => s);
  expect(twice, "messages delivered and acked twice").toEqual([]);
  const missing = [...published.keys()].filter((s) => !seen.has(s));
  expect(missing, "messages never delivered").toEqual([]);
  expect(seen.size).toBe(published.size);

  const byGroup = new Map<string, Held[]>();
  for (const h of log) {
    const list = byGroup.get(h.groupId) ?? [];
    list.push(h);
    byGroup.set(h.groupId, list);
  }
  for (const [g, list] of byGroup) {
    list.sort((a, b) => a.claimedAt - b.claimedAt);
    for (let i = 1; i < list.length; i++) {
      const prev = list[i - 1] as Held;
      const cur = list[i] as Held;
      // Exclusivity: the next lease in a group began only after the previous one's ack was sent.
      expect(cur.claimedAt, `group ${g}: seq ${cur.seq} leased while seq ${prev.seq} was live`).toBeGreaterThan(
        prev.ackSentAt,
      );
      // FIFO: in claim order, seqs ascend.
      expect(cur.seq, `group ${g}: FIFO`).toBeGreaterThan(prev.seq);
    }
  }
}

/**
 * One claimer: claims and acks until it has seen the queue empty a few times in a row, logging each
 * lease it held. Returns how many it acked.
 */
export async function claimUntilEmpty(
  t: {
    claim(id: string, visibility: number): Promise<{ groupId: string; seq: number; event: unknown } | null>;
    ack(l: never): Promise<void>;
  },
  id: string,
  log: Held[],
): Promise<number> {
  let acked = 0;
  for (let empty = 0; empty < 5; ) {
    const lease = await t.claim(id, 30);
    if (!lease) {
      empty++;
      await new Promise((r) => setTimeout(r, 20));
      continue;
    }
    empty = 0;
    const claimedAt = performance.now();
    const ackSentAt = performance.now();
    await t.ack(lease as never);
    log.push({ groupId: lease.groupId, seq: lease.seq, event: lease.event, claimedAt, ackSentAt });
    acked++;
  }
  return acked;
}
