/**
 * Publishing: messages into their groups, with the key that makes a resend safe (the library's own
 * publisher slot, or the user's idempotency key).
 */
import type { ResultSet } from "@libsql/client";
import { DELAYED } from "../../rules.js";
import { idempotencyConflict, QueueError } from "../errors.js";
import { type Args, NOW, type Plan, plan, rowsOf, stmt } from "./plan.js";
import { FLOW_ON, HELD, newGroupState, newGroupTat, newGroupUntil, unlessFlowOn, wakeGroupsStmt } from "./settings.js";

const NEXT_SEQ = "coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'messages'), 0) + 1";

export interface PublishRow {
  groupId: string;
  event: string;
  priority: number;
  /** Seconds before it may be delivered (0: now). */
  delay: number;
  /** The W3C trace context it was published in, for its consumer's span (src/core/telemetry.ts). */
  traceparent?: string | undefined;
}

/** A singleton publish (one message alone): its key, and whether it replaces the waiting message's event. */
export interface Singleton {
  key: string;
  replace: boolean;
}

/** What a publish stored. */
export interface Published {
  seqs: number[];
  /** Flow settings are in force in this database (the library then wakes the groups it published into). */
  flow: boolean;
  /** A singleton publish found a waiting message with its key (and replaced its event, if asked). */
  deduplicated?: boolean;
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
  // Every message carries its publish time (for its age: stats' oldest_age); a traced one the trace
  // context it was published in (for its consumer's span). Columns in the row the insert writes anyway.
  const traced = rows.some((r) => r.traceparent !== undefined);
  const msgArgs: Args = {};
  const grpArgs: Args = {};
  const msg: string[] = [];
  const grp: string[] = [];
  rows.forEach((r, i) => {
    msgArgs[`g${i}`] = r.groupId;
    msgArgs[`e${i}`] = r.event;
    grpArgs[`g${i}`] = r.groupId;
    grpArgs[`p${i}`] = r.priority;
    const values = [`:g${i}`, `:e${i}`, NOW];
    if (delayed) {
      msgArgs[`d${i}`] = r.delay;
      grpArgs[`d${i}`] = r.delay;
      values.push(`CASE WHEN :d${i} > 0 THEN '${DELAYED}' END`, `CASE WHEN :d${i} > 0 THEN ${NOW} + :d${i} END`);
    }
    grp.push(delayed ? `(:g${i}, :p${i}, :d${i})` : `(:g${i}, :p${i})`);
    if (traced) {
      msgArgs[`t${i}`] = r.traceparent ?? null;
      values.push(`:t${i}`);
    }
    msg.push(`(${values.join(", ")})`);
  });
  const msgColumns = [
    "group_id, event, tq_published_at",
    ...(delayed ? ["locked_by, lock_expiry"] : []),
    ...(traced ? ["tq_trace"] : []),
  ].join(", ");
  // A group row made by this publish starts in its state (a delay holds it; flow settings may pause
  // or rate-hold it, and it takes back the rate's pace it kept while gone). The state's expressions
  // are written once over the rows, not once per row, and only where flow settings may be in force
  // (`flow`): a statement's size is what the database parses and plans on every batch. Without
  // them, a delay alone decides, and a group made meanwhile has no pace for a rate set later.
  const d = delayed ? "v.column3 > 0" : "0";
  const groupsInsert = (flow: boolean, where = "") =>
    flow
      ? `INSERT OR IGNORE INTO groups (group_id, priority, tq_busy, tq_tat, tq_until)
  SELECT v.column1, v.column2, ${newGroupState("v.column1", d)}, ${newGroupTat("v.column1")}, ${newGroupUntil("v.column1", d)}
  FROM (VALUES ${grp.join(", ")}) AS v${where}`
      : where === "" && !delayed
        ? `INSERT OR IGNORE INTO groups (group_id, priority) VALUES ${grp.join(", ")}`
        : `INSERT OR IGNORE INTO groups (group_id, priority, tq_busy)
  SELECT v.column1, v.column2, ${delayed ? `CASE WHEN ${d} THEN ${HELD} END` : "NULL"} FROM (VALUES ${grp.join(", ")}) AS v${where}`;
  const columnsOf = (list: string) =>
    list
      .split(", ")
      .map((_, k) => `column${k + 1}`)
      .join(", ");
  return {
    msgArgs,
    grpArgs,
    msgColumns,
    selectMsg: columnsOf(msgColumns),
    msgValues: msg.join(", "),
    groupsInsert,
  };
}

/** The key `:key`, if it expired: it may be used again. */
const EXPIRED_KEY = `DELETE FROM tq_idempotency WHERE key = :key AND expires_at < ${NOW}`;
/** A few expired user keys, collected by each keyed write on the way (the table stays as small as the window). */
const COLLECT_EXPIRED_KEYS = `DELETE FROM tq_idempotency WHERE key IN (
  SELECT key FROM tq_idempotency WHERE expires_at < ${NOW} ORDER BY expires_at LIMIT 8)`;

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
 *
 * A singleton publish (one message) inserts nothing while a message with its key waits unclaimed
 * (the unique index `tq_messages_singleton` decides, whoever publishes at once): it answers that
 * message, whose event it replaces if asked. Its key's record then names that message (`count` 0).
 *
 * `flow`: flow settings were in force at the last write (the transport remembers): the batch also
 * gives the groups it published into back to claims when their window gained a free message.
 * Without it, the group rows are written as no flow setting asks, and the batch fails (`flowTurnedOn`)
 * if one is in force after all: the caller sends it again with `flow`.
 */
export function publishPlan(
  rows: PublishRow[],
  key: PublishKey,
  o: { singleton?: Singleton | undefined; flow?: boolean } = {},
): Plan<Published> {
  const { msgArgs, grpArgs, msgColumns, selectMsg, msgValues, groupsInsert } = valuesOf(rows);
  const single = o.singleton;
  const sArgs: Args = single ? { sk: single.key } : {};
  const columns = single ? `${msgColumns}, tq_singleton` : msgColumns;
  const values = single ? msgValues.replace(/\)$/, ", :sk)") : msgValues;
  const selected = single ? `${selectMsg}, column${columns.split(", ").length}` : selectMsg;
  const conflict = single
    ? ` ON CONFLICT (tq_singleton) WHERE tq_singleton IS NOT NULL AND tq_attempts IS NULL DO ${
        single.replace ? "UPDATE SET event = excluded.event, tq_trace = excluded.tq_trace" : "NOTHING"
      }`
    : "";
  const returning = `RETURNING seq, ${o.flow ? FLOW_ON : unlessFlowOn("0")} AS flow`;
  const waiting = "SELECT seq FROM messages WHERE tq_singleton = :sk AND tq_attempts IS NULL";
  const wake = o.flow ? wakeGroupsStmt([...new Set(rows.map((r) => r.groupId))]) : undefined;
  // A group row only where a message of it is now stored (a singleton may store none).
  const guardedGroups = stmt(
    groupsInsert(o.flow === true, " WHERE EXISTS (SELECT 1 FROM messages m WHERE m.group_id = v.column1)"),
    grpArgs,
  );
  const groups = stmt(groupsInsert(o.flow === true), grpArgs);
  const flowOf = (r: { inserted?: ResultSet }) => rowsOf(r.inserted).some((row) => Number(row.flow) === 1);
  if (key.kind === "none") {
    return plan(
      [
        ["before", single ? stmt(`SELECT (${waiting}) AS seq, 1 AS mine`, sArgs) : undefined],
        [
          "inserted",
          stmt(`INSERT INTO messages (${columns}) VALUES ${values}${conflict} ${returning}`, { ...msgArgs, ...sArgs }),
        ],
        ["groups", single ? guardedGroups : groups],
        ["wake", wake],
      ],
      (r) => {
        const before = rowsOf(r.before)[0]?.seq;
        if (single && before != null) return { seqs: [Number(before)], flow: flowOf(r), deduplicated: true };
        return {
          seqs: seqsOf(r.inserted).sort((a, b) => a - b),
          flow: flowOf(r),
          ...(single ? { deduplicated: false } : {}),
        };
      },
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
        ["expired", key.kind === "user" ? stmt(EXPIRED_KEY, id) : undefined],
        ["collectedKeys", key.kind === "user" ? stmt(COLLECT_EXPIRED_KEYS) : undefined],
        ["record", record],
        // Now and then, the slots of processes gone for a day.
        [
          "collectedSlots",
          key.kind === "slot" && key.collect ? stmt(`DELETE FROM tq_publishers WHERE at < ${NOW} - 86400`) : undefined,
        ],
        [
          "before",
          single
            ? stmt(`SELECT (${waiting}) AS seq, ${guarded ? mine : "1"} AS mine`, {
                ...sArgs,
                ...(guarded ? { ...id, token: key.token } : {}),
              })
            : undefined,
        ],
        [
          "inserted",
          guarded
            ? stmt(
                `INSERT INTO messages (${columns}) SELECT ${selected} FROM (VALUES ${values}) WHERE ${mine}${conflict} ${returning}`,
                { ...msgArgs, ...sArgs, ...id, token: key.token },
              )
            : stmt(`INSERT INTO messages (${columns}) VALUES ${values}${conflict} ${returning}`, {
                ...msgArgs,
                ...sArgs,
              }),
        ],
        // A resend after the group emptied must not leave an empty group row.
        ["groups", guarded || single ? guardedGroups : groups],
        ["wake", wake],
        // A singleton's record names the message it answers with (count 0: one it found waiting).
        [
          "answered",
          single
            ? stmt(
                `UPDATE ${table} SET count = CASE WHEN w.seq <> first_seq THEN 0 ELSE count END, first_seq = w.seq
  FROM (${waiting}) AS w WHERE ${where} AND token = :token`,
                { ...sArgs, ...id, token: key.token },
              )
            : undefined,
        ],
        [
          "state",
          guarded || single
            ? stmt(
                `SELECT token, first_seq, count${key.kind === "user" ? ", fingerprint" : ""} FROM ${table} WHERE ${where}`,
                id,
              )
            : undefined,
        ],
      ],
      (r) => {
        const flow = flowOf(r);
        const inserted = seqsOf(r.inserted).sort((a, b) => a - b);
        const before = rowsOf(r.before)[0];
        if (single && before !== undefined && Number(before.mine) === 1) {
          if (before.seq != null) return { seqs: [Number(before.seq)], flow, deduplicated: true };
          return { seqs: inserted, flow, deduplicated: false };
        }
        if (inserted.length > 0 && !single) return { seqs: inserted, flow };
        const state = rowsOf(r.state)[0];
        if (!state) throw new QueueError("DATABASE", "publish: the idempotency record is missing");
        const found = Number(state.count) === 0;
        const sameRequest =
          key.kind === "slot"
            ? state.token === key.token
            : state.fingerprint === key.fingerprint && (Number(state.count) === rows.length || (single && found));
        if (!sameRequest) {
          if (key.kind === "slot") throw new QueueError("DATABASE", "publish: the publisher slot was taken over");
          throw idempotencyConflict();
        }
        return {
          seqs: range(Number(state.first_seq), single ? 1 : rows.length),
          flow,
          ...(single ? { deduplicated: found } : {}),
        };
      },
    );
  return key.kind === "slot" ? { ...build(false), resend: build(true) } : build(true);
}

/**
 * Records a user's key for a request stored elsewhere (a sharded queue's batch, on its groups'
 * shards), unless the key is recorded already, and answers the record's token: this one's, or that
 * of the request recorded first, when it is the same request (the same fingerprint).
 * IDEMPOTENCY_CONFLICT when the key was used for another. The record is a row of `tq_idempotency`
 * with no messages of its own (`count` 0); it expires with the window, as a key on one database does.
 */
export function reserveKeyPlan(k: { key: string; token: string; fingerprint: string; ttl: number }): Plan<string> {
  const id = { key: k.key };
  return plan(
    [
      ["expired", stmt(EXPIRED_KEY, id)],
      ["collectedKeys", stmt(COLLECT_EXPIRED_KEYS)],
      [
        "record",
        stmt(
          `INSERT INTO tq_idempotency (key, token, fingerprint, first_seq, count, expires_at)
  VALUES (:key, :token, :fp, 0, 0, ${NOW} + :ttl) ON CONFLICT (key) DO NOTHING`,
          { ...id, token: k.token, fp: k.fingerprint, ttl: k.ttl },
        ),
      ],
      ["state", stmt("SELECT token, fingerprint FROM tq_idempotency WHERE key = :key", id)],
    ],
    (r) => {
      const state = rowsOf(r.state)[0];
      if (!state) throw new QueueError("DATABASE", "reserveKey: the idempotency record is missing");
      if (state.fingerprint !== k.fingerprint) throw idempotencyConflict();
      return String(state.token);
    },
  );
}

/** A publish's fingerprint, for its user key: the same request gives the same one. */
export async function fingerprintOf(rows: PublishRow[], singleton?: Singleton): Promise<string> {
  // A delay is part of the request (version 1's fingerprints, without one, still match), and so is a singleton.
  const list: unknown[] = rows.map((r) =>
    r.delay > 0 ? [r.groupId, r.event, r.priority, r.delay] : [r.groupId, r.event, r.priority],
  );
  const text = JSON.stringify(singleton === undefined ? list : [...list, [singleton.key, singleton.replace]]);
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (x) => x.toString(16).padStart(2, "0")).join("");
}
