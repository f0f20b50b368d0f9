/**
 * What a queue must hold, for the model-based test (test/trust/model.test.ts): every message by
 * group in publish order, each lease a caller received, the dead letters, the idempotency keys. The
 * real queue is checked against it after every step; a claim is checked as a choice the queue may
 * make (any group's first message with nothing in flight), not predicted.
 */

/** Nacks of the last of these deliveries dead-letter a message (the default max attempts). */
export const MAX_ATTEMPTS = 5;

export interface Msg {
  seq: number;
  group: string;
  /** The event's id (events are `{ id }`). */
  id: string;
  /** Deliveries so far, as the queue counts them (a release gives one back). */
  attempts: number;
  state: "queued" | "in_flight" | "parked";
  /** The lease a caller holds on it, when in flight. */
  lease?: string | undefined;
}

export interface Counts {
  ready: number;
  waiting: number;
  in_flight: number;
  parked: number;
  groups: number;
  dead_letters: number;
}

/** What a keyed publish sent, and what it was answered. */
export interface Keyed {
  key: string;
  /** The request as sent (the same body, sent again, is a retry). */
  body: { group: string; id: string }[];
  seqs: number[];
}

export class QueueModel {
  /** Each group's messages, oldest first. */
  readonly groups = new Map<string, Msg[]>();
  readonly dead = new Map<number, Msg>();
  /** Leases callers hold: id → message. */
  readonly leases = new Map<string, Msg>();
  /** Leases that meant something once and no longer do (acked, nacked, released, purged, the queue made again). */
  readonly stale: string[] = [];
  readonly keyed = new Map<string, Keyed>();
  /** Events published so far (unique ids), and fresh group names. */
  #events = 0;
  #fresh = 0;

  event(): string {
    return `e${this.#events++}`;
  }

  freshGroup(): string {
    return `f${this.#fresh++}`;
  }

  /** The queue deleted and made again: nothing of it is left, and every lease is stale. */
  reset(): void {
    this.stale.push(...this.leases.keys());
    this.groups.clear();
    this.dead.clear();
    this.leases.clear();
    this.keyed.clear();
  }

  published(group: string, id: string, seq: number): void {
    const list = this.groups.get(group) ?? [];
    list.push({ seq, group, id, attempts: 0, state: "queued" });
    this.groups.set(group, list);
  }

  /** Messages a claim may take now: each group's first, when nothing of the group is in flight or parked. */
  claimable(): Msg[] {
    return [...this.groups.values()].map((l) => l[0] as Msg).filter((m) => m.state === "queued");
  }

  /** Whether a claim may have given this lease; if so, it is held from now on. What is wrong otherwise. */
  claimed(l: {
    seq: number;
    group_id: string;
    lease_id: string;
    attempts: number;
    event: unknown;
  }): string | undefined {
    const head = this.groups.get(l.group_id)?.[0];
    if (head === undefined) return `claimed seq ${l.seq} of group ${l.group_id}, which holds nothing`;
    if (head.seq !== l.seq)
      return `claimed seq ${l.seq} of group ${l.group_id}, whose first message is seq ${head.seq} (FIFO)`;
    if (head.state !== "queued") return `claimed seq ${l.seq} of group ${l.group_id} while it is ${head.state}`;
    if ((l.event as { id?: unknown } | null)?.id !== head.id) return `seq ${l.seq} carries ${JSON.stringify(l.event)}`;
    if (l.attempts !== head.attempts + 1)
      return `seq ${l.seq} delivered as attempt ${l.attempts}, expected ${head.attempts + 1}`;
    head.attempts = l.attempts;
    head.state = "in_flight";
    head.lease = l.lease_id;
    this.leases.set(l.lease_id, head);
    return undefined;
  }

  #drop(m: Msg): void {
    const list = this.groups.get(m.group) ?? [];
    const rest = list.filter((x) => x !== m);
    if (rest.length > 0) this.groups.set(m.group, rest);
    else this.groups.delete(m.group);
  }

  #letGo(lease: string): Msg {
    const m = this.leases.get(lease) as Msg;
    this.leases.delete(lease);
    this.stale.push(lease);
    m.lease = undefined;
    return m;
  }

  acked(lease: string): void {
    this.#drop(this.#letGo(lease));
  }

  /** A nack: back in its group (parked with a delay), or to the dead letters after its last attempt. Whether it was dead-lettered. */
  nacked(lease: string, delay: number): boolean {
    const m = this.#letGo(lease);
    if (m.attempts >= MAX_ATTEMPTS) {
      this.#drop(m);
      m.state = "queued";
      this.dead.set(m.seq, m);
      return true;
    }
    m.state = delay > 0 ? "parked" : "queued";
    return false;
  }

  released(lease: string): void {
    const m = this.#letGo(lease);
    m.attempts = Math.max(0, m.attempts - 1);
    m.state = "queued";
  }

  redriven(seq: number, newSeq: number): void {
    const d = this.dead.get(seq) as Msg;
    this.dead.delete(seq);
    this.published(d.group, d.id, newSeq);
  }

  /** The group's messages deleted (its lease, if any, stale); how many. */
  purged(group: string): number {
    const list = this.groups.get(group) ?? [];
    for (const m of list) if (m.lease !== undefined) this.#letGo(m.lease);
    this.groups.delete(group);
    return list.length;
  }

  counts(): Counts {
    const all = [...this.groups.values()];
    const total = all.reduce((n, l) => n + l.length, 0);
    const inFlight = all.reduce((n, l) => n + l.filter((m) => m.state === "in_flight").length, 0);
    const parked = all.reduce((n, l) => n + l.filter((m) => m.state === "parked").length, 0);
    const ready = all.filter((l) => (l[0] as Msg).state === "queued").length;
    return {
      ready,
      waiting: total - inFlight - parked - ready,
      in_flight: inFlight,
      parked,
      groups: all.length,
      dead_letters: this.dead.size,
    };
  }
}
