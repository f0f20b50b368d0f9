/**
 * Keys made through the API (`tq_keys`) and the audit of `manage` actions (`tq_audit`), both in the
 * default queue's database. A key's row holds the SHA-256 of its secret, never the secret.
 */
import type { Scope } from "../../rules.js";
import type { ApiKey, AuditEntry } from "../types.js";
import { NOW, type Plan, plan, rowsOf, stmt } from "./plan.js";

/** A key as stored: as listed, and the hash the edge checks a secret against. */
export interface KeyRow extends ApiKey {
  /** Hex SHA-256 of the secret. */
  hash: string;
}

export type AuditRow = AuditEntry;

const COLUMNS = "id, name, hash, scopes, queues, created_at, created_by, expires_at, last_used_at";

const optional = (v: unknown) => (v === null || v === undefined ? undefined : Number(v));

function toKey(row: Record<string, unknown>): KeyRow {
  return {
    id: String(row.id),
    name: String(row.name),
    hash: String(row.hash),
    scopes: String(row.scopes).split(" ") as Scope[],
    queues: row.queues === null ? undefined : (JSON.parse(String(row.queues)) as string[]),
    createdAt: Number(row.created_at),
    createdBy: String(row.created_by),
    expiresAt: optional(row.expires_at),
    lastUsedAt: optional(row.last_used_at),
  };
}

/**
 * Adds a key unless `max` are held already (keys expired more than `expiredKeptSeconds` ago are
 * removed first); answers it as stored, or undefined when the limit refused it.
 */
export function addKeyPlan(
  k: { id: string; name: string; hash: string; scopes: Scope[]; queues: string[] | undefined; createdBy: string },
  expiresIn: number | undefined,
  limits: { max: number; expiredKeptSeconds: number },
): Plan<KeyRow | undefined> {
  return plan(
    [
      ["pruned", stmt(`DELETE FROM tq_keys WHERE expires_at < ${NOW} - :kept`, { kept: limits.expiredKeptSeconds })],
      [
        "added",
        stmt(
          `INSERT INTO tq_keys (${COLUMNS})
  SELECT :id, :name, :hash, :scopes, :queues, ${NOW}, :by, ${NOW} + :expires_in, NULL
   WHERE (SELECT count(*) FROM tq_keys) < :max
  ON CONFLICT (id) DO NOTHING`,
          {
            id: k.id,
            name: k.name,
            hash: k.hash,
            scopes: k.scopes.join(" "),
            queues: k.queues === undefined ? null : JSON.stringify(k.queues),
            by: k.createdBy,
            expires_in: expiresIn ?? null,
            max: limits.max,
          },
        ),
      ],
      // Read back, not RETURNING: a resend after a lost answer finds the row the first one added.
      ["row", stmt(`SELECT ${COLUMNS} FROM tq_keys WHERE id = :id`, { id: k.id })],
    ],
    (r) => {
      const row = rowsOf(r.row)[0];
      return row === undefined ? undefined : toKey(row as Record<string, unknown>);
    },
  );
}

/** Every key, oldest first. */
export function listKeysPlan(): Plan<KeyRow[]> {
  return plan([["rows", stmt(`SELECT ${COLUMNS} FROM tq_keys ORDER BY created_at, id`)]], (r) =>
    rowsOf(r.rows).map((row) => toKey(row as Record<string, unknown>)),
  );
}

/** Removes a key; false when there was none. */
export function revokeKeyPlan(id: string): Plan<boolean> {
  return plan(
    [["removed", stmt("DELETE FROM tq_keys WHERE id = :id RETURNING id", { id })]],
    (r) => rowsOf(r.removed).length > 0,
  );
}

/**
 * Stamps the keys `ids` as used now, each at most once per `precision` seconds (a key used all
 * day costs a row written per `precision`, not per request).
 */
export function markKeysUsedPlan(ids: string[], precision: number): Plan<void> {
  const list = ids.map((_, i) => `:k${i}`).join(", ");
  const args: Record<string, string | number> = { precision };
  ids.forEach((id, i) => {
    args[`k${i}`] = id;
  });
  return plan(
    [
      [
        "used",
        stmt(
          `UPDATE tq_keys SET last_used_at = ${NOW}
  WHERE id IN (${list}) AND (last_used_at IS NULL OR last_used_at < ${NOW} - :precision)`,
          args,
        ),
      ],
    ],
    () => undefined,
  );
}

/** Records an action, and forgets what is past the last `retention` entries. */
export function addAuditPlan(
  e: { keyId: string; action: string; queue: string | undefined; detail: Record<string, unknown> | undefined },
  retention: number,
): Plan<void> {
  return plan(
    [
      [
        "add",
        stmt(
          `INSERT INTO tq_audit (at, key_id, action, queue, detail) VALUES (${NOW}, :key, :action, :queue, :detail)`,
          {
            key: e.keyId,
            action: e.action,
            queue: e.queue ?? null,
            detail: e.detail === undefined ? null : JSON.stringify(e.detail),
          },
        ),
      ],
      ["trim", stmt("DELETE FROM tq_audit WHERE id <= (SELECT max(id) FROM tq_audit) - :retention", { retention })],
    ],
    () => undefined,
  );
}

/** A page of the audit, newest first: entries before `before` (an entry's id), at most `limit`. */
export function auditPagePlan(before: number | undefined, limit: number): Plan<AuditRow[]> {
  return plan(
    [
      [
        "rows",
        stmt(
          `SELECT id, at, key_id, action, queue, detail FROM tq_audit
  WHERE id < :before ORDER BY id DESC LIMIT :limit`,
          { before: before ?? Number.MAX_SAFE_INTEGER, limit },
        ),
      ],
    ],
    (r) =>
      rowsOf(r.rows).map((row) => ({
        id: Number(row.id),
        at: Number(row.at),
        keyId: String(row.key_id),
        action: String(row.action),
        queue: row.queue === null ? undefined : String(row.queue),
        detail: row.detail === null ? undefined : (JSON.parse(String(row.detail)) as Record<string, unknown>),
      })),
  );
}
