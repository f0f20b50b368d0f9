/**
 * The spec's Python transports, played with their own SQL, statement for statement, over a raw
 * client: what shares a database with ours (test/core/interop.test.ts, test/core/sharded.test.ts).
 */
import type { Client } from "@libsql/client";

export const SPEC_SCHEMA = [
  `CREATE TABLE IF NOT EXISTS messages (
  seq          INTEGER PRIMARY KEY AUTOINCREMENT,
  group_id     TEXT NOT NULL,
  event        TEXT NOT NULL,
  locked_by    TEXT,
  lock_expiry  REAL
)`,
  `CREATE TABLE IF NOT EXISTS groups (
  group_id        TEXT PRIMARY KEY,
  last_claimed_at REAL NOT NULL DEFAULT 0.0,
  priority        INT  NOT NULL DEFAULT 0
)`,
];

/** The Python transport's publish: two autocommit statements. */
export async function pyPublish(c: Client, group: string, event: unknown, priority = 0) {
  await c.execute({
    sql: "INSERT INTO messages (group_id, event) VALUES (?, ?)",
    args: [group, JSON.stringify(event)],
  });
  await c.execute({ sql: "INSERT OR IGNORE INTO groups (group_id, priority) VALUES (?, ?)", args: [group, priority] });
}

/** The Python transport's claim: BEGIN IMMEDIATE, the spec's select, two updates, COMMIT. */
export async function pyClaim(c: Client, worker: string, visibility: number, minPriority = 0) {
  const now = Date.now() / 1000;
  const tx = await c.transaction("write");
  try {
    const rs = await tx.execute({
      sql: `SELECT m.seq, m.group_id, m.event
  FROM messages m JOIN groups g ON g.group_id = m.group_id
  WHERE (m.locked_by IS NULL OR m.lock_expiry < ?)
    AND m.group_id NOT IN (
      SELECT group_id FROM messages WHERE locked_by IS NOT NULL AND lock_expiry >= ?)
    AND g.priority >= ?
  ORDER BY g.last_claimed_at ASC, m.seq ASC LIMIT 1`,
      args: [now, now, minPriority],
    });
    const row = rs.rows[0];
    if (row) {
      await tx.execute({
        sql: "UPDATE groups SET last_claimed_at = ? WHERE group_id = ?",
        args: [now, String(row.group_id)],
      });
      await tx.execute({
        sql: "UPDATE messages SET locked_by = ?, lock_expiry = ? WHERE seq = ?",
        args: [worker, now + visibility, Number(row.seq)],
      });
    }
    await tx.commit();
    return row ? { seq: Number(row.seq), groupId: String(row.group_id), event: JSON.parse(String(row.event)) } : null;
  } finally {
    tx.close();
  }
}

export async function pyAck(c: Client, seq: number, group: string) {
  await c.execute({ sql: "DELETE FROM messages WHERE seq = ?", args: [seq] });
  await c.execute({
    sql: "DELETE FROM groups WHERE group_id = ? AND NOT EXISTS (SELECT 1 FROM messages WHERE group_id = ?)",
    args: [group, group],
  });
}
