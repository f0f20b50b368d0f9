/**
 * The catalog of named queues (`tq_queues`, in the default queue's database): what each queue is,
 * never where it lives (its databases come from the configuration when it is resolved).
 */
import { NOW, type Plan, plan, rowsOf, stmt } from "./plan.js";

/** A queue as the catalog holds it. */
export interface QueueRow {
  name: string;
  shards: number;
  locationHint: string | undefined;
  createdAt: number;
}

const COLUMNS = "name, shards, location_hint, created_at";

function toRow(row: Record<string, unknown>): QueueRow {
  return {
    name: String(row.name),
    shards: Number(row.shards),
    locationHint: row.location_hint === null ? undefined : String(row.location_hint),
    createdAt: Number(row.created_at),
  };
}

/** Adds a queue unless one of that name is there; answers the row as it is after, and whether this added it. */
export function addQueuePlan(q: Omit<QueueRow, "createdAt">): Plan<{ row: QueueRow; added: boolean }> {
  return plan(
    [
      [
        "added",
        stmt(
          `INSERT INTO tq_queues (${COLUMNS}) VALUES (:name, :shards, :hint, ${NOW}) ON CONFLICT (name) DO NOTHING`,
          { name: q.name, shards: q.shards, hint: q.locationHint ?? null },
        ),
      ],
      ["row", stmt(`SELECT ${COLUMNS} FROM tq_queues WHERE name = :name`, { name: q.name })],
    ],
    (r) => ({ row: toRow(rowsOf(r.row)[0] as Record<string, unknown>), added: r.added.rowsAffected > 0 }),
  );
}

export function setLocationHintPlan(name: string, hint: string | undefined): Plan<void> {
  return plan(
    [["set", stmt("UPDATE tq_queues SET location_hint = :hint WHERE name = :name", { name, hint: hint ?? null })]],
    () => undefined,
  );
}

export function getQueuePlan(name: string): Plan<QueueRow | undefined> {
  return plan([["row", stmt(`SELECT ${COLUMNS} FROM tq_queues WHERE name = :name`, { name })]], (r) => {
    const row = rowsOf(r.row)[0];
    return row === undefined ? undefined : toRow(row as Record<string, unknown>);
  });
}

export function listQueuesPlan(limit: number): Plan<QueueRow[]> {
  return plan([["rows", stmt(`SELECT ${COLUMNS} FROM tq_queues ORDER BY name LIMIT :limit`, { limit })]], (r) =>
    rowsOf(r.rows).map((row) => toRow(row as Record<string, unknown>)),
  );
}

export function removeQueuePlan(name: string): Plan<boolean> {
  return plan(
    [["removed", stmt("DELETE FROM tq_queues WHERE name = :name RETURNING name", { name })]],
    (r) => rowsOf(r.removed).length > 0,
  );
}
