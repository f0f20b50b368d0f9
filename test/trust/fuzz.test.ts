/**
 * Property tests (fast-check) of every library call with random and hostile values: each bad value gets
 * a QueueError INVALID_ARGUMENT naming its `field`, nothing is stored, and the invariants hold; valid
 * odd values (SQL text, quotes, unicode, emoji, JSON edge cases) round-trip exactly.
 * Runs per property: TRUST_FUZZ_RUNS (default 60 on a file, a third of that on sqld).
 */

import { existsSync } from "node:fs";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientOf } from "../../src/core/internals.js";
import { type Lease, LibsqlTransport, MAX_CLAIM_BATCH, QueueError } from "../../src/index.js";
import { checkInvariants, resetDatabase, targets, tempFile } from "../support/db.js";
import { envInt, tableCounts } from "../support/trust.js";

const RUNS = envInt("TRUST_FUZZ_RUNS", 60);
const wellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

// ---------------------------------------------------------------------------------------------
// hostile values

const notAString = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0, null, undefined, true, false),
  fc.bigInt(),
  fc.constant(Symbol("s")),
  fc.constant(() => "fn"),
  fc.array(fc.string(), { maxLength: 3 }),
  fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }),
  fc.constant(new Date()),
  fc.constant(new String("boxed")),
);
const loneSurrogate = fc
  .tuple(fc.string(), fc.integer({ min: 0xd800, max: 0xdfff }), fc.string())
  .map(([a, s, b]) =>
    `${a}${String.fromCharCode(s)}${b.replace(/[\uD800-\uDFFF]/g, "")}`.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, "x"),
  );
const badId = fc
  .oneof(
    notAString,
    fc.constant(""),
    fc.integer({ min: 513, max: 5000 }).map((n) => "x".repeat(n)),
    fc.integer({ min: 200, max: 600 }).map((n) => "🙂".repeat(n)), // 2 code units each: > 512 from 257 on
    fc.tuple(fc.string(), fc.string()).map(([a, b]) => `${a}\u0000${b}`),
    loneSurrogate.filter((s) => s.length <= 512),
  )
  .filter((v) => !(typeof v === "string" && v.length > 0 && v.length <= 512 && !v.includes("\u0000") && wellFormed(v)));

const badSeconds = fc.oneof(
  fc.constantFrom(
    Number.NaN,
    Number.POSITIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
    0,
    -0,
    -1,
    -1e-9,
    366 * 24 * 3600 + 1,
    1e300,
  ),
  fc.double({ max: 0, noNaN: true }),
  fc.string(),
  fc.constantFrom(null, true, "10", [10], { s: 10 }),
  fc.bigInt({ min: 1n, max: 100n }),
);
const badPriority = fc.oneof(
  fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, -1, 5, 1.5, 4.0000001, -0.5, 1e9),
  fc.integer({ min: 5 }),
  fc.integer({ max: -1 }),
  fc.constantFrom(null, "1", true, [1], {}),
);
const badCount = (max: number) =>
  fc.oneof(
    fc.constantFrom(0, -1, max + 1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, null, "2", true),
    fc.integer({ min: max + 1 }),
    fc.integer({ max: 0 }),
  );
const badSeq = fc.oneof(
  fc.constantFrom(0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, null, "1", true, [1], {}),
  fc.integer({ max: 0 }),
  fc.double({ noInteger: true }),
);

function cyclic(): unknown {
  const a: Record<string, unknown> = { a: 1 };
  a.self = a;
  return { wrapper: [a] };
}
function deep(n: number): unknown {
  let v: unknown = "bottom";
  for (let i = 0; i < n; i++) v = i % 2 ? { k: v } : [v];
  return v;
}
class Custom {
  x = 1;
}
const badEvent = fc.oneof(
  fc.constantFrom<unknown>(
    undefined,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
    () => 1,
    Symbol("e"),
    10n,
  ),
  fc.constantFrom<unknown>(
    new Date(),
    new Map([[1, 2]]),
    new Set([1]),
    new Custom(),
    /re/,
    new Uint8Array(3),
    new String("s"),
    new Number(1),
  ),
  fc.constantFrom<unknown>(
    { toJSON: () => "x" },
    [1, undefined, 2],
    { a: undefined },
    { n: Number.NaN },
    { deep: { inf: [Number.POSITIVE_INFINITY] } },
  ),
  fc.constant(null).map(() => cyclic()),
  fc.integer({ min: 65, max: 300 }).map((n) => deep(n)),
  loneSurrogate.map((s) => ({ text: s })),
  loneSurrogate.map((s) => ({ [s]: 1 })),
  fc.constant(null).map(() => "x".repeat(1_048_577)),
  fc.jsonValue().map((v) => ({ ok: v, bad: 1n })),
);
const leaseShaped = fc.oneof(
  fc.string(),
  fc.constantFrom(
    "",
    "1",
    "1.",
    ".abc",
    "0.00000000000000000000000000000000",
    `1.${"g".repeat(32)}`,
    `1.${"a".repeat(31)}`,
    `1.${"A".repeat(32)}`,
  ),
  fc.constantFrom(
    `1.${"a".repeat(32)}; DROP TABLE messages; --`,
    `-1.${"a".repeat(32)}`,
    `99999999999999999.${"a".repeat(32)}`,
    `1.${"a".repeat(32)}\u0000`,
  ),
  notAString,
  fc.record({ id: notAString }),
  fc.record({ seq: fc.integer(), lease: fc.string() }),
);

// ---------------------------------------------------------------------------------------------
// valid odd values

const SQLISH = [
  "'; DROP TABLE messages; --",
  'Robert"); DELETE FROM groups; --',
  "1 OR 1=1",
  "__parked_",
  "%_\\",
  "?",
  ":seq",
  "$1",
  "💥🚀 групп 東京 ﷽",
  "a\nb\tc\r\n",
  " leading and trailing ",
  "\u200b\u202e\ufeff",
  "x".repeat(512),
  "🙂".repeat(256),
];
const oddId = fc
  .oneof(
    fc.constantFrom(...SQLISH),
    fc.string({ unit: "grapheme", minLength: 1, maxLength: 60 }),
    fc.string({ unit: "binary", minLength: 1, maxLength: 60 }),
  )
  .filter((s) => s.length >= 1 && s.length <= 512 && !s.includes("\u0000") && wellFormed(s));
const oddEvent = fc.oneof(
  fc.jsonValue({ maxDepth: 6 }),
  fc.constantFrom<unknown>(
    SQLISH,
    { "'\"`": "\\", "": "", " ": [null, true, false, 0, -1.5e-300, 1.7976931348623157e308] },
    "",
    0,
    [],
    {},
  ),
  fc.string({ unit: "grapheme" }),
);

// ---------------------------------------------------------------------------------------------

async function expectInvalid(p: () => Promise<unknown>, field: string | RegExp): Promise<void> {
  let err: unknown;
  try {
    await p();
  } catch (e) {
    err = e;
  }
  if (!(err instanceof QueueError))
    throw new Error(`expected INVALID_ARGUMENT (${field}), got ${err === undefined ? "success" : String(err)}`);
  if (err.code !== "INVALID_ARGUMENT") throw new Error(`expected INVALID_ARGUMENT, got ${err.code}: ${err.message}`);
  expect(err.field).toBeDefined();
  if (typeof field === "string") expect(err.field).toBe(field);
  else expect(err.field).toMatch(field);
  expect(err.message.startsWith(`${err.field}:`)).toBe(true);
}

const fuzzTargets = targets.map((t) => ({ ...t, runs: t.name === "file" ? RUNS : Math.max(5, Math.floor(RUNS / 3)) }));

describe.each(fuzzTargets)("hostile input on $name", (target) => {
  let t: LibsqlTransport;
  let live: Lease;
  let before: Record<string, number>;
  let liveRow: unknown;
  const runs = target.runs;
  const snapshot = async () => ({
    counts: await tableCounts(clientOf(t)),
    live: (
      await clientOf(t).execute({ sql: "SELECT locked_by, lock_expiry FROM messages WHERE seq = ?", args: [live.seq] })
    ).rows.map((r) => ({ ...r })),
  });
  const unchanged = async () => {
    const now = await snapshot();
    expect(now.counts).toEqual(before);
    expect(now.live).toEqual(liveRow);
  };
  /** After valid writes: the same, except for the automatic idempotency keys of HTTP publishes. */
  const unchangedButKeys = async () => {
    const now = await snapshot();
    expect({ ...now.counts, idempotency: 0, publishers: 0 }).toEqual({ ...before, idempotency: 0, publishers: 0 });
    expect(now.live).toEqual(liveRow);
    before = now.counts;
  };

  beforeAll(async () => {
    t = await target.open();
    await t.publish("held", { n: 1 });
    await t.publish("held", { n: 2 });
    live = (await t.claim("holder", 300)) as Lease;
    const s = await snapshot();
    before = s.counts;
    liveRow = s.live;
  });
  afterAll(async () => {
    await unchanged();
    await checkInvariants(clientOf(t));
    t.close();
  });

  it("publish: bad groupId, event, priority or options", async () => {
    await fc.assert(
      fc.asyncProperty(badId, async (g) => expectInvalid(() => t.publish(g as string, 1), "groupId")),
      { numRuns: runs },
    );
    await fc.assert(
      fc.asyncProperty(badEvent, async (e) => expectInvalid(() => t.publish("g", e), /^event/)),
      { numRuns: runs },
    );
    await fc.assert(
      fc.asyncProperty(badPriority, async (p) => expectInvalid(() => t.publish("g", 1, p as number), "priority")),
      { numRuns: runs },
    );
    await fc.assert(
      // undefined means "no key".
      fc.asyncProperty(
        badId.filter((k) => k !== undefined),
        async (k) => expectInvalid(() => t.publish("g", 1, 0, { idempotencyKey: k as string }), "idempotencyKey"),
      ),
      { numRuns: runs },
    );
    for (const o of [null, 1, "x"]) await expectInvalid(() => t.publish("g", 1, 0, o as never), "options");
    await unchanged();
  });

  it("publishMany: bad arrays, elements, and one bad element among good ones stores none of them", async () => {
    for (const m of [null, undefined, "x", 1, {}, { length: 1 }])
      await expectInvalid(() => t.publishMany(m as never), /^messages/);
    await expectInvalid(() => t.publishMany([]), "messages.length");
    await expectInvalid(
      () => t.publishMany(Array.from({ length: 1001 }, () => ({ groupId: "g", event: 1 }))),
      "messages.length",
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ groupId: oddId, event: oddEvent }), { maxLength: 20 }),
        fc.nat(20),
        fc.oneof(
          badId.map((g) => ({ bad: { groupId: g, event: 1 }, field: "groupId" })),
          badEvent.map((e) => ({ bad: { groupId: "g", event: e }, field: "event" })),
          // (a null priority means "not given", like undefined)
          badPriority
            .filter((p) => p !== null)
            .map((p) => ({ bad: { groupId: "g", event: 1, priority: p }, field: "priority" })),
          fc.constantFrom(null, 1, "s", undefined).map((b) => ({ bad: b, field: "" })),
        ),
        async (good, at, { bad, field }) => {
          const i = Math.min(at, good.length);
          const batch = [...good.slice(0, i), bad, ...good.slice(i)] as never[];
          await expectInvalid(
            () => t.publishMany(batch),
            new RegExp(`^messages\\[${i}\\]${field ? `\\.${field}` : ""}`),
          );
        },
      ),
      { numRuns: runs },
    );
    await unchanged();
  });

  it("claim and claimMany: bad workerId, visibility, n, minPriority", async () => {
    await fc.assert(
      fc.asyncProperty(badId, async (w) => expectInvalid(() => t.claim(w as string, 30), "workerId")),
      { numRuns: runs },
    );
    await expectInvalid(() => t.claim("__parked__", 30), "workerId");
    await fc.assert(
      fc.asyncProperty(badSeconds, async (v) => expectInvalid(() => t.claim("w", v as number), "visibility")),
      { numRuns: runs },
    );
    await fc.assert(
      fc.asyncProperty(badCount(MAX_CLAIM_BATCH), async (n) =>
        expectInvalid(() => t.claimMany("w", 30, n as number), "n"),
      ),
      { numRuns: runs },
    );
    await fc.assert(
      fc.asyncProperty(badPriority, async (p) => expectInvalid(() => t.claim("w", 30, p as number), "minPriority")),
      { numRuns: runs },
    );
    await unchanged();
  });

  it("ack, nack and extend: bad leases, delays and visibilities leave the live lease alone", async () => {
    await fc.assert(
      fc.asyncProperty(leaseShaped, async (l) => {
        await expectInvalid(() => t.ack(l as never), "lease");
        await expectInvalid(() => t.nack(l as never), "lease");
        await expectInvalid(() => t.extend(l as never, 10), "lease");
      }),
      { numRuns: runs },
    );
    // 0 is a valid delay (free at once), so it is left out here.
    const badDelay = badSeconds.filter((v) => v !== 0);
    await fc.assert(
      fc.asyncProperty(badDelay, async (d) => expectInvalid(() => t.nack(live, d as number), "delay")),
      { numRuns: runs },
    );
    await fc.assert(
      fc.asyncProperty(badSeconds, async (v) => expectInvalid(() => t.extend(live, v as number), "visibility")),
      { numRuns: runs },
    );
    await unchanged();
  });

  it("deadLetters, redrive and deleteDeadLetter: bad filters and seqs", async () => {
    await fc.assert(
      fc.asyncProperty(
        badId.filter((g) => g !== undefined),
        async (g) => expectInvalid(() => t.deadLetters({ groupId: g as string }), "groupId"),
      ),
      { numRuns: runs },
    );
    // null and undefined mean "not given" for these optional filters.
    await fc.assert(
      fc.asyncProperty(
        badSeq.filter((s) => s !== 0 && s !== null && s !== 2 ** 53),
        async (a) => expectInvalid(() => t.deadLetters({ afterSeq: a as number }), "afterSeq"),
      ),
      { numRuns: runs },
    );
    await fc.assert(
      fc.asyncProperty(
        badCount(1000).filter((n) => n !== null),
        async (n) => expectInvalid(() => t.deadLetters({ limit: n as number }), "limit"),
      ),
      { numRuns: runs },
    );
    await fc.assert(
      fc.asyncProperty(badSeq, async (s) => expectInvalid(() => t.redrive(s as number), "seq")),
      { numRuns: runs },
    );
    await fc.assert(
      fc.asyncProperty(badSeq, async (s) => expectInvalid(() => t.deleteDeadLetter(s as number), "seq")),
      { numRuns: runs },
    );
    await unchanged();
  });

  it("valid odd values round-trip exactly: SQL text, quotes, unicode, emoji, JSON edge cases", async () => {
    await fc.assert(
      fc.asyncProperty(
        oddId,
        oddEvent,
        oddId,
        fc.integer({ min: 0, max: 4 }),
        async (groupId, event, workerId, priority) => {
          const seq = await t.publish(groupId, event, priority);
          try {
            const lease = (await t.claim(workerId, 30, priority)) as Lease;
            // Only our message is deliverable: the pre-existing group is held by the live lease.
            expect(lease?.seq).toBe(seq);
            expect(lease.groupId).toBe(groupId);
            expect(lease.workerId).toBe(workerId);
            expect(lease.event).toEqual(JSON.parse(JSON.stringify(event)));
            const row = (
              await clientOf(t).execute({ sql: "SELECT group_id, locked_by FROM messages WHERE seq = ?", args: [seq] })
            ).rows[0];
            expect(row?.group_id).toBe(groupId);
            expect(row?.locked_by).toBe(workerId);
            await t.ack(lease);
          } finally {
            // A failed run must not leave its group blocked for the next one.
            await clientOf(t).execute({ sql: "DELETE FROM messages WHERE seq = ?", args: [seq] });
          }
        },
      ),
      { numRuns: runs },
    );
    await unchangedButKeys();
  });

  it("valid odd idempotency keys and dead-letter filters round-trip", async () => {
    await fc.assert(
      fc.asyncProperty(oddId, oddId, async (key, groupId) => {
        const seq = await t.publish(groupId, "k", 0, { idempotencyKey: key });
        expect(await t.publish(groupId, "k", 0, { idempotencyKey: key })).toBe(seq);
        expect(await t.deadLetters({ groupId })).toEqual([]);
        const lease = (await t.claim("w", 30)) as Lease;
        expect(lease.seq).toBe(seq);
        await t.ack(lease);
        const key2 = (await clientOf(t).execute({ sql: "SELECT key FROM tq_idempotency WHERE key = ?", args: [key] }))
          .rows[0];
        expect(key2?.key).toBe(key);
        await clientOf(t).execute({ sql: "DELETE FROM tq_idempotency WHERE key = ?", args: [key] });
      }),
      { numRuns: Math.max(5, Math.floor(runs / 2)) },
    );
    await unchangedButKeys();
  });
});

describe("hostile options to LibsqlTransport.create", () => {
  it("refuses bad options and databases before touching anything", async () => {
    const path = tempFile("never.db");
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ maxInFlight: 0 }, "options.maxInFlight"],
      [{ maxInFlight: 65 }, "options.maxInFlight"],
      [{ maxInFlight: Number.NaN }, "options.maxInFlight"],
      [{ maxBatchStatements: 1.5 }, "options.maxBatchStatements"],
      [{ holdMs: -1 }, "options.holdMs"],
      [{ holdMs: 2.5 }, "options.holdMs"],
      [{ holdMs: 1001 }, "options.holdMs"],
      [{ requestTimeoutMs: -1 }, "options.requestTimeoutMs"],
      [{ timeoutMs: Number.POSITIVE_INFINITY }, "options.timeoutMs"],
      [{ timeoutMs: "1000" }, "options.timeoutMs"],
      [{ maxAttempts: 0 }, "options.maxAttempts"],
      [{ maxAttempts: Number.NaN }, "options.maxAttempts"],
      [{ maxAttempts: Number.NEGATIVE_INFINITY }, "options.maxAttempts"],
      [{ idempotencyWindow: 0 }, "options.idempotencyWindow"],
      [{ idempotencyWindow: 31 * 86_400 }, "options.idempotencyWindow"],
      [{ syncInterval: -5 }, "options.syncInterval"],
    ];
    for (const [o, field] of bad) await expectInvalid(() => LibsqlTransport.create(`file:${path}`, o), field);
    for (const o of [null, 5, "x"])
      await expectInvalid(() => LibsqlTransport.create(`file:${path}`, o as never), "options");
    for (const d of ["", 5, null, undefined, {}])
      await expectInvalid(() => LibsqlTransport.create(d as string), "database");
    await expectInvalid(
      () => LibsqlTransport.create("http://127.0.0.1:1", { syncUrl: "http://127.0.0.1:1" }),
      "database",
    );
    expect(existsSync(path), "a refused create() left a database file").toBe(false);
  });

  it("a fresh queue on a file stays empty and consistent after every refused call", async () => {
    const t = await LibsqlTransport.create(`file:${tempFile()}`);
    await resetDatabase(clientOf(t));
    await fc.assert(
      fc.asyncProperty(badId, badEvent, async (g, e) => {
        await expectInvalid(() => t.publish(g as string, e), "groupId");
        await expectInvalid(() => t.publish("ok", e), /^event/);
      }),
      { numRuns: RUNS },
    );
    expect(await tableCounts(clientOf(t))).toEqual({
      messages: 0,
      groups: 0,
      leased: 0,
      dead_letters: 0,
      idempotency: 0,
      publishers: 0,
    });
    await checkInvariants(clientOf(t));
    t.close();
  });
});
