/**
 * consume()'s lanes and slots. A lane is a part of the queue that claims on its own: the queue, or
 * each shard of a queue that claims shard by shard (a ShardedQueue: `shards`, `shardOf`,
 * `claimManyOn`), so that a slow or empty shard holds back none of the others, and the acks of a
 * lane's leases ride with that lane's next claims (the same database, so the same batch).
 *
 * A lane claims all its free slots at once, in claims of at most MAX_CLAIM_BATCH sent in one tick
 * (a round). With claims still out it sends more only for at least half a claim's worth of free
 * slots: claims answered apart (the HTTP client's requests) each refill their own slots without
 * waiting for the slowest, while slots freed one by one still wait to ride together.
 */
import type { Lease } from "../core/types.js";
import { MAX_CLAIM_BATCH } from "../rules.js";
import type { ConsumerQueue } from "./options.js";

/** An ack, nack or release consume() owes the queue for one lease. */
export type Settle =
  | { kind: "ack"; lease: Lease<unknown> }
  | { kind: "nack"; lease: Lease<unknown>; delay: number }
  | { kind: "release"; lease: Lease<unknown> };

/** The fewest free slots a lane with claims out claims for. */
export const MIN_EXTRA_CLAIM = MAX_CLAIM_BATCH / 2;

export class Lane {
  readonly index: number;
  /** Claims out (sent, not answered), and the leases they asked for. */
  pending = 0;
  reserved = 0;
  /** Handlers running on this lane's leases, and the slots it holds to claim with (freed by them, or given). */
  jobs = 0;
  free = 0;
  /** Its last round came back short, no ack owed: wait for a handler of this lane to finish, or for the idle timer. */
  paused = false;
  /** Its last round found nothing, and did not fail (an idle consumer long-polls once every lane did). */
  empty = false;
  emptyClaims = 0;
  /** When its last round that found nothing was sent (undefined once one finds something): how long it has been drained. */
  emptySentAt: number | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** Draining, it found nothing and waits for the other lanes' claims still out (their answers decide whether the run is over). */
  awaitingOthers = false;
  /** Acks and nacks of this lane's leases, waiting to ride with its next claims. */
  settles: Settle[] = [];

  constructor(index: number) {
    this.index = index;
  }

  /** Stops the idle timer. */
  rest(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/** The lanes of `queue`: one per shard when it claims shard by shard, else one. */
export function lanesOf(queue: ConsumerQueue): Lane[] {
  const { shards } = queue;
  const byShard =
    typeof queue.claimManyOn === "function" &&
    typeof queue.shardOf === "function" &&
    typeof shards === "number" &&
    Number.isInteger(shards) &&
    shards > 1;
  return Array.from({ length: byShard ? shards : 1 }, (_, i) => new Lane(i));
}

/**
 * Shares out the free slots, and answers the lanes that claim now (with their `free` slots), first
 * from `turn` on. A lane keeps the slots its own handlers freed, so that their acks ride with its
 * next claims and a slow lane keeps its share while its claims are out; a paused lane
 * gives its free slots back. A lane with no claims out below its fair share (`concurrency` over the
 * lanes not paused) is served first, from the slots nobody holds and from the free slots of the
 * lanes above theirs; the rest goes to the lanes with no claims out (to every lane if none).
 */
export function allot(lanes: Lane[], concurrency: number, turn: number): Lane[] {
  const held = (l: Lane) => l.jobs + l.reserved + l.free;
  for (const l of lanes) if (l.paused) l.free = 0;
  const active = lanes
    .filter((l) => !l.paused)
    .sort((a, b) => mod(a.index - turn, lanes.length) - mod(b.index - turn, lanes.length));
  if (active.length === 0) return [];
  const fair = concurrency / active.length;
  const needy = active.filter((l) => l.pending === 0 && held(l) < fair);
  if (needy.length > 0) {
    for (const l of active) l.free -= Math.max(0, Math.min(l.free, held(l) - Math.floor(fair)));
  }
  let pool = concurrency - lanes.reduce((n, l) => n + held(l), 0);
  for (const l of needy) {
    const k = Math.max(0, Math.min(pool, Math.ceil(fair - held(l))));
    l.free += k;
    pool -= k;
  }
  const idle = active.filter((l) => l.pending === 0);
  const takers = idle.length > 0 ? idle : active;
  takers.forEach((l, k) => {
    l.free += Math.floor(pool / takers.length) + (k < pool % takers.length ? 1 : 0);
  });
  return active.filter((l) => (l.pending === 0 ? l.free > 0 : l.free >= MIN_EXTRA_CLAIM));
}

const mod = (a: number, m: number) => ((a % m) + m) % m;

/**
 * `n` leases as the fewest claims that can carry them (at most MAX_CLAIM_BATCH each), as even as
 * can be: the same claims per message as one claim of 100 at a time, every free slot asked for in
 * one round trip.
 */
export function claimSizes(n: number): number[] {
  const parts = Math.ceil(n / MAX_CLAIM_BATCH);
  return Array.from({ length: parts }, (_, i) => Math.floor(n / parts) + (i < n % parts ? 1 : 0));
}
