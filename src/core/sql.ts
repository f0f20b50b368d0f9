/**
 * Every SQL statement the queue runs, in one place, as plain text plus the arguments it takes.
 *
 * The spec's two tables (`messages`, `groups`) are created byte-for-byte as the Python transports
 * create them, so both can share one database. Our extra state lives in `tq_*` tables and in indexes
 * and a trigger that also work on SQLite 3.40 (nothing stored here uses `unixepoch('subsec')`).
 *
 * Time is always the database's: statements (not stored objects) read `unixepoch('subsec')`, so
 * every claimer, wherever its clock is, judges leases by the primary's clock.
 */
import type { InStatement } from "@libsql/client";

export const SCHEMA_VERSION = 1;

/** Fencing and bookkeeping for leases, kept apart from the spec's tables. */
export const SCHEMA: string[] = [
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

export const READ_SCHEMA_VERSION = "SELECT value FROM tq_meta WHERE key = 'schema_version'";

/** `attempts <= :max` with no limit configured. */
export const UNLIMITED = Number.MAX_SAFE_INTEGER;

type Args = Record<string, string | number | null>;

/**
 * Named arguments for readability here, positional `?` on the wire: embedded replicas (libsql 0.5)
 * panic on named arguments in delegated writes.
 */
function stmt(sql: string, args: Args): InStatement {
  let compiled = compiledSql.get(sql);
  if (!compiled) {
    const names: string[] = [];
    const text = sql.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, (_, name: string) => {
      names.push(name);
      return "?";
    });
    compiled = { text, names };
    // Statement texts are few (publish texts vary with the batch size): a bounded cache.
    if (compiledSql.size >= 512) compiledSql.clear();
    compiledSql.set(sql, compiled);
  }
  const values = compiled.names.map((name) => {
    if (!(name in args)) throw new Error(`statement uses :${name} but no argument is given`);
    return args[name] as string | number | null;
  });
  return { sql: compiled.text, args: values };
}
const compiledSql = new Map<string, { text: string; names: string[] }>();

const FENCE = `EXISTS (SELECT 1 FROM tq_deliveries d
   WHERE d.seq = :seq AND d.lease_id = :lease AND d.worker_id = messages.locked_by)`;

// ---------------------------------------------------------------------------------------------
// publish

export interface PublishRow {
  groupId: string;
  event: string;
  priority: number;
}

export interface IdempotencyArgs {
  key: string;
  token: string;
  fingerprint: string | null;
  ttl: number;
}

/**
 * Inserts the messages and their group rows (the first publish of a group sets its priority). With a
 * key, the inserts happen only if this batch is the one that claimed the key; the last statement tells
 * which batch that was.
 */
export function publishStatements(rows: PublishRow[], idem?: IdempotencyArgs): InStatement[] {
  // Separate argument sets: a statement is given exactly the names it uses.
  const msgArgs: Record<string, string> = {};
  const grpArgs: Record<string, string | number> = {};
  const msgValues: string[] = [];
  const grpValues: string[] = [];
  rows.forEach((r, i) => {
    msgArgs[`g${i}`] = r.groupId;
    msgArgs[`e${i}`] = r.event;
    grpArgs[`g${i}`] = r.groupId;
    grpArgs[`p${i}`] = r.priority;
    msgValues.push(`(:g${i}, :e${i})`);
    grpValues.push(`(:g${i}, :p${i})`);
  });
  if (!idem) {
    return [
      stmt(`INSERT INTO messages (group_id, event) VALUES ${msgValues.join(", ")} RETURNING seq`, msgArgs),
      stmt(`INSERT OR IGNORE INTO groups (group_id, priority) VALUES ${grpValues.join(", ")}`, grpArgs),
    ];
  }
  const k = { key: idem.key, token: idem.token };
  // True only in the batch that has just claimed the key: a resend of that same batch (its answer was
  // lost) finds first_seq already set and inserts nothing again.
  const mine = "EXISTS (SELECT 1 FROM tq_idempotency WHERE key = :key AND token = :token AND first_seq IS NULL)";
  return [
    // An expired key may be used again; a few other expired keys are collected on the way.
    stmt(
      `DELETE FROM tq_idempotency WHERE key IN (
        SELECT key FROM tq_idempotency WHERE expires_at < unixepoch('subsec') ORDER BY expires_at LIMIT 16)
        OR (key = :key AND expires_at < unixepoch('subsec'))`,
      { key: idem.key },
    ),
    stmt(
      `INSERT INTO tq_idempotency (key, token, fingerprint, count, expires_at)
        VALUES (:key, :token, :fp, :count, unixepoch('subsec') + :ttl) ON CONFLICT (key) DO NOTHING`,
      { ...k, fp: idem.fingerprint, count: rows.length, ttl: idem.ttl },
    ),
    stmt(
      `INSERT INTO messages (group_id, event) SELECT column1, column2 FROM (VALUES ${msgValues.join(", ")})
        WHERE ${mine} RETURNING seq`,
      { ...msgArgs, ...k },
    ),
    stmt(
      `INSERT OR IGNORE INTO groups (group_id, priority) SELECT column1, column2 FROM (VALUES ${grpValues.join(", ")})
        WHERE ${mine}`,
      { ...grpArgs, ...k },
    ),
    stmt(
      `UPDATE tq_idempotency SET first_seq = (SELECT max(seq) FROM messages) - count + 1
        WHERE key = :key AND token = :token AND first_seq IS NULL`,
      k,
    ),
    stmt("SELECT token, fingerprint, first_seq, count FROM tq_idempotency WHERE key = :key", { key: idem.key }),
  ];
}

// ---------------------------------------------------------------------------------------------
// claim

export interface ClaimArgs {
  /** This claim's fencing token (32 hex); each lease stores `<token>-<seq>` (see `storedLeaseId`). */
  lease: string;
  worker: string;
  visibility: number;
  /** How many leases, in distinct groups. */
  n: number;
  minPriority: number;
  maxAttempts: number;
}

/** What `tq_deliveries.lease_id` holds for the lease of `seq` taken with `token`. */
export const storedLeaseId = (token: string, seq: number): string => `${token}-${seq}`;

/**
 * A claim of up to `n` leases, as five set-based statements whatever `n` is, run inside the caller's
 * write batch (no read-then-write across round trips).
 *
 * [0] is the spec's select, reshaped to walk groups in round-robin order, (last_claimed_at, rowid),
 * and stop at the `n`-th that qualifies; it records each lease (token, attempt count, and the group's
 * new round-robin stamp). The stamps strictly increase, in pick order, past every stamp so far: so `n`
 * leases in one claim, or claims in one millisecond, line up exactly as `n` single claims would.
 * [1] leases the messages (lease time on the database's clock), [2] stamps the groups, and
 * [3]-[4] move a message past its maximum attempts to `tq_dead_letters` instead of leasing it.
 *
 * Results: [0] the picked seqs; [1] the leased messages (fewer when some were dead-lettered).
 * Resending the same batch after a lost answer picks nothing new and returns the same leases.
 */
export function claimStatements(a: ClaimArgs): InStatement[] {
  const args = {
    lease: a.lease,
    from: `${a.lease}-`,
    to: `${a.lease}.`, // '.' follows '-': [from, to) is every lease of this claim
    worker: a.worker,
    vis: a.visibility,
    n: a.n,
    min: a.minPriority,
    max: a.maxAttempts,
  };
  const mine = "lease_id >= :from AND lease_id < :to";
  const stmts: InStatement[] = [
    stmt(
      `INSERT INTO tq_deliveries (seq, lease_id, worker_id, attempts, claimed_at)
SELECT pick.head, :lease || '-' || pick.head, :worker, 1,
       base.stamp + (row_number() OVER (ORDER BY pick.lca, pick.rid) - 1) * 0.000001
  FROM (SELECT (SELECT min(m.seq) FROM messages m
                 WHERE m.group_id = g.group_id
                   AND (m.locked_by IS NULL OR m.lock_expiry < unixepoch('subsec'))) AS head,
               g.last_claimed_at AS lca, g.rowid AS rid
          FROM groups g
         WHERE g.priority >= :min
           AND NOT EXISTS (SELECT 1 FROM messages x
                            WHERE x.group_id = g.group_id AND x.locked_by IS NOT NULL
                              AND x.lock_expiry >= unixepoch('subsec'))
           AND head IS NOT NULL
           -- A resend of this batch (its answer was lost) must not lease more under one token.
           AND NOT EXISTS (SELECT 1 FROM tq_deliveries t WHERE t.${mine})
         ORDER BY g.last_claimed_at, g.rowid
         LIMIT :n) AS pick,
       (SELECT max(unixepoch('subsec'), coalesce((SELECT max(last_claimed_at) FROM groups), 0) + 0.000001) AS stamp) AS base
 WHERE true
ON CONFLICT (seq) DO UPDATE SET lease_id = excluded.lease_id, worker_id = excluded.worker_id,
   attempts = attempts + 1, claimed_at = excluded.claimed_at
RETURNING seq`,
      args,
    ),
    stmt(
      `UPDATE messages
   SET locked_by = :worker, lock_expiry = unixepoch('subsec') + :vis
 WHERE seq IN (SELECT seq FROM tq_deliveries WHERE ${mine} AND attempts <= :max)
RETURNING seq, group_id, event, lock_expiry,
          (SELECT attempts FROM tq_deliveries d WHERE d.seq = messages.seq) AS attempts,
          (SELECT claimed_at FROM tq_deliveries d WHERE d.seq = messages.seq) AS stamp`,
      args,
    ),
    stmt(
      `UPDATE groups SET last_claimed_at = d.claimed_at
  FROM tq_deliveries d JOIN messages m ON m.seq = d.seq
 WHERE d.${mine} AND m.group_id = groups.group_id`,
      args,
    ),
  ];
  if (a.maxAttempts < UNLIMITED) {
    stmts.push(
      stmt(
        `INSERT INTO tq_dead_letters (seq, group_id, event, priority, attempts, reason, dead_at)
SELECT m.seq, m.group_id, m.event, coalesce(g.priority, 0), d.attempts - 1, 'max_attempts', unixepoch('subsec')
  FROM tq_deliveries d JOIN messages m ON m.seq = d.seq LEFT JOIN groups g ON g.group_id = m.group_id
 WHERE d.${mine} AND d.attempts > :max
ON CONFLICT (seq) DO NOTHING`,
        args,
      ),
      stmt(
        `DELETE FROM messages
 WHERE seq IN (SELECT seq FROM tq_deliveries WHERE ${mine} AND attempts > :max)`,
        args,
      ),
    );
  }
  return stmts;
}

// ---------------------------------------------------------------------------------------------
// ack / nack / extend: each applies only while the lease is still the caller's (fencing).

export interface LeaseRef {
  seq: number;
  lease: string;
}

/** Results: [0] a row if acked, [1] whether the message still exists. */
export function ackStatements(l: LeaseRef): InStatement[] {
  const args = { seq: l.seq, lease: l.lease };
  return [
    stmt(`DELETE FROM messages WHERE seq = :seq AND ${FENCE} RETURNING seq`, args),
    stmt("SELECT EXISTS (SELECT 1 FROM messages WHERE seq = :seq) AS present", { seq: l.seq }),
  ];
}

/**
 * delay > 0 parks the message until now + delay; 0 frees it. A message that has used its attempts is
 * dead-lettered instead. Results: [1] a row if dead-lettered, [2] a row if parked/freed,
 * [3] the state the call left (for a retry whose first attempt may have applied).
 */
export function nackStatements(l: LeaseRef, delay: number, maxAttempts: number): InStatement[] {
  const args = { seq: l.seq, lease: l.lease, delay, max: maxAttempts };
  return [
    stmt(
      `INSERT INTO tq_dead_letters (seq, group_id, event, priority, attempts, reason, dead_at)
SELECT m.seq, m.group_id, m.event, coalesce(g.priority, 0), d.attempts, 'max_attempts', unixepoch('subsec')
  FROM messages m JOIN tq_deliveries d ON d.seq = m.seq LEFT JOIN groups g ON g.group_id = m.group_id
 WHERE m.seq = :seq AND d.lease_id = :lease AND d.worker_id = m.locked_by AND d.attempts >= :max
ON CONFLICT (seq) DO NOTHING`,
      args,
    ),
    stmt(
      `DELETE FROM messages WHERE seq = :seq AND ${FENCE}
   AND EXISTS (SELECT 1 FROM tq_dead_letters WHERE seq = :seq) RETURNING seq`,
      args,
    ),
    stmt(
      `UPDATE messages
   SET locked_by   = CASE WHEN :delay > 0 THEN '__parked__' END,
       lock_expiry = CASE WHEN :delay > 0 THEN unixepoch('subsec') + :delay END
 WHERE seq = :seq AND ${FENCE} RETURNING seq`,
      args,
    ),
    stmt(
      `SELECT EXISTS (SELECT 1 FROM messages WHERE seq = :seq) AS present,
       EXISTS (SELECT 1 FROM tq_deliveries WHERE seq = :seq AND lease_id = :lease) AS ours,
       EXISTS (SELECT 1 FROM tq_dead_letters WHERE seq = :seq) AS dead`,
      { seq: l.seq, lease: l.lease },
    ),
  ];
}

/** Results: [0] the new expiry if extended, [1] whether the message still exists. */
export function extendStatements(l: LeaseRef, visibility: number): InStatement[] {
  const args = { seq: l.seq, lease: l.lease, vis: visibility };
  return [
    stmt(
      `UPDATE messages SET lock_expiry = unixepoch('subsec') + :vis
 WHERE seq = :seq AND ${FENCE} RETURNING lock_expiry`,
      args,
    ),
    stmt("SELECT EXISTS (SELECT 1 FROM messages WHERE seq = :seq) AS present", { seq: l.seq }),
  ];
}

// ---------------------------------------------------------------------------------------------
// dead letters and stats

export function listDeadLettersStatement(groupId: string | null, afterSeq: number, limit: number): InStatement {
  return stmt(
    `SELECT seq, group_id, event, priority, attempts, reason, dead_at FROM tq_dead_letters
 WHERE seq > :after AND (:group IS NULL OR group_id = :group) ORDER BY seq LIMIT :limit`,
    { after: afterSeq, group: groupId, limit },
  );
}

/** Puts a dead letter back at the tail of its group. Results: [0] the new seq, [2] the removed row. */
export function redriveStatements(seq: number): InStatement[] {
  const args = { seq };
  return [
    stmt(
      "INSERT INTO messages (group_id, event) SELECT group_id, event FROM tq_dead_letters WHERE seq = :seq RETURNING seq",
      args,
    ),
    stmt(
      "INSERT OR IGNORE INTO groups (group_id, priority) SELECT group_id, priority FROM tq_dead_letters WHERE seq = :seq",
      args,
    ),
    stmt("DELETE FROM tq_dead_letters WHERE seq = :seq RETURNING seq", args),
  ];
}

export function deleteDeadLetterStatement(seq: number): InStatement {
  return stmt("DELETE FROM tq_dead_letters WHERE seq = :seq RETURNING seq", { seq });
}

/**
 * Queue counters. `waiting` counts the messages held back behind a live lease or park in their
 * group (by the one-in-flight rule, everything else in such a group): found from the groups in
 * flight (an index probe each), so the cost follows the groups in flight, not the depth.
 */
export const STATS = `SELECT
  (SELECT count(*) FROM messages) AS total,
  (SELECT count(*) FROM messages WHERE locked_by IS NOT NULL AND locked_by <> '__parked__'
      AND lock_expiry >= unixepoch('subsec')) AS in_flight,
  (SELECT count(*) FROM messages WHERE locked_by = '__parked__' AND lock_expiry >= unixepoch('subsec')) AS parked,
  (SELECT coalesce(sum((SELECT count(*) FROM messages y WHERE y.group_id = b.group_id) - b.held), 0)
     FROM (SELECT group_id, count(*) AS held FROM messages
            WHERE locked_by IS NOT NULL AND lock_expiry >= unixepoch('subsec') GROUP BY group_id) AS b) AS waiting,
  (SELECT count(*) FROM groups) AS groups,
  (SELECT count(*) FROM tq_dead_letters) AS dead_letters,
  unixepoch('subsec') AS now`;
