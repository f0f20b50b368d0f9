/** Test helpers shared by the Node suites: targets (file, sqld), resets, and the invariant checker. */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@libsql/client";
import { expect, inject } from "vitest";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport, type TransportOptions } from "../../src/index.js";

export interface Target {
  name: string;
  open(options?: TransportOptions): Promise<LibsqlTransport>;
}

export function tempFile(name = "queue.db"): string {
  return join(mkdtempSync(join(tmpdir(), "turso-queue-test-")), name);
}

/** A fresh local file per call, and the project's shared sqld (reset before each open). */
export const targets: Target[] = [
  { name: "file", open: (o) => LibsqlTransport.create(`file:${tempFile()}`, o) },
  {
    name: "sqld",
    open: async (o) => {
      const t = await LibsqlTransport.create(inject("sqldUrl"), o);
      await resetDatabase(clientOf(t));
      return t;
    },
  },
];

const TABLES = [
  "messages",
  "groups",
  "tq_dead_letters",
  "tq_idempotency",
  "tq_publishers",
  "tq_subscriptions",
  "tq_queues",
  "tq_settings",
  "tq_group_settings",
  "tq_rates",
  "tq_schedules",
  "tq_shard",
];

/** Empties every queue table (the schema stays). Test files in a project run one at a time. */
export async function resetDatabase(client: Client): Promise<void> {
  await client.batch(
    [...TABLES.map((t) => `DELETE FROM ${t}`), "DELETE FROM sqlite_sequence WHERE name = 'messages'"],
    "write",
  );
}

/** A group's concurrency, as the claims read it (its own, the queue's, or 1), in SQL over `g`'s group_id. */
const CONCURRENCY = (gid: string) =>
  `coalesce((SELECT concurrency FROM tq_group_settings WHERE group_id = ${gid}),
            (SELECT concurrency FROM tq_settings WHERE id = 1), 1)`;
/** Message `m`'s place in its group (from 0). */
const PLACE = "(SELECT count(*) FROM messages f WHERE f.group_id = m.group_id AND f.seq < m.seq)";

/**
 * The queue's invariants, checked on the database itself:
 * every message has its group row; every group row has a message; no group holds more live
 * leases than its concurrency (1 unless flow settings say otherwise); no message is locked without
 * an expiry; a lease or park is only ever in its group's window, its first `concurrency` messages
 * (a delayed message may wait further back); a group is out of the round-robin index only for a
 * reason: held (no free message in its window), paused (its own pause), or waiting for its rate
 * (and only then with a time to come back).
 */
export async function checkInvariants(client: Client): Promise<void> {
  const q = async (sql: string) => (await client.execute(sql)).rows.map((r) => ({ ...r }));
  expect(
    await q("SELECT seq, group_id FROM messages WHERE group_id NOT IN (SELECT group_id FROM groups)"),
    "messages without a group row",
  ).toEqual([]);
  expect(
    await q("SELECT group_id FROM groups WHERE group_id NOT IN (SELECT group_id FROM messages)"),
    "empty group rows",
  ).toEqual([]);
  expect(
    await q(`SELECT group_id, count(*) AS live FROM messages
              WHERE locked_by IS NOT NULL AND locked_by NOT IN ('__delayed__', '__parked__')
                AND lock_expiry >= unixepoch('subsec')
              GROUP BY group_id HAVING count(*) > ${CONCURRENCY("messages.group_id")}`),
    "groups with more live leases than their concurrency",
  ).toEqual([]);
  expect(
    await q("SELECT seq FROM messages WHERE locked_by IS NOT NULL AND lock_expiry IS NULL"),
    "locked messages without an expiry",
  ).toEqual([]);
  expect(
    await q(`SELECT seq, group_id FROM messages m WHERE locked_by IS NOT NULL AND locked_by <> '__delayed__'
              AND ${PLACE} >= ${CONCURRENCY("m.group_id")}`),
    "leases or parks outside their group's window",
  ).toEqual([]);
  expect(
    await q(`SELECT group_id FROM groups g WHERE tq_busy = 1 AND EXISTS (
              SELECT 1 FROM messages m WHERE m.group_id = g.group_id AND m.locked_by IS NULL
                 AND ${PLACE} < ${CONCURRENCY("g.group_id")})`),
    "groups held out of the round-robin index with a free message in their window",
  ).toEqual([]);
  expect(
    await q(`SELECT group_id, tq_busy FROM groups g
              WHERE coalesce(tq_busy = 2, 0) <> coalesce((SELECT paused FROM tq_group_settings s WHERE s.group_id = g.group_id) = 1, 0)`),
    "groups paused without their pause, or their pause without being paused",
  ).toEqual([]);
  expect(
    await q(`SELECT group_id FROM groups WHERE coalesce(tq_busy = 4, 0) <> (tq_until IS NOT NULL)
              OR tq_busy NOT IN (1, 2, 4)`),
    "groups waiting for their rate without a time to come back, or in no known state",
  ).toEqual([]);
}
