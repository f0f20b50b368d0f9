/**
 * A database made by version 1 (leases in tq_deliveries, every key in tq_idempotency) is migrated in
 * place the first time a version-2 transport opens it: its leases, parks, keys and dead letters
 * carry over, and nothing is delivered twice or out of order.
 */
import { type Client, createClient } from "@libsql/client";
import { describe, expect, inject, it } from "vitest";
import { type Database, sqldNamespaces } from "../../src/core/databases.js";
import { clientOf } from "../../src/core/internals.js";
import { QueueCatalog } from "../../src/core/queues.js";
import { migrationSteps, SCHEMA_VERSION } from "../../src/core/schema.js";
import { listSubscriptions, putSubscription } from "../../src/core/subscriptions.js";
import { type Lease, LibsqlTransport, type QueueError } from "../../src/index.js";
import { checkInvariants, tempFile } from "../support/db.js";
import { SCHEMA_V1 } from "../support/schema-v1.js";

const TOKEN = "0123456789abcdef0123456789abcdef";

/** A version-1 queue, written with version 1's own statements. */
async function makeV1(c: Client): Promise<void> {
  for (const s of SCHEMA_V1) await c.execute(s);
  const now = Date.now() / 1000;
  await c.batch(
    [
      // g: a message leased by worker "w" (lease `1.<TOKEN>`), and one behind it.
      "INSERT INTO messages (group_id, event, locked_by, lock_expiry) VALUES ('g', '\"g1\"', 'w', unixepoch('subsec') + 300)",
      "INSERT INTO messages (group_id, event) VALUES ('g', '\"g2\"')",
      // p: a parked message.
      "INSERT INTO messages (group_id, event, locked_by, lock_expiry) VALUES ('p', '\"p1\"', '__parked__', unixepoch('subsec') + 3600)",
      // f: a free message, delivered once before and released.
      "INSERT INTO messages (group_id, event) VALUES ('f', '\"f1\"')",
      "INSERT INTO groups (group_id, last_claimed_at, priority) VALUES ('g', 100, 0), ('p', 50, 0), ('f', 10, 2)",
      {
        sql: "INSERT INTO tq_deliveries (seq, lease_id, worker_id, attempts, claimed_at) VALUES (1, ?, 'w', 1, 100), (3, ?, 'old', 2, 50), (4, ?, 'old', 1, 10)",
        args: [`${TOKEN}-1`, `${"a".repeat(32)}-3`, `${"b".repeat(32)}-4`],
      },
      // A user's key (the answer of its publish was seq 2) and an automatic one.
      {
        sql: "INSERT INTO tq_idempotency (key, token, fingerprint, first_seq, count, expires_at) VALUES ('order-1', 't', ?, 2, 1, ?)",
        args: [await fingerprintOf("g", '"g2"', 0), now + 3600],
      },
      {
        sql: "INSERT INTO tq_idempotency (key, token, fingerprint, first_seq, count, expires_at) VALUES ('auto:x', 't', NULL, 4, 1, ?)",
        args: [now + 600],
      },
      "INSERT INTO tq_dead_letters (seq, group_id, event, priority, attempts, reason, dead_at) VALUES (99, 'd', '\"d1\"', 1, 5, 'max_attempts', 1)",
    ],
    "write",
  );
}

/** Version 1's (and 2's) request fingerprint for one message. */
async function fingerprintOf(groupId: string, event: string, priority: number): Promise<string> {
  const text = JSON.stringify([[groupId, event, priority]]);
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (x) => x.toString(16).padStart(2, "0")).join("");
}

const targets = [
  { name: "file", url: () => `file:${tempFile()}` },
  {
    name: "a fresh sqld database",
    url: () => inject("sqldUrl"),
    // The shared sqld already holds version 2: start from an empty database there.
    wipe: true,
  },
];

describe.each(targets)("migrating version 1 to version 2 on $name", (target) => {
  it("keeps live leases, parks, keys and dead letters, then serves in order", async () => {
    const url = target.url();
    const raw = createClient({ url });
    if (target.wipe) {
      for (const s of [
        "DROP TABLE IF EXISTS messages",
        "DROP TABLE IF EXISTS groups",
        "DROP TABLE IF EXISTS tq_deliveries",
        "DROP TABLE IF EXISTS tq_dead_letters",
        "DROP TABLE IF EXISTS tq_idempotency",
        "DROP TABLE IF EXISTS tq_publishers",
        "DROP TABLE IF EXISTS tq_meta",
        "DROP TABLE IF EXISTS tq_subscriptions",
        "DELETE FROM sqlite_sequence",
      ]) {
        await raw.execute(s).catch(() => undefined);
      }
    }
    await makeV1(raw);

    const t = await LibsqlTransport.create(url);
    const version = await raw.execute("SELECT value FROM tq_meta WHERE key = 'schema_version'");
    expect(Number(version.rows[0]?.value)).toBe(SCHEMA_VERSION);
    const tables = (await raw.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")).rows.map(
      (r) => r.name,
    );
    expect(tables).not.toContain("tq_deliveries");
    expect(tables).toContain("tq_subscriptions");
    await checkInvariants(clientOf(t));

    // The live lease of version 1 still holds its group, and its holder can still ack it.
    // The parked group stays parked; the free one (priority 2) is the only thing to claim.
    const f = (await t.claim("w2", 30)) as Lease<string>;
    expect(f.event).toBe("f1");
    expect(f.attempts).toBe(2); // delivered once under version 1
    expect(await t.claim("w2", 30)).toBeNull();
    await t.ack("1.0123456789abcdef0123456789abcdef");
    const g2 = (await t.claim("w2", 30)) as Lease<string>;
    expect(g2.event).toBe("g2");

    // The user's key still answers with its first seq; the same key for another request conflicts.
    expect(await t.publish("g", "g2", 0, { idempotencyKey: "order-1" })).toBe(2);
    const conflict = await t.publish("g", "other", 0, { idempotencyKey: "order-1" }).catch((e: unknown) => e);
    expect((conflict as QueueError).code).toBe("IDEMPOTENCY_CONFLICT");
    // The automatic key of version 1 is not carried over (it only guarded that version's own retries).
    expect((await raw.execute("SELECT count(*) AS n FROM tq_idempotency")).rows[0]?.n).toBe(1);

    expect((await t.deadLetters()).map((d) => d.event)).toEqual(["d1"]);
    expect(await t.stats()).toMatchObject({ inFlight: 2, parked: 1, groups: 3, deadLetters: 1 });
    await t.ack(g2);
    await t.ack(f);
    await checkInvariants(clientOf(t));

    // Opening it again does nothing more.
    const again = await LibsqlTransport.create(url);
    expect(await again.stats()).toMatchObject({ inFlight: 0, parked: 1, groups: 1 });
    again.close();
    t.close();
    raw.close();
  });
});

/** Takes version 8 (flow control) back out: its triggers, indexes, tables and columns. */
const UNDO_FLOW = [
  ...["tq_messages_deleted", "tq_messages_released", "tq_messages_leased"].map((t) => `DROP TRIGGER ${t}`),
  "DROP INDEX tq_groups_until",
  "DROP INDEX tq_messages_singleton",
  "DROP INDEX tq_schedules_next",
  ...["tq_settings", "tq_group_settings", "tq_rates", "tq_schedules"].map((t) => `DROP TABLE ${t}`),
  "ALTER TABLE groups DROP COLUMN tq_until",
  "ALTER TABLE groups DROP COLUMN tq_tat",
  "ALTER TABLE messages DROP COLUMN tq_singleton",
];

describe("migrating version 2 to the current version", () => {
  it("adds tq_subscriptions (and tq_queues) and keeps the queue as it was", async () => {
    const url = `file:${tempFile()}`;
    const raw = createClient({ url });
    // Version 2 is version 3 without tq_subscriptions; version 4 adds tq_queues, 5 two columns.
    await raw.batch(
      [
        ...migrationSteps(0, 8),
        ...UNDO_FLOW,
        "DROP TABLE tq_subscriptions",
        "DROP TABLE tq_queues",
        "ALTER TABLE messages DROP COLUMN tq_published_at",
        "ALTER TABLE messages DROP COLUMN tq_trace",
        "UPDATE tq_meta SET value = '2' WHERE key = 'schema_version'",
        "INSERT INTO messages (group_id, event) VALUES ('g', '\"g1\"'), ('g', '\"g2\"')",
        "INSERT INTO groups (group_id) VALUES ('g')",
      ],
      "write",
    );
    expect(migrationSteps(2).join("\n")).toContain("tq_subscriptions");

    const t = await LibsqlTransport.create(url);
    const version = await raw.execute("SELECT value FROM tq_meta WHERE key = 'schema_version'");
    expect(Number(version.rows[0]?.value)).toBe(SCHEMA_VERSION);
    expect(migrationSteps(3).join("\n")).toContain("tq_queues");
    const g1 = (await t.claim("w", 30)) as Lease<string>;
    expect(g1.event).toBe("g1");
    const s = await putSubscription(t, "orders", { url: "https://example.com/hook" });
    expect(s).toMatchObject({ name: "orders", minPriority: 0, maxInFlight: 10, visibility: 30 });
    expect(s.signingSecret).toMatch(/^[0-9a-f]{64}$/);
    await checkInvariants(clientOf(t));
    t.close();

    // Opening it again changes nothing, and an older transport's version stamp never lowers it.
    const again = await LibsqlTransport.create(url);
    expect((await listSubscriptions(again)).map((x) => x.name)).toEqual(["orders"]);
    again.close();
    raw.close();
  });
});

describe("migrating version 5's catalog (addresses kept in it) to the current version", () => {
  it("drops the stored addresses: each queue is found where the configuration says today", async () => {
    const url = `file:${tempFile()}`;
    const raw = createClient({ url });
    const run = Date.now().toString(36);
    // Version 5 kept each queue's databases in the catalog, here on a port nothing listens on any more.
    await raw.batch(
      [
        ...migrationSteps(0, 5),
        {
          sql: "INSERT INTO tq_queues VALUES (?, 1, ?, NULL, 1), (?, 2, ?, 'weur', 2)",
          args: [
            `emails-${run}`,
            JSON.stringify([{ url: "http://127.0.0.1:9", namespace: `emails-${run}` }]),
            `billing-${run}`,
            JSON.stringify([0, 1].map((i) => ({ url: "http://127.0.0.1:9", namespace: `billing-${run}--${i}` }))),
          ],
        },
      ],
      "write",
    );
    const home = await LibsqlTransport.create(url);
    const columns = (await raw.execute("SELECT name FROM pragma_table_info('tq_queues')")).rows.map((r) => r.name);
    expect(columns).toEqual(["name", "shards", "location_hint", "created_at"]);

    // Where the queues' databases are today: namespaces of the running sqld.
    const provider = sqldNamespaces({ url: inject("nsSqldUrl"), adminUrl: inject("nsAdminUrl") });
    const open = (db: Database) => LibsqlTransport.create(db.url, { namespace: db.namespace });
    const catalog = new QueueCatalog({ home, defaultDatabase: { url }, provider, open });
    for (const n of [`emails-${run}`, `billing-${run}--0`, `billing-${run}--1`]) await provider.create(n);
    const emails = await catalog.resolve(`emails-${run}`);
    expect(emails.databases).toEqual([{ url: inject("nsSqldUrl"), namespace: `emails-${run}` }]);
    const billing = await catalog.resolve(`billing-${run}`);
    expect(billing).toMatchObject({ shards: 2, locationHint: "weur" });
    expect(billing.databases.map((d) => [d.url, d.namespace])).toEqual(
      [0, 1].map((i) => [inject("nsSqldUrl"), `billing-${run}--${i}`]),
    );
    const t = await open(emails.databases[0] as Database);
    expect(await t.publish("g", "reachable")).toBe(1);
    expect((await catalog.listWithCounts()).find((q) => q.name === `emails-${run}`)?.stats).toMatchObject({ ready: 1 });
    t.close();
    home.close();
    raw.close();
  });
});
