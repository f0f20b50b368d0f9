/** Test helpers shared by the Node suites: targets (file, sqld), resets, and the invariant checker. */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@libsql/client";
import { expect, inject } from "vitest";
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
      await resetDatabase(t.client);
      return t;
    },
  },
];

const TABLES = ["messages", "groups", "tq_deliveries", "tq_dead_letters", "tq_idempotency"];

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
 * no message is locked without an expiry; no lease row outlives its message.
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
              WHERE locked_by IS NOT NULL AND lock_expiry >= unixepoch('subsec')
              GROUP BY group_id HAVING count(*) > 1`),
    "groups with two live leases",
  ).toEqual([]);
  expect(
    await q("SELECT seq FROM messages WHERE locked_by IS NOT NULL AND lock_expiry IS NULL"),
    "locked messages without an expiry",
  ).toEqual([]);
  expect(
    await q("SELECT seq FROM tq_deliveries WHERE seq NOT IN (SELECT seq FROM messages)"),
    "orphan lease rows",
  ).toEqual([]);
}
