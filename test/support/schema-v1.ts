/** The schema of version 1 (turso-queue 0.1.0), verbatim: the starting point of the migration test. */
const SCHEMA_VERSION = 1;

export const SCHEMA_V1: string[] = [
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
  // A group's head (its oldest deliverable message) is one probe.
  "CREATE INDEX IF NOT EXISTS tq_messages_group_seq ON messages (group_id, seq)",
  // "Does this group have anything in flight?" is one probe, whatever the depth of the group.
  "CREATE INDEX IF NOT EXISTS tq_messages_group_lock ON messages (group_id, lock_expiry) WHERE locked_by IS NOT NULL",
  // Round-robin order: (last_claimed_at, rowid). A group's rowid grows with its creation, and so with
  // its first message's seq: among never-claimed groups it is the spec's `m.seq` tie-break.
  "CREATE INDEX IF NOT EXISTS tq_groups_round_robin ON groups (last_claimed_at)",
  // One row per message we have leased at least once: the fencing token of its current (or last)
  // lease, who holds it, and how many times it was delivered.
  `CREATE TABLE IF NOT EXISTS tq_deliveries (
  seq        INTEGER PRIMARY KEY,
  lease_id   TEXT NOT NULL UNIQUE,
  worker_id  TEXT NOT NULL,
  attempts   INTEGER NOT NULL,
  claimed_at REAL NOT NULL
)`,
  `CREATE TABLE IF NOT EXISTS tq_dead_letters (
  seq        INTEGER PRIMARY KEY,
  group_id   TEXT NOT NULL,
  event      TEXT NOT NULL,
  priority   INT NOT NULL,
  attempts   INTEGER NOT NULL,
  reason     TEXT NOT NULL,
  dead_at    REAL NOT NULL
)`,
  "CREATE INDEX IF NOT EXISTS tq_dead_letters_group ON tq_dead_letters (group_id, seq)",
  `CREATE TABLE IF NOT EXISTS tq_idempotency (
  key         TEXT PRIMARY KEY,
  token       TEXT NOT NULL,
  fingerprint TEXT,
  first_seq   INTEGER,
  count       INTEGER NOT NULL,
  expires_at  REAL NOT NULL
)`,
  "CREATE INDEX IF NOT EXISTS tq_idempotency_expiry ON tq_idempotency (expires_at)",
  // Whoever deletes a message (our ack, a Python ack, a dead-letter move) leaves no orphan lease
  // row and no empty group behind.
  `CREATE TRIGGER IF NOT EXISTS tq_messages_deleted AFTER DELETE ON messages BEGIN
  DELETE FROM tq_deliveries WHERE seq = OLD.seq;
  DELETE FROM groups WHERE group_id = OLD.group_id
    AND NOT EXISTS (SELECT 1 FROM messages WHERE group_id = OLD.group_id);
END`,
  "CREATE TABLE IF NOT EXISTS tq_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
  `INSERT INTO tq_meta (key, value) VALUES ('schema_version', '${SCHEMA_VERSION}')
  ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE CAST(value AS INTEGER) < ${SCHEMA_VERSION}`,
];
