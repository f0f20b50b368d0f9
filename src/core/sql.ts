/**
 * Every statement the queue runs, in one place. Each operation is a `Plan`: its statements, named,
 * and the function that reads their results by those names (and by column name), so that the code
 * sending a batch never counts positions in it. The schema and its cost model are in schema.ts.
 *
 * Time is always the database's: statements read `unixepoch('subsec')`, so every claimer, wherever
 * its clock is, judges leases by the primary's clock.
 */
import type { InStatement, ResultSet, Row } from "@libsql/client";
import { QueueError } from "./errors.js";
import type { DeadLetter, GroupInfo, Lease, NackResult, QueueStats } from "./types.js";

/** An operation's statements, to run as one atomic batch, and how to read their results. */
export interface Plan<T> {
  stmts: InStatement[];
  /**
   * For a write run in-process (a local file), whether each statement needs to run given the
   * results before it; a batch sent over the network runs them all (they then change nothing).
   */
  when?: Array<((earlier: ResultSet[]) => boolean) | undefined>;
  /** Turns the results of `stmts` into the answer; may throw a QueueError. */
  read(results: ResultSet[], retried: boolean): T;
  /** What to send instead when the first request's answer never came (it may have applied). */
  resend?: Plan<T>;
}

type Results<N extends string> = Record<N, ResultSet>;

type Part<N extends string> = readonly [N, InStatement | undefined, ((r: Partial<Results<N>>) => boolean)?];

/**
 * Builds a plan from named statements; `read` gets each statement's result under its name. A
 * part's third element says when it is worth running at all (see `Plan.when`).
 */
export function plan<N extends string, T>(
  parts: ReadonlyArray<Part<N>>,
  read: (r: Results<N>, retried: boolean) => T,
): Plan<T> {
  const named = parts.filter(
    (p): p is readonly [N, InStatement, ((r: Partial<Results<N>>) => boolean)?] => p[1] !== undefined,
  );
  const byName = (results: ResultSet[]) => {
    const r = {} as Partial<Results<N>>;
    results.forEach((rs, i) => {
      r[(named[i] as Part<N>)[0]] = rs;
    });
    return r;
  };
  return {
    stmts: named.map((p) => p[1]),
    when: named.map((p) => {
      const cond = p[2];
      return cond && ((earlier: ResultSet[]) => cond(byName(earlier)));
    }),
    read: (results, retried) => {
      const r = {} as Results<N>;
      named.forEach(([name], i) => {
        r[name] = results[i] as ResultSet;
      });
      return read(r, retried);
    },
  };
}

export const rowsOf = (rs: ResultSet | undefined): Row[] => rs?.rows ?? [];
const flag = (rs: ResultSet | undefined, column: string): boolean => Number(rowsOf(rs)[0]?.[column]) === 1;

type Args = Record<string, string | number | null>;

/**
 * Named arguments for readability here, positional `?` on the wire: embedded replicas (libsql 0.5)
 * panic on named arguments in delegated writes.
 */
export function stmt(sql: string, args: Args = {}): InStatement {
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

/** `attempts <= :max` with no limit configured. */
export const UNLIMITED = Number.MAX_SAFE_INTEGER;

const NOW = "unixepoch('subsec')";
const NEXT_SEQ = "coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'messages'), 0) + 1";

// ---------------------------------------------------------------------------------------------
// leases: `<seq>.<token>` outside, `tq_lease = '<token>|<worker>'` inside

export interface LeaseRef {
  seq: number;
  token: string;
}

const LEASE_ID = /^([1-9][0-9]{0,15})\.([0-9a-f]{32})$/;

/** Parses a lease or lease id; refuses anything that is not one of ours. */
/** A lease's id: its message and its token (what parseLeaseId reads back). */
export const leaseIdOf = (ref: LeaseRef): string => `${ref.seq}.${ref.token}`;

export function parseLeaseId(id: unknown): LeaseRef | undefined {
  const m = typeof id === "string" ? LEASE_ID.exec(id) : null;
  return m ? { seq: Number(m[1]), token: m[2] as string } : undefined;
}

/**
 * The lease is still the caller's: its token, and the worker that took it still holding the
 * message (a lease that lapsed and was claimed again, by us or by the spec's claim, or that was
 * released or parked, no longer matches).
 */
const FENCE = "tq_lease = :token || '|' || locked_by";

function leaseError(present: boolean, ref: LeaseRef): QueueError {
  return present
    ? new QueueError(
        "LEASE_LOST",
        `lease: message ${ref.seq} is no longer leased by this lease (it lapsed and was claimed again, or was released)`,
        { field: "lease" },
      )
    : new QueueError("LEASE_NOT_FOUND", `lease: message ${ref.seq} no longer exists (acked or dead-lettered)`, {
        field: "lease",
      });
}

// ---------------------------------------------------------------------------------------------
// publish

export interface PublishRow {
  groupId: string;
  event: string;
  priority: number;
  /** Seconds before it may be delivered (0: now). */
  delay: number;
}

/** How a publish proves, when sent again, whether its first request applied. */
export type PublishKey =
  | { kind: "none" }
  /** The library's own: a slot of this process, reused once the publish has settled. */
  | { kind: "slot"; slot: string; token: string; collect?: boolean }
  /** The user's: kept for the idempotency window, with the request's fingerprint. */
  | { kind: "user"; key: string; token: string; fingerprint: string; ttl: number };

/**
 * A delayed message is stored as the spec's transports understand a park: locked until its time
 * (by `'__delayed__'`, so that the spec's claim never delivers it early and our counters tell it
 * from a nack's park). A group created by a delayed message starts out of the free index (held);
 * the lock index brings it back when the message comes due.
 */
function valuesOf(rows: PublishRow[]) {
  const delayed = rows.some((r) => r.delay > 0);
  const msgArgs: Args = {};
  const grpArgs: Args = {};
  const msg: string[] = [];
  const grp: string[] = [];
  rows.forEach((r, i) => {
    msgArgs[`g${i}`] = r.groupId;
    msgArgs[`e${i}`] = r.event;
    grpArgs[`g${i}`] = r.groupId;
    grpArgs[`p${i}`] = r.priority;
    if (delayed) {
      msgArgs[`d${i}`] = r.delay;
      grpArgs[`d${i}`] = r.delay;
      msg.push(
        `(:g${i}, :e${i}, CASE WHEN :d${i} > 0 THEN '__delayed__' END, CASE WHEN :d${i} > 0 THEN ${NOW} + :d${i} END)`,
      );
      grp.push(`(:g${i}, :p${i}, CASE WHEN :d${i} > 0 THEN 1 END)`);
    } else {
      msg.push(`(:g${i}, :e${i})`);
      grp.push(`(:g${i}, :p${i})`);
    }
  });
  return {
    msgArgs,
    grpArgs,
    msgColumns: delayed ? "group_id, event, locked_by, lock_expiry" : "group_id, event",
    grpColumns: delayed ? "group_id, priority, tq_busy" : "group_id, priority",
    msgValues: msg.join(", "),
    grpValues: grp.join(", "),
  };
}

const seqsOf = (rs: ResultSet | undefined) => rowsOf(rs).map((r) => Number(r.seq));
const range = (first: number, count: number) => Array.from({ length: count }, (_, i) => first + i);

/**
 * Inserts the messages and, for a group's first message, its group row (which sets its priority).
 *
 * With a key, the key's row records the seq the batch's first message will get (the next one,
 * `sqlite_sequence` + 1), and the messages are inserted only while that still holds: in the batch
 * that wrote the record, nothing was inserted in between; in a resend of that batch (its answer
 * was lost), the seqs have moved on, so nothing is inserted twice, and the answer comes from the
 * record. A slot record is one row updated in place; a user key's row stays for the window.
 */
export function publishPlan(rows: PublishRow[], key: PublishKey): Plan<number[]> {
  const { msgArgs, grpArgs, msgColumns, grpColumns, msgValues, grpValues } = valuesOf(rows);
  const selectMsg = msgColumns === "group_id, event" ? "column1, column2" : "column1, column2, column3, column4";
  const selectGrp = grpColumns === "group_id, priority" ? "column1, column2" : "column1, column2, column3";
  if (key.kind === "none") {
    return plan(
      [
        ["inserted", stmt(`INSERT INTO messages (${msgColumns}) VALUES ${msgValues} RETURNING seq`, msgArgs)],
        ["groups", stmt(`INSERT OR IGNORE INTO groups (${grpColumns}) VALUES ${grpValues}`, grpArgs)],
      ],
      (r) => seqsOf(r.inserted).sort((a, b) => a - b),
    );
  }
  const table = key.kind === "slot" ? "tq_publishers" : "tq_idempotency";
  const where = key.kind === "slot" ? "slot = :slot" : "key = :key";
  const id: Args = key.kind === "slot" ? { slot: key.slot } : { key: key.key };
  const mine = `(SELECT first_seq FROM ${table} WHERE ${where} AND token = :token) = ${NEXT_SEQ}`;
  const record =
    key.kind === "slot"
      ? stmt(
          `INSERT INTO tq_publishers (slot, token, first_seq, count, at) VALUES (:slot, :token, ${NEXT_SEQ}, :count, ${NOW})
  ON CONFLICT (slot) DO UPDATE SET token = excluded.token, first_seq = excluded.first_seq, count = excluded.count,
     at = excluded.at WHERE token <> excluded.token`,
          { slot: key.slot, token: key.token, count: rows.length },
        )
      : stmt(
          `INSERT INTO tq_idempotency (key, token, fingerprint, first_seq, count, expires_at)
  VALUES (:key, :token, :fp, ${NEXT_SEQ}, :count, ${NOW} + :ttl) ON CONFLICT (key) DO NOTHING`,
          { key: key.key, token: key.token, fp: key.fingerprint, count: rows.length, ttl: key.ttl },
        );
  // A slot's first request always writes its record (its token is new), so it inserts unguarded;
  // a user's key may be taken already, and any resend must prove its first request did not apply.
  const build = (guarded: boolean) =>
    plan(
      [
        // An expired key may be used again; a few other expired keys are collected on the way.
        [
          "expired",
          key.kind === "user"
            ? stmt(`DELETE FROM tq_idempotency WHERE key = :key AND expires_at < ${NOW}`, id)
            : undefined,
        ],
        [
          "collectedKeys",
          key.kind === "user"
            ? stmt(`DELETE FROM tq_idempotency WHERE key IN (
  SELECT key FROM tq_idempotency WHERE expires_at < ${NOW} ORDER BY expires_at LIMIT 8)`)
            : undefined,
        ],
        ["record", record],
        // Now and then, the slots of processes gone for a day.
        [
          "collectedSlots",
          key.kind === "slot" && key.collect ? stmt(`DELETE FROM tq_publishers WHERE at < ${NOW} - 86400`) : undefined,
        ],
        [
          "inserted",
          guarded
            ? stmt(
                `INSERT INTO messages (${msgColumns}) SELECT ${selectMsg} FROM (VALUES ${msgValues}) WHERE ${mine} RETURNING seq`,
                { ...msgArgs, ...id, token: key.token },
              )
            : stmt(`INSERT INTO messages (${msgColumns}) VALUES ${msgValues} RETURNING seq`, msgArgs),
        ],
        // A resend after the group emptied must not leave an empty group row.
        [
          "groups",
          guarded
            ? stmt(
                `INSERT OR IGNORE INTO groups (${grpColumns}) SELECT ${selectGrp} FROM (VALUES ${grpValues}) AS v
  WHERE EXISTS (SELECT 1 FROM messages m WHERE m.group_id = v.column1)`,
                grpArgs,
              )
            : stmt(`INSERT OR IGNORE INTO groups (${grpColumns}) VALUES ${grpValues}`, grpArgs),
        ],
        [
          "state",
          guarded
            ? stmt(
                `SELECT token, first_seq, count${key.kind === "user" ? ", fingerprint" : ""} FROM ${table} WHERE ${where}`,
                id,
              )
            : undefined,
        ],
      ],
      (r) => {
        const inserted = seqsOf(r.inserted).sort((a, b) => a - b);
        if (inserted.length > 0) return inserted;
        const state = rowsOf(r.state)[0];
        if (!state) throw new QueueError("DATABASE", "publish: the idempotency record is missing");
        const sameRequest =
          key.kind === "slot"
            ? state.token === key.token
            : state.fingerprint === key.fingerprint && Number(state.count) === rows.length;
        if (!sameRequest) {
          if (key.kind === "slot") throw new QueueError("DATABASE", "publish: the publisher slot was taken over");
          throw new QueueError(
            "IDEMPOTENCY_CONFLICT",
            "idempotencyKey: this key was already used for a different request",
            {
              field: "idempotencyKey",
            },
          );
        }
        return range(Number(state.first_seq), rows.length);
      },
    );
  return key.kind === "slot" ? { ...build(false), resend: build(true) } : build(true);
}

// ---------------------------------------------------------------------------------------------
// claim

export interface ClaimArgs {
  /** This claim's fencing token (32 hex). */
  token: string;
  worker: string;
  visibility: number;
  /** How many leases, in distinct groups. */
  n: number;
  minPriority: number;
  maxAttempts: number;
  /** A value no lease expiry can take, unique to this claim: marks its poison messages. */
  marker: number;
}

export interface ClaimResult<E> {
  leases: Lease<E>[];
  /** Messages this claim moved to the dead letters instead of leasing (it claims again for them). */
  deadLettered: number;
}

/**
 * A claim's round-robin stamp: the database clock, but never at or below the newest stamp among
 * groups free to claim (one row from the end of `tq_groups_free`). The clock ticks in
 * milliseconds; in-process claims can come several to a millisecond, and a tie would send the
 * next claim back to the group created first instead of the one served longest ago. Evaluated
 * only when a claim takes something.
 */
const STAMP = `max(${NOW}, coalesce((SELECT max(last_claimed_at) FROM groups WHERE tq_busy IS NULL), 0) + 0.000001)`;

/**
 * The spec's claim, reshaped so that its cost follows what it takes, not what is in flight:
 * groups with nothing in flight are walked in round-robin order on the free index (never-claimed
 * first, ties by creation), and groups held by a lease or park that has ended are found on the
 * lock index (oldest first); of both, the first `n` go. Each group's first message is its head:
 * taken if free or lapsed. One statement leases them all (the `tq_messages_leased` trigger stamps
 * and hides their groups); the stamps grow by a microsecond per pick, so `n` leases in one claim
 * line up as `n` single claims would.
 *
 * A head past its attempts is not leased but marked with the claim's negative marker (never a
 * lease expiry), then moved to the dead letters by the two statements after.
 */
function claimText(single: boolean, guard: string): string {
  const pick = `SELECT head, lca, rid FROM (
    SELECT * FROM (
      SELECT g.rowid AS rid, g.last_claimed_at AS lca,
             (SELECT CASE WHEN m.locked_by IS NULL OR m.lock_expiry < ${NOW} THEN m.seq END
                FROM messages m WHERE m.group_id = g.group_id ORDER BY m.seq LIMIT 1) AS head
        FROM groups g
       WHERE g.tq_busy IS NULL AND g.priority >= :min AND head IS NOT NULL
       ORDER BY g.last_claimed_at, g.rowid LIMIT :n)
    UNION ALL
    SELECT * FROM (
      SELECT g.rowid AS rid, g.last_claimed_at AS lca, m.seq AS head
        FROM messages m JOIN groups g ON g.group_id = m.group_id
       WHERE m.locked_by IS NOT NULL AND m.lock_expiry < ${NOW}
         AND g.tq_busy IS NOT NULL AND g.priority >= :min
         AND m.seq = (SELECT f.seq FROM messages f WHERE f.group_id = m.group_id ORDER BY f.seq LIMIT 1)
       ORDER BY m.lock_expiry LIMIT :n))
   WHERE ${guard}
   ORDER BY lca, rid LIMIT :n`;
  const set = (stamp: string) => `UPDATE messages
   SET locked_by   = CASE WHEN coalesce(tq_attempts, 0) < :max THEN :worker ELSE '__dead__' END,
       lock_expiry = CASE WHEN coalesce(tq_attempts, 0) < :max THEN ${NOW} + :vis ELSE :marker END,
       tq_lease = :token || '|' || :worker,
       tq_attempts = coalesce(tq_attempts, 0) + 1,
       tq_claimed_at = ${stamp}`;
  const returning =
    "RETURNING seq, group_id, event, locked_by, lock_expiry, tq_attempts AS attempts, tq_claimed_at AS stamp";
  // One lease (the usual claim): a scalar pick, the cheapest form in rows read.
  return single
    ? `${set(STAMP)}\n WHERE seq = (SELECT head FROM (${pick}))\n${returning}`
    : `WITH pick AS (${pick})
${set("p.stamp")}
  FROM (SELECT head, ${STAMP} + (row_number() OVER (ORDER BY lca, rid) - 1) * 0.000001 AS stamp FROM pick) AS p
 WHERE messages.seq = p.head
${returning}`;
}

/** The claim's text for one lease or several, first request or resend: built once each. */
const claimTexts = new Map<string, string>();

function claimStatement(a: ClaimArgs, guard: string): InStatement {
  const cacheKey = `${a.n === 1}${guard}`;
  let text = claimTexts.get(cacheKey);
  if (text === undefined) {
    text = claimText(a.n === 1, guard);
    claimTexts.set(cacheKey, text);
  }
  return stmt(text, {
    n: a.n,
    min: a.minPriority,
    max: a.maxAttempts,
    worker: a.worker,
    vis: a.visibility,
    marker: a.marker,
    token: a.token,
  });
}

/** A resend must not lease more under one token: the leases of this token that are still live. */
const OWN_LEASES = `messages WHERE locked_by IS NOT NULL AND lock_expiry >= ${NOW} AND tq_lease = :token || '|' || locked_by`;

const poisoned = (r: { leased?: ResultSet }) => rowsOf(r.leased).some((row) => row.locked_by === "__dead__");

export function claimPlan<E>(a: ClaimArgs): Plan<ClaimResult<E>> {
  const build = (resend: boolean) =>
    plan(
      [
        [
          "earlier",
          resend
            ? stmt(
                `SELECT seq, group_id, event, locked_by, lock_expiry, tq_attempts AS attempts, tq_claimed_at AS stamp FROM ${OWN_LEASES}`,
                { token: a.token },
              )
            : undefined,
        ],
        ["leased", claimStatement(a, resend ? `NOT EXISTS (SELECT 1 FROM ${OWN_LEASES})` : "true")],
        [
          "dead",
          a.maxAttempts < UNLIMITED
            ? stmt(
                `INSERT INTO tq_dead_letters (seq, group_id, event, priority, attempts, reason, dead_at)
SELECT m.seq, m.group_id, m.event, coalesce(g.priority, 0), m.tq_attempts - 1, 'max_attempts', ${NOW}
  FROM messages m LEFT JOIN groups g ON g.group_id = m.group_id
 WHERE m.locked_by IS NOT NULL AND m.lock_expiry = :marker
ON CONFLICT (seq) DO NOTHING`,
                { marker: a.marker },
              )
            : undefined,
          poisoned,
        ],
        [
          "removed",
          a.maxAttempts < UNLIMITED
            ? stmt("DELETE FROM messages WHERE locked_by IS NOT NULL AND lock_expiry = :marker", { marker: a.marker })
            : undefined,
          poisoned,
        ],
      ],
      (r) => {
        const rows = [...rowsOf(r.earlier), ...rowsOf(r.leased)];
        const live = rows.filter((row) => row.locked_by === a.worker);
        live.sort((x, y) => Number(x.stamp) - Number(y.stamp));
        return {
          leases: live.map((row) => toLease<E>(row, a.token, a.worker)),
          deadLettered: rows.length - live.length,
        };
      },
    );
  return { ...build(false), resend: build(true) };
}

function toLease<E>(row: Row, token: string, workerId: string): Lease<E> {
  const seq = Number(row.seq);
  return {
    id: leaseIdOf({ seq, token }),
    seq,
    groupId: String(row.group_id),
    event: JSON.parse(String(row.event)) as E,
    workerId,
    expiresAt: Number(row.lock_expiry),
    attempts: Number(row.attempts),
  };
}

// ---------------------------------------------------------------------------------------------
// ack / nack / extend: each applies only while the lease is still the caller's (fencing).

const PRESENT = "EXISTS (SELECT 1 FROM messages WHERE seq = :seq) AS present";

/** Deletes the message (the trigger then frees or deletes its group). */
export function ackPlan(l: LeaseRef): Plan<void> {
  const args = { seq: l.seq, token: l.token };
  return plan(
    [
      ["acked", stmt(`DELETE FROM messages WHERE seq = :seq AND ${FENCE} RETURNING seq`, args)],
      ["state", stmt(`SELECT ${PRESENT}`, { seq: l.seq }), (r) => rowsOf(r.acked).length === 0],
    ],
    (r, retried) => {
      if (rowsOf(r.acked).length > 0) return;
      const present = flag(r.state, "present");
      // Gone after a retry: our first attempt applied and only its answer was lost.
      if (!present && retried) return;
      throw leaseError(present, l);
    },
  );
}

/**
 * delay > 0 parks the message (its group stays held) until now + delay; 0 frees it. A message that
 * has used its attempts moves to the dead letters instead.
 */
export function nackPlan(l: LeaseRef, delay: number, maxAttempts: number): Plan<NackResult> {
  const args = { seq: l.seq, token: l.token };
  const limited = maxAttempts < UNLIMITED;
  return plan(
    [
      [
        "dead",
        limited
          ? stmt(
              `INSERT INTO tq_dead_letters (seq, group_id, event, priority, attempts, reason, dead_at)
SELECT m.seq, m.group_id, m.event, coalesce(g.priority, 0), m.tq_attempts, 'max_attempts', ${NOW}
  FROM messages m LEFT JOIN groups g ON g.group_id = m.group_id
 WHERE m.seq = :seq AND m.tq_lease = :token || '|' || m.locked_by AND m.tq_attempts >= :max
ON CONFLICT (seq) DO NOTHING`,
              { ...args, max: maxAttempts },
            )
          : undefined,
      ],
      [
        "removed",
        limited
          ? stmt(
              `DELETE FROM messages WHERE seq = :seq AND ${FENCE}
   AND EXISTS (SELECT 1 FROM tq_dead_letters WHERE seq = :seq) RETURNING seq`,
              args,
            )
          : undefined,
      ],
      [
        "released",
        stmt(
          `UPDATE messages
   SET locked_by   = CASE WHEN :delay > 0 THEN '__parked__' END,
       lock_expiry = CASE WHEN :delay > 0 THEN ${NOW} + :delay END
 WHERE seq = :seq AND ${FENCE} RETURNING seq`,
          { ...args, delay },
        ),
      ],
      [
        "state",
        stmt(
          `SELECT ${PRESENT},
       EXISTS (SELECT 1 FROM messages WHERE seq = :seq AND substr(tq_lease, 1, 32) = :token) AS ours,
       EXISTS (SELECT 1 FROM tq_dead_letters WHERE seq = :seq) AS dead`,
          args,
        ),
      ],
    ],
    (r, retried) => {
      if (rowsOf(r.removed).length > 0) return { deadLettered: true };
      if (rowsOf(r.released).length > 0) return { deadLettered: false };
      const present = flag(r.state, "present");
      if (retried && flag(r.state, "dead")) return { deadLettered: true };
      if (retried && present && flag(r.state, "ours")) return { deadLettered: false };
      throw leaseError(present, l);
    },
  );
}

/**
 * Gives a lease back as if it had not been delivered: the message is free again at once and the
 * attempt its claim counted is taken back (the group keeps the claim's round-robin stamp).
 */
export function releasePlan(l: LeaseRef): Plan<void> {
  const args = { seq: l.seq, token: l.token };
  return plan(
    [
      [
        "released",
        stmt(
          `UPDATE messages SET locked_by = NULL, lock_expiry = NULL, tq_attempts = max(coalesce(tq_attempts, 1) - 1, 0)
 WHERE seq = :seq AND ${FENCE} RETURNING seq`,
          args,
        ),
      ],
      [
        "state",
        stmt(
          `SELECT ${PRESENT},
       EXISTS (SELECT 1 FROM messages WHERE seq = :seq AND substr(tq_lease, 1, 32) = :token AND locked_by IS NULL) AS ours`,
          args,
        ),
        (r) => rowsOf(r.released).length === 0,
      ],
    ],
    (r, retried) => {
      if (rowsOf(r.released).length > 0) return;
      const present = flag(r.state, "present");
      if (retried && (!present || flag(r.state, "ours"))) return;
      throw leaseError(present, l);
    },
  );
}

/** Heartbeat: the lease now ends `visibility` seconds from now. Answers the new expiry. */
export function extendPlan(l: LeaseRef, visibility: number): Plan<number> {
  const args = { seq: l.seq, token: l.token, vis: visibility };
  return plan(
    [
      [
        "extended",
        stmt(
          `UPDATE messages SET lock_expiry = ${NOW} + :vis WHERE seq = :seq AND ${FENCE} RETURNING lock_expiry`,
          args,
        ),
      ],
      ["state", stmt(`SELECT ${PRESENT}`, { seq: l.seq })],
    ],
    (r) => {
      const row = rowsOf(r.extended)[0];
      if (row) return Number(row.lock_expiry);
      throw leaseError(flag(r.state, "present"), l);
    },
  );
}

// ---------------------------------------------------------------------------------------------
// dead letters

export function deadLettersPlan<E>(groupId: string | null, afterSeq: number, limit: number): Plan<DeadLetter<E>[]> {
  return plan(
    [
      [
        "page",
        stmt(
          `SELECT seq, group_id, event, priority, attempts, reason, dead_at FROM tq_dead_letters
 WHERE seq > :after AND (:group IS NULL OR group_id = :group) ORDER BY seq LIMIT :limit`,
          { after: afterSeq, group: groupId, limit },
        ),
      ],
    ],
    (r) =>
      rowsOf(r.page).map((row) => ({
        seq: Number(row.seq),
        groupId: String(row.group_id),
        event: JSON.parse(String(row.event)) as E,
        priority: Number(row.priority),
        attempts: Number(row.attempts),
        reason: String(row.reason),
        deadAt: Number(row.dead_at),
      })),
  );
}

/** Puts a dead letter back at the tail of its group, with a fresh attempt count. Answers its new seq. */
export function redrivePlan(seq: number): Plan<number> {
  const args = { seq };
  return plan(
    [
      [
        "inserted",
        stmt(
          "INSERT INTO messages (group_id, event) SELECT group_id, event FROM tq_dead_letters WHERE seq = :seq RETURNING seq",
          args,
        ),
      ],
      [
        "group",
        stmt(
          "INSERT OR IGNORE INTO groups (group_id, priority) SELECT group_id, priority FROM tq_dead_letters WHERE seq = :seq",
          args,
        ),
      ],
      ["removed", stmt("DELETE FROM tq_dead_letters WHERE seq = :seq", args)],
    ],
    (r) => {
      const row = rowsOf(r.inserted)[0];
      if (!row) throw new QueueError("LEASE_NOT_FOUND", `seq: no dead letter ${seq}`, { field: "seq" });
      return Number(row.seq);
    },
  );
}

/** Drops a dead letter for good; false when there was none. */
export function deleteDeadLetterPlan(seq: number): Plan<boolean> {
  return plan(
    [["removed", stmt("DELETE FROM tq_dead_letters WHERE seq = :seq RETURNING seq", { seq })]],
    (r) => rowsOf(r.removed).length > 0,
  );
}

// ---------------------------------------------------------------------------------------------
// stats

/**
 * Counts from the table sizes (a b-tree count, not a scan) and one walk of the live locks on the
 * lock index: the cost follows what is in flight, not the depth.
 */
export function statsPlan(): Plan<QueueStats> {
  return plan(
    [
      [
        "counts",
        stmt(`SELECT
  (SELECT count(*) FROM messages) AS total,
  (SELECT count(*) FROM groups) AS groups,
  (SELECT count(*) FROM tq_dead_letters) AS dead_letters,
  live.in_flight, live.parked, live.delayed, live.held_groups,
  ${NOW} AS now
FROM (SELECT coalesce(sum(locked_by NOT IN ('__parked__', '__delayed__')), 0) AS in_flight,
             coalesce(sum(locked_by = '__parked__'), 0) AS parked,
             coalesce(sum(locked_by = '__delayed__'), 0) AS delayed,
             -- a group is held when its first message is locked (a delayed one may sit further back)
             count(DISTINCT CASE WHEN seq = (SELECT f.seq FROM messages f WHERE f.group_id = m.group_id
                                              ORDER BY f.seq LIMIT 1) THEN group_id END) AS held_groups
        FROM messages m WHERE locked_by IS NOT NULL AND lock_expiry >= ${NOW}) AS live`),
      ],
    ],
    (r) => {
      const row = rowsOf(r.counts)[0] as Row;
      const total = Number(row.total);
      const groups = Number(row.groups);
      const inFlight = Number(row.in_flight);
      const parked = Number(row.parked);
      const delayed = Number(row.delayed);
      const ready = Math.max(0, groups - Number(row.held_groups));
      return {
        ready,
        waiting: Math.max(0, total - inFlight - parked - delayed - ready),
        inFlight,
        parked,
        delayed,
        groups,
        deadLetters: Number(row.dead_letters),
        now: Number(row.now),
      };
    },
  );
}

/** Most messages `groups()` counts in one group (so that listing groups never reads a deep one whole). */
export const GROUP_COUNT_CAP = 1000;

/**
 * Groups worth watching, without reading the queue: those whose first message is locked (leased,
 * parked or delayed; newest lock first, from the lock index), then the next ones in round-robin
 * order (from the free index); each with its messages counted up to GROUP_COUNT_CAP. At most
 * `limit` × (GROUP_COUNT_CAP + a few) rows read.
 */
export function groupsPlan(limit: number): Plan<GroupInfo[]> {
  return plan(
    [
      [
        "groups",
        stmt(
          `WITH picked AS (
  SELECT * FROM (
    SELECT m.group_id, 0 AS part, -m.lock_expiry AS ord, 0 AS rid FROM messages m
     WHERE m.locked_by IS NOT NULL AND m.lock_expiry >= ${NOW}
       AND m.seq = (SELECT f.seq FROM messages f WHERE f.group_id = m.group_id ORDER BY f.seq LIMIT 1)
     ORDER BY m.lock_expiry DESC LIMIT :limit)
  UNION ALL
  SELECT * FROM (
    SELECT g.group_id, 1 AS part, g.last_claimed_at AS ord, g.rowid AS rid FROM groups g
     WHERE g.tq_busy IS NULL ORDER BY g.last_claimed_at, g.rowid LIMIT :limit))
SELECT p.group_id, coalesce(g.priority, 0) AS priority, coalesce(g.last_claimed_at, 0) AS last_claimed_at,
       (SELECT count(*) FROM (SELECT 1 FROM messages c WHERE c.group_id = p.group_id LIMIT ${GROUP_COUNT_CAP})) AS messages,
       h.locked_by AS holder, h.lock_expiry >= ${NOW} AS live
  FROM (SELECT group_id, min(part) AS part, min(ord) AS ord, min(rid) AS rid FROM picked GROUP BY group_id) AS p
  LEFT JOIN groups g ON g.group_id = p.group_id
  LEFT JOIN messages h ON h.seq = (SELECT f.seq FROM messages f WHERE f.group_id = p.group_id ORDER BY f.seq LIMIT 1)
 ORDER BY p.part, p.ord, p.rid
 LIMIT :limit`,
          { limit },
        ),
      ],
    ],
    (r) =>
      rowsOf(r.groups).map((row) => {
        const holder = row.holder === null ? null : String(row.holder);
        const live = Number(row.live) === 1;
        return {
          groupId: String(row.group_id),
          messages: Number(row.messages),
          priority: Number(row.priority),
          inFlight: live && holder !== null && holder !== "__parked__" && holder !== "__delayed__",
          parked: live && (holder === "__parked__" || holder === "__delayed__"),
          lastClaimedAt: Number(row.last_claimed_at),
        };
      }),
  );
}

/**
 * When something held by time may become deliverable: the earliest lease expiry, park end or
 * delayed message's time still ahead (epoch seconds, database clock), and the database's now.
 */
export function nextDuePlan(): Plan<{ next: number | null; now: number }> {
  return plan(
    [
      [
        "next",
        stmt(`SELECT (SELECT min(lock_expiry) FROM messages WHERE locked_by IS NOT NULL AND lock_expiry >= ${NOW}) AS next,
       ${NOW} AS now`),
      ],
    ],
    (r) => {
      const row = rowsOf(r.next)[0] as Row;
      return { next: row.next === null ? null : Number(row.next), now: Number(row.now) };
    },
  );
}
