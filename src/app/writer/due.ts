/** When the QueueWriter's dispatcher and pusher should next claim with nothing written through them. */
import type { LibsqlTransport } from "../../core/transport.js";

/** After a known due moment, wait this much more (the database's clock may run behind ours). */
const DUE_SLACK_MS = 20;

/**
 * Milliseconds until the next lease expiry, park end or delayed message the database knows of, or
 * `recheckMs` (the safety re-check for writers that bypass the Worker), whichever comes first.
 */
export async function msUntilDue(queue: LibsqlTransport, recheckMs: number): Promise<number> {
  try {
    const { next, now } = await queue.nextDueAt();
    // A due moment already past that the claims did not take (held by a priority floor) says nothing new.
    if (next !== null && next > now) return Math.min(recheckMs, Math.ceil((next - now) * 1000) + DUE_SLACK_MS);
  } catch {
    // The re-check will tell.
  }
  return recheckMs;
}
