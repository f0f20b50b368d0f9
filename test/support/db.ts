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
];

/** Empties every queue table (the schema stays). Test files in a project run one at a time. */
export async function resetDatabase(client: Client): Promise<void> {
  await client.batch(
    [...TABLES.map((t) => `DELETE FROM ${t}`), "DELETE FROM sqlite_sequence WHERE name = 'messages'"],
    "write",
  );
}

/**
 * The queue's invariants, checked on the database itself:
 * every message has its group row; every group row has a message; no group holds two live leases;
 * no message is locked without an expiry; a lease or park is only ever on its group's first message
 * (a delayed message may wait further back); no group
 * is out of the round-robin index (tq_busy) while its first message is free.
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
              WHERE locked_by IS NOT NULL AND locked_by <> '__delayed__' AND lock_expiry >= unixepoch('subsec')
              GROUP BY group_id HAVING count(*) > 1`),
    "groups with two live leases",
  ).toEqual([]);
  expect(
    await q("SELECT seq FROM messages WHERE locked_by IS NOT NULL AND lock_expiry IS NULL"),
    "locked messages without an expiry",
  ).toEqual([]);
  expect(
    await q(`SELECT seq, group_id FROM messages m WHERE locked_by IS NOT NULL AND locked_by <> '__delayed__'
              AND seq <> (SELECT min(seq) FROM messages f WHERE f.group_id = m.group_id)`),
    "leases or parks on a message that is not its group's first",
  ).toEqual([]);
  expect(
    await q(`SELECT group_id FROM groups g WHERE tq_busy IS NOT NULL
              AND (SELECT locked_by FROM messages m WHERE m.group_id = g.group_id ORDER BY seq LIMIT 1) IS NULL`),
    "groups held out of the round-robin index with a free first message",
  ).toEqual([]);
}
