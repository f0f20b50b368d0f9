/**
 * Settling many leases in one call (ack, nack, release), for LibsqlTransport and ShardedQueue alike:
 * the list checked once, before anything is sent, and each lease's call turned into its outcome.
 */
import { leaseIdProblem, MAX_SETTLE_BATCH, SETTLE_DELAY_PROBLEM, settleActionProblem } from "../rules.js";
import { invalid, toQueueError } from "./errors.js";
import type { NackResult, Settlement, SettleOutcome } from "./types.js";
import { checkCount, checkDelay, checkObject } from "./validate.js";

/** A settlement as checked: its lease as an id, and a nack's delay (0 when none was given). */
export interface CheckedSettlement {
  id: string;
  action: Settlement["action"];
  delay: number;
}

/** The list, each entry checked under its own index; INVALID_ARGUMENT naming the first at fault. */
export function checkSettlements(settlements: unknown): CheckedSettlement[] {
  if (!Array.isArray(settlements)) throw invalid("settlements", "must be an array");
  checkCount("settlements.length", settlements.length, MAX_SETTLE_BATCH);
  return settlements.map((s: Partial<Settlement> & { delay?: unknown }, i) => {
    const at = `settlements[${i}]`;
    checkObject(at, s);
    const actionProblem = settleActionProblem(s.action);
    if (actionProblem !== undefined) throw invalid(`${at}.action`, actionProblem);
    const lease = s.lease;
    const id = typeof lease === "object" && lease !== null ? (lease as { id?: unknown }).id : lease;
    const idProblem = leaseIdProblem(id);
    if (idProblem !== undefined) throw invalid(`${at}.lease`, idProblem);
    if (s.delay !== undefined && s.action !== "nack") throw invalid(`${at}.delay`, SETTLE_DELAY_PROBLEM);
    const delay = s.delay === undefined ? 0 : checkDelay(`${at}.delay`, s.delay);
    return { id: id as string, action: s.action as Settlement["action"], delay };
  });
}

/** The outcome of one settlement's call: applied, or the error it failed with. */
export function outcomeOf(s: CheckedSettlement, call: Promise<unknown>): Promise<SettleOutcome> {
  return call.then(
    (r) =>
      s.action === "nack"
        ? { leaseId: s.id, action: s.action, deadLettered: (r as NackResult).deadLettered }
        : { leaseId: s.id, action: s.action },
    (e) => ({ leaseId: s.id, action: s.action, error: toQueueError(e) }),
  );
}

/** Something that settles leases as its own ids name them (a shard). */
interface Settles {
  settle(settlements: Settlement[]): Promise<SettleOutcome[]>;
}

/**
 * Settles checked leases over several parts (a sharded queue's shards), one call per part, all at
 * once. `route` names each lease's part and its id there (or throws, which becomes its outcome); a
 * part whose call fails gives each of its leases that error. Outcomes keep the caller's ids.
 */
export async function settleAcross(
  list: CheckedSettlement[],
  route: (id: string) => { part: Settles; id: string },
): Promise<SettleOutcome[]> {
  const outcomes: SettleOutcome[] = new Array(list.length);
  const parts = new Map<Settles, { index: number; settlement: Settlement }[]>();
  list.forEach((s, index) => {
    try {
      const { part, id } = route(s.id);
      const settlement: Settlement =
        s.action === "nack" ? { action: "nack", lease: id, delay: s.delay } : { action: s.action, lease: id };
      parts.set(part, [...(parts.get(part) ?? []), { index, settlement }]);
    } catch (e) {
      outcomes[index] = { leaseId: s.id, action: s.action, error: toQueueError(e) };
    }
  });
  await Promise.all(
    [...parts].map(async ([part, items]) => {
      let got: SettleOutcome[] | undefined;
      let failure: unknown;
      try {
        got = await part.settle(items.map((i) => i.settlement));
      } catch (e) {
        failure = e;
      }
      items.forEach(({ index }, k) => {
        const s = list[index] as CheckedSettlement;
        const o = got?.[k];
        outcomes[index] =
          o === undefined
            ? {
                leaseId: s.id,
                action: s.action,
                error: toQueueError(failure ?? new Error("no outcome for this lease")),
              }
            : { ...o, leaseId: s.id };
      });
    }),
  );
  return outcomes;
}
