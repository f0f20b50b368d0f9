/** Where a database stands in a sharded queue (`tq_shard`, one row): read, and written on first use. */
import { NOW, type Plan, plan, rowsOf, stmt } from "./plan.js";

/** A database's place: the `shard`-th of `shards` databases of the queue `queue`. */
export interface ShardPlace {
  queue: string;
  shard: number;
  shards: number;
}

const placeOf = (row: Record<string, unknown> | undefined): ShardPlace | undefined =>
  row === undefined ? undefined : { queue: String(row.queue), shard: Number(row.shard), shards: Number(row.shards) };

const READ = "SELECT queue, shard, shards FROM tq_shard WHERE id = 1";

/** The place stored in the database, if any (a database of a queue of one has none). */
export function shardPlacePlan(): Plan<ShardPlace | undefined> {
  return plan([["place", stmt(READ)]], (r) => placeOf(rowsOf(r.place)[0] as Record<string, unknown> | undefined));
}

/** Stores `place` unless a place is stored already; answers the one stored (this one, or the earlier). */
export function placeShardPlan(place: ShardPlace): Plan<ShardPlace> {
  return plan(
    [
      [
        "placed",
        stmt(
          `INSERT INTO tq_shard (id, queue, shard, shards, placed_at) VALUES (1, :queue, :shard, :shards, ${NOW})
  ON CONFLICT (id) DO NOTHING`,
          { queue: place.queue, shard: place.shard, shards: place.shards },
        ),
      ],
      ["place", stmt(READ)],
    ],
    (r) => placeOf(rowsOf(r.place)[0] as Record<string, unknown> | undefined) ?? place,
  );
}
