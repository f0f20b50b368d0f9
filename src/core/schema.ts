/**
 * The schema, and the steps that bring any earlier database to it.
 *
 * The spec's two tables (`messages`, `groups`) are created byte for byte as its Python transports
 * create them, so both can share one database. Everything we add is additive and runs on SQLite
 * 3.40: nullable columns, indexes, triggers (none of them reads the clock) and `tq_*` tables.
 *
 * What each addition is for, and what it costs (sqld bills a row written per table row inserted,
 * updated or deleted, and per index entry inserted; removing an index entry is free):
 * - `messages.tq_lease` (`"<token>|<worker>"`), `tq_attempts`, `tq_claimed_at`: the fencing token,
 *   the delivery count and the round-robin stamp of our last claim, in the row the claim writes
 *   anyway (no lease table to insert into and delete from).
 * - `groups.tq_busy`: 1 while a lease or park of ours holds the group. The round-robin index
 *   `tq_groups_free` only holds groups without it, so a claim never walks past groups in flight
 *   or parked: an empty claim reads a handful of rows, whatever is in flight. Taking a group out
 *   is free; putting it back (the ack) costs the index entry.
 * - `tq_messages_lock (lock_expiry) WHERE locked_by IS NOT NULL`: finds leases and parks that ended
 *   (their groups are out of the free index) and counts what is in flight, without a scan.
 * - `tq_messages_group_seq (group_id, seq)`: a group's first message in one probe. A group's live
 *   lease or park, if any, is on its first message (claims only ever lease the first one), so that
 *   probe also tells whether the group is in flight.
 * - Triggers keep `tq_busy` and the group rows right whoever writes (our statements, the spec's):
 *   our claim takes the group out and stamps it; a delete or release puts it back unless its first
 *   message is still locked (the lock index brings it back when that lock ends); a group whose
 *   last message goes is deleted.
 */

import { FLOW_ON } from "./sql/settings.js";

export const READ_SCHEMA_VERSION = "SELECT value FROM tq_meta WHERE key = 'schema_version'";

const SPEC_TABLES = [
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

const ADDED_COLUMNS = [
  "ALTER TABLE messages ADD COLUMN tq_lease TEXT",
  "ALTER TABLE messages ADD COLUMN tq_attempts INTEGER",
  "ALTER TABLE messages ADD COLUMN tq_claimed_at REAL",
  "ALTER TABLE groups ADD COLUMN tq_busy INTEGER",
];

/** Everything of version 2 that does not depend on what was there before (the version is set after). */
const V2_OBJECTS = [
  "CREATE INDEX IF NOT EXISTS tq_messages_group_seq ON messages (group_id, seq)",
  "CREATE INDEX IF NOT EXISTS tq_messages_lock ON messages (lock_expiry) WHERE locked_by IS NOT NULL",
  // (last_claimed_at, rowid): a group's rowid grows with its creation, so among never-claimed groups
  // it is the spec's `m.seq` tie-break.
  "CREATE INDEX IF NOT EXISTS tq_groups_free ON groups (last_claimed_at) WHERE tq_busy IS NULL",
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
  // Idempotency keys given by users: one row (plus its expiry entry) per key, for the window.
  `CREATE TABLE IF NOT EXISTS tq_idempotency (
  key         TEXT PRIMARY KEY,
  token       TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  first_seq   INTEGER NOT NULL,
  count       INTEGER NOT NULL,
  expires_at  REAL NOT NULL
) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS tq_idempotency_expiry ON tq_idempotency (expires_at)",
  // The keys the library adds by itself to publishes sent over the network: a slot per publish
  // under way in a process, reused (one row updated in place, nothing to expire per publish).
  `CREATE TABLE IF NOT EXISTS tq_publishers (
  slot      TEXT PRIMARY KEY,
  token     TEXT NOT NULL,
  first_seq INTEGER NOT NULL,
  count     INTEGER NOT NULL,
  at        REAL NOT NULL
) WITHOUT ROWID`,
  `CREATE TRIGGER IF NOT EXISTS tq_messages_deleted AFTER DELETE ON messages BEGIN
  DELETE FROM groups WHERE group_id = OLD.group_id
    AND NOT EXISTS (SELECT 1 FROM messages WHERE group_id = OLD.group_id);
  UPDATE groups SET tq_busy = NULL WHERE group_id = OLD.group_id AND tq_busy IS NOT NULL
    AND (SELECT locked_by FROM messages WHERE group_id = OLD.group_id ORDER BY seq LIMIT 1) IS NULL;
END`,
  `CREATE TRIGGER IF NOT EXISTS tq_messages_released AFTER UPDATE OF locked_by ON messages
  WHEN NEW.locked_by IS NULL BEGIN
  UPDATE groups SET tq_busy = NULL WHERE group_id = NEW.group_id AND tq_busy IS NOT NULL
    AND (SELECT locked_by FROM messages WHERE group_id = NEW.group_id ORDER BY seq LIMIT 1) IS NULL;
END`,
  // Only our claim sets tq_lease: the group leaves the free index and takes the claim's stamp.
  `CREATE TRIGGER IF NOT EXISTS tq_messages_leased AFTER UPDATE OF tq_lease ON messages
  WHEN NEW.tq_lease IS NOT NULL BEGIN
  UPDATE groups SET last_claimed_at = NEW.tq_claimed_at, tq_busy = 1 WHERE group_id = NEW.group_id;
END`,
];

/**
 * Version 3: push subscriptions (the API's `/v1/subscriptions`), one row each, read by the writer
 * that delivers them. Nothing else reads or writes it.
 */
const V3_OBJECTS = [
  `CREATE TABLE IF NOT EXISTS tq_subscriptions (
  name          TEXT PRIMARY KEY,
  url           TEXT NOT NULL,
  min_priority  INTEGER NOT NULL,
  max_in_flight INTEGER NOT NULL,
  visibility    REAL NOT NULL,
  secret        TEXT NOT NULL,
  created_at    REAL NOT NULL,
  updated_at    REAL NOT NULL
) WITHOUT ROWID`,
];

/**
 * Version 4: the catalog of named queues (the API's `/v1/queues`), kept in the default queue's
 * database: each queue's shard count and where its writers should run. Nothing else reads or writes
 * it; in any other database it stays empty. (Version 4 also kept each queue's database addresses;
 * version 6 drops them.)
 */
const V4_OBJECTS = [
  `CREATE TABLE IF NOT EXISTS tq_queues (
  name          TEXT PRIMARY KEY,
  shards        INTEGER NOT NULL,
  databases     TEXT NOT NULL,
  location_hint TEXT,
  created_at    REAL NOT NULL
) WITHOUT ROWID`,
];

/**
 * Version 5: a message's publish time (`tq_published_at`: its age, for stats' oldest_age and lag)
 * and the trace context it was published in (`tq_trace`, a W3C traceparent: its consumer's span is
 * a child of its publisher's). Both in the row the publish writes anyway; NULL in rows the spec's
 * Python transports write, and in rows published before.
 */
const V5_COLUMNS = [
  "ALTER TABLE messages ADD COLUMN tq_published_at REAL",
  "ALTER TABLE messages ADD COLUMN tq_trace TEXT",
];

/**
 * Version 6: the catalog keeps what a queue is, not where it lives: a queue's databases come from the
 * configuration when it is resolved, so that moving sqld, changing TURSO_DATABASE_URL or the
 * organization, or editing a map loses no queue (and no token rests in the catalog).
 */
const V6_STEPS = [
  // Rebuilt rather than altered: the same steps serve a table with the column and one without.
  `CREATE TABLE tq_queues_v6 (
  name          TEXT PRIMARY KEY,
  shards        INTEGER NOT NULL,
  location_hint TEXT,
  created_at    REAL NOT NULL
) WITHOUT ROWID`,
  "INSERT INTO tq_queues_v6 (name, shards, location_hint, created_at) SELECT name, shards, location_hint, created_at FROM tq_queues",
  "DROP TABLE tq_queues",
  "ALTER TABLE tq_queues_v6 RENAME TO tq_queues",
];

/**
 * Version 7: keys made through the API (`tq_keys`: a SHA-256 of each secret, never the secret), the
 * audit of `manage` actions (`tq_audit`, the last AUDIT.retention entries), both in the default
 * queue's database and empty elsewhere; and a push subscription's next signing secret while its
 * secret rotates (`tq_subscriptions.next_secret`).
 */
const KEYS_OBJECTS = [
  `CREATE TABLE IF NOT EXISTS tq_keys (
  id           TEXT PRIMARY KEY,
  name         TEXT NOT NULL,
  hash         TEXT NOT NULL,
  scopes       TEXT NOT NULL,
  queues       TEXT,
  created_at   REAL NOT NULL,
  created_by   TEXT NOT NULL,
  expires_at   REAL,
  last_used_at REAL
) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS tq_audit (
  id      INTEGER PRIMARY KEY,
  at      REAL NOT NULL,
  key_id  TEXT NOT NULL,
  action  TEXT NOT NULL,
  queue   TEXT,
  detail  TEXT
)`,
  "ALTER TABLE tq_subscriptions ADD COLUMN next_secret TEXT",
];

/**
 * Version 8: flow control (src/core/sql/settings.ts says how it works).
 * - `tq_settings` (the queue's, one row while any setting is in force: the switch) and
 *   `tq_group_settings` (a row per group with its own): concurrency, rate, pause.
 * - `groups.tq_until`, `groups.tq_tat`: when its rate lets a rate-held group go again (indexed, so
 *   that claims find it then without walking the others), and its rate's state. `tq_rates` keeps
 *   that state while its group's row is gone.
 * - `messages.tq_singleton`: a singleton publish's key, unique among the messages never claimed
 *   (a claim takes its message out of that index for free).
 * - `tq_schedules`: publishes on a clock.
 * - The three triggers of version 2 run only while the switch is off, their flow-aware twins (made
 *   by the first settings write: src/core/sql/settings.ts) while
 *   it is on. Off, they read no more than before (and no trigger is added where none was: the
 *   first trigger on an insert or a delete costs a row read per row).
 */
const FLOW_OBJECTS = [
  "ALTER TABLE groups ADD COLUMN tq_until REAL",
  "ALTER TABLE groups ADD COLUMN tq_tat REAL",
  "ALTER TABLE messages ADD COLUMN tq_singleton TEXT",
  "CREATE INDEX IF NOT EXISTS tq_groups_until ON groups (tq_until) WHERE tq_until IS NOT NULL",
  `CREATE UNIQUE INDEX IF NOT EXISTS tq_messages_singleton ON messages (tq_singleton)
  WHERE tq_singleton IS NOT NULL AND tq_attempts IS NULL`,
  `CREATE TABLE IF NOT EXISTS tq_settings (
  id             INTEGER PRIMARY KEY CHECK (id = 1),
  concurrency    INTEGER,
  rate_limit     INTEGER,
  rate_period    REAL,
  rate_burst     INTEGER,
  rate_interval  REAL,
  rate_tolerance REAL,
  paused         INTEGER,
  updated_at     REAL NOT NULL
) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS tq_group_settings (
  group_id       TEXT PRIMARY KEY,
  concurrency    INTEGER,
  rate_limit     INTEGER,
  rate_period    REAL,
  rate_burst     INTEGER,
  rate_interval  REAL,
  rate_tolerance REAL,
  paused         INTEGER,
  updated_at     REAL NOT NULL
) WITHOUT ROWID`,
  "CREATE TABLE IF NOT EXISTS tq_rates (group_id TEXT PRIMARY KEY, tat REAL NOT NULL) WITHOUT ROWID",
  "CREATE INDEX IF NOT EXISTS tq_rates_tat ON tq_rates (tat)",
  `CREATE TABLE IF NOT EXISTS tq_schedules (
  name        TEXT PRIMARY KEY,
  group_id    TEXT NOT NULL,
  event       TEXT NOT NULL,
  priority    INTEGER NOT NULL,
  cron        TEXT,
  time_zone   TEXT,
  every       REAL,
  paused      INTEGER NOT NULL,
  next_at     REAL,
  last_at     REAL,
  runs        INTEGER NOT NULL,
  created_at  REAL NOT NULL,
  updated_at  REAL NOT NULL
) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS tq_schedules_next ON tq_schedules (next_at) WHERE next_at IS NOT NULL",
  "DROP TRIGGER IF EXISTS tq_messages_deleted",
  "DROP TRIGGER IF EXISTS tq_messages_released",
  "DROP TRIGGER IF EXISTS tq_messages_leased",
  `CREATE TRIGGER tq_messages_deleted AFTER DELETE ON messages BEGIN
  DELETE FROM groups WHERE group_id = OLD.group_id
    AND NOT EXISTS (SELECT 1 FROM messages WHERE group_id = OLD.group_id) AND NOT ${FLOW_ON};
  UPDATE groups SET tq_busy = NULL WHERE group_id = OLD.group_id AND tq_busy IS NOT NULL
    AND (SELECT locked_by FROM messages WHERE group_id = OLD.group_id ORDER BY seq LIMIT 1) IS NULL
    AND NOT ${FLOW_ON};
END`,
  `CREATE TRIGGER tq_messages_released AFTER UPDATE OF locked_by ON messages
  WHEN NEW.locked_by IS NULL AND NOT ${FLOW_ON} BEGIN
  UPDATE groups SET tq_busy = NULL WHERE group_id = NEW.group_id AND tq_busy IS NOT NULL
    AND (SELECT locked_by FROM messages WHERE group_id = NEW.group_id ORDER BY seq LIMIT 1) IS NULL;
END`,
  `CREATE TRIGGER tq_messages_leased AFTER UPDATE OF tq_lease ON messages
  WHEN NEW.tq_lease IS NOT NULL AND NOT ${FLOW_ON} BEGIN
  UPDATE groups SET last_claimed_at = NEW.tq_claimed_at, tq_busy = 1 WHERE group_id = NEW.group_id;
END`,
];

/**
 * Version 9: where a database stands in a sharded queue, and what a dead letter keeps.
 * - `tq_shard` (one row, written on first use by a queue of several databases): the queue's
 *   identity, this database's shard index and the shard count. A queue opened over its databases
 *   in another order, one more or fewer, or one listed twice, is refused (src/core/shard.ts,
 *   `placeShard`). A database of one queue alone never gets the row.
 * - `tq_dead_letters.trace`: the trace context the message was published in, which a redrive
 *   gives back to it (`tq_trace`).
 */
const SHARD_OBJECTS = [
  `CREATE TABLE IF NOT EXISTS tq_shard (
  id        INTEGER PRIMARY KEY CHECK (id = 1),
  queue     TEXT NOT NULL,
  shard     INTEGER NOT NULL,
  shards    INTEGER NOT NULL,
  placed_at REAL NOT NULL
) WITHOUT ROWID`,
  "ALTER TABLE tq_dead_letters ADD COLUMN trace TEXT",
];

/**
 * Version 1 kept leases in `tq_deliveries` (one row per leased message), walked every group in
 * round-robin order, and stored every idempotency key with an expiry. Its leases stay valid: a
 * lease id is `<seq>.<token>` in both versions.
 */
const FROM_V1 = [
  ...ADDED_COLUMNS,
  `UPDATE messages SET tq_lease = substr(d.lease_id, 1, 32) || '|' || d.worker_id,
       tq_attempts = d.attempts, tq_claimed_at = d.claimed_at
  FROM tq_deliveries d WHERE d.seq = messages.seq`,
  "UPDATE groups SET tq_busy = 1 WHERE group_id IN (SELECT group_id FROM messages WHERE locked_by IS NOT NULL)",
  "DROP TRIGGER IF EXISTS tq_messages_deleted",
  "DROP TABLE IF EXISTS tq_deliveries",
  "DROP INDEX IF EXISTS tq_groups_round_robin",
  "DROP INDEX IF EXISTS tq_messages_group_lock",
  "ALTER TABLE tq_idempotency RENAME TO tq_idempotency_v1",
  "DROP INDEX IF EXISTS tq_idempotency_expiry",
];

/** Copies the user keys that are still live once the new table exists. */
const FROM_V1_AFTER = [
  `INSERT INTO tq_idempotency (key, token, fingerprint, first_seq, count, expires_at)
  SELECT key, token, fingerprint, first_seq, count, expires_at FROM tq_idempotency_v1
   WHERE key NOT LIKE 'auto:%' AND fingerprint IS NOT NULL AND first_seq IS NOT NULL`,
  "DROP TABLE tq_idempotency_v1",
];

/**
 * Each version's steps from the one before, in order: a new version appends one entry (its objects
 * only; `IF NOT EXISTS` where a statement may meet its object already). Version 1 → 2 is the one
 * that rewrites, and version 0 (none of ours yet) starts from the spec's tables.
 */
const VERSIONS: Array<{ version: number; steps: string[] }> = [
  { version: 2, steps: [...V2_OBJECTS] },
  { version: 3, steps: [...V3_OBJECTS] },
  { version: 4, steps: [...V4_OBJECTS] },
  { version: 5, steps: [...V5_COLUMNS] },
  { version: 6, steps: [...V6_STEPS] },
  { version: 7, steps: [...KEYS_OBJECTS] },
  { version: 8, steps: [...FLOW_OBJECTS] },
  { version: 9, steps: [...SHARD_OBJECTS] },
];

export const SCHEMA_VERSION = (VERSIONS.at(-1) as { version: number }).version;

/**
 * The statements that bring a database at `from` (0: none of ours yet, a new database or one the
 * Python transports made) to `to` (SCHEMA_VERSION; an earlier one only to make an old database in a
 * test), to run as one write batch. Two transports racing to
 * do it: the second one's batch fails as a whole (a column already exists) and it reads the version
 * again.
 */
export function migrationSteps(from: number, to: number = SCHEMA_VERSION): string[] {
  if (from >= to) return [];
  const start = from === 0 ? [...SPEC_TABLES, ...ADDED_COLUMNS] : from === 1 ? [...FROM_V1] : [];
  const later = VERSIONS.filter((v) => v.version > Math.max(from, 1) && v.version <= to).flatMap((v) => v.steps);
  const after = from === 1 ? FROM_V1_AFTER : [];
  // Version 1's live keys are copied once version 2's table exists (the first entry of `later`).
  const steps =
    from === 1 ? [...start, ...V2_OBJECTS, ...after, ...later.slice(V2_OBJECTS.length)] : [...start, ...later];
  return [...steps, ...setVersion(to)];
}

/** Records the version (never lowers it: a newer transport may have been there first). */
function setVersion(version: number): string[] {
  return [
    "CREATE TABLE IF NOT EXISTS tq_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    `INSERT INTO tq_meta (key, value) VALUES ('schema_version', '${version}')
  ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE CAST(value AS INTEGER) < ${version}`,
  ];
}
