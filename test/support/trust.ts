/** Helpers for the trust suites (test/trust): typed-error assertions, sleeps, counts, env knobs. */
import type { Client } from "@libsql/client";
import { expect } from "vitest";
import { QueueError, type QueueErrorCode } from "../../src/index.js";

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Awaits `p`, expects it to reject with a QueueError of `code`, and returns that error. */
export async function expectQueueError(p: Promise<unknown>, code: QueueErrorCode, field?: string): Promise<QueueError> {
  let err: unknown;
  try {
    await p;
  } catch (e) {
    err = e;
  }
  expect(err, `expected a QueueError ${code}, the call succeeded`).toBeDefined();
  expect(err, `expected a QueueError, got ${String(err)}`).toBeInstanceOf(QueueError);
  const q = err as QueueError;
  expect({ code: q.code, message: q.message }).toMatchObject({ code });
  if (field !== undefined) expect(q.field).toBe(field);
  return q;
}

/** Row counts of every queue table, read straight from the database. */
export async function tableCounts(client: Client): Promise<Record<string, number>> {
  const rs = await client.execute(`SELECT
    (SELECT count(*) FROM messages) AS messages,
    (SELECT count(*) FROM groups) AS groups,
    (SELECT count(*) FROM messages WHERE tq_lease IS NOT NULL) AS leased,
    (SELECT count(*) FROM tq_dead_letters) AS dead_letters,
    (SELECT count(*) FROM tq_idempotency) AS idempotency,
    (SELECT count(*) FROM tq_publishers) AS publishers`);
  const r = rs.rows[0] ?? {};
  return Object.fromEntries(Object.entries(r).map(([k, v]) => [k, Number(v)]));
}

/** An integer from the environment, or a default (so that `npm run test:soak` can scale a run up). */
export function envInt(name: string, fallback: number): number {
  const v = process.env[name];
  if (v === undefined || v === "") return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${v}`);
  return n;
}

/** Prints a figure line that docs/guarantees.md's "Figures" quote; vitest shows it with the test's output. */
export function report(what: string, figures: Record<string, unknown>): void {
  console.log(`[trust] ${what}: ${JSON.stringify(figures)}`);
}
