/**
 * Load through the Worker: 64 concurrent claimers drain the queue over real HTTP from the Worker in
 * workerd (wrangler's dev server, scripts/support/worker.ts), which forwards to its QueueWriter Durable
 * Object, against the shared sqld. CI size by default (2,000 messages in 100 groups, then 400 in 8 hot groups);
 * `npm run test:soak` runs 10,000. Knobs: TRUST_WORKER_MESSAGES, TRUST_WORKER_CLAIMERS,
 * TRUST_WORKER_SECONDS.
 *
 * Checks: zero lost, zero delivered again after an ack, zero moments with two live leases in a
 * group (seen by the claimers, and polled on the database while the load runs), FIFO in every
 * group, no error answer at all, and the database's invariants afterwards.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type RunningWorker, startWorker } from "../../scripts/support/worker.js";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { checkInvariants, resetDatabase } from "../support/db.js";
import { envInt, report, sleep, tableCounts } from "../support/trust.js";

const MESSAGES = envInt("TRUST_WORKER_MESSAGES", 2000);
const GROUPS = envInt("TRUST_WORKER_GROUPS", 100);
// The hot run has far fewer groups than claimers, so that every group is contended all the time:
// with 100 groups a claim rarely meets a live lease, and a broken live-lease check can go unseen.
const RUNS = [
  { name: "wide", MESSAGES, GROUPS },
  { name: "hot", MESSAGES: envInt("TRUST_WORKER_HOT_MESSAGES", 400), GROUPS: 8 },
];
const CLAIMERS = envInt("TRUST_WORKER_CLAIMERS", 64);
const SECONDS = envInt("TRUST_WORKER_SECONDS", 240);
const TOKEN = "worker-load-token-0123456789";

let worker: RunningWorker;
let admin: LibsqlTransport;

beforeAll(async () => {
  admin = await LibsqlTransport.create(inject("sqldUrl"));
  await resetDatabase(clientOf(admin));
  worker = await startWorker({ databaseUrl: inject("sqldUrl"), queueToken: TOKEN });
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  admin?.close();
});

// biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field by the assertions
type Json = any;

async function post(path: string, body?: unknown): Promise<{ status: number; body: Json; text: string }> {
  const res = await fetch(worker.url + path, {
    method: "POST",
    headers: {
      authorization: `Bearer ${TOKEN}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
}

interface Held {
  groupId: string;
  seq: number;
  rank: number;
  claimAnswered: number;
  ackSent: number;
}

describe.each(RUNS)(
  `worker load ($name): ${CLAIMERS} claimers, $MESSAGES messages in $GROUPS groups`,
  ({ name, MESSAGES, GROUPS }) => {
    it("none lost, none twice, one lease per group, FIFO", { timeout: (SECONDS + 60) * 1000 }, async () => {
      await resetDatabase(clientOf(admin));
      const started = performance.now();
      const published = new Map<number, { groupId: string; rank: number }>();
      for (let i = 0; i < MESSAGES; i += 1000) {
        const messages = Array.from({ length: Math.min(1000, MESSAGES - i) }, (_, k) => {
          const n = i + k;
          return { group_id: `g${n % GROUPS}`, event: { rank: Math.floor(n / GROUPS) } };
        });
        const a = await post("/v1/messages", { messages });
        expect(a.status, a.text).toBe(201);
        (a.body.seqs as number[]).forEach((seq, j) => {
          published.set(seq, { groupId: messages[j]?.group_id as string, rank: messages[j]?.event.rank as number });
        });
      }
      const publishedAt = performance.now();

      const log: Held[] = [];
      const acked = new Set<number>();
      const violations: string[] = [];
      const errors: string[] = [];
      let claims = 0;
      let empty = 0;
      const deadline = Date.now() + SECONDS * 1000;

      const claimer = async (w: number) => {
        while (acked.size < MESSAGES && errors.length === 0 && Date.now() < deadline) {
          const c = await post("/v1/claims", { worker_id: `w${w}`, visibility: 120 });
          const claimAnswered = performance.now();
          claims++;
          if (c.status === 204) {
            empty++;
            await sleep(10 + Math.random() * 20); // every remaining group is leased right now
            continue;
          }
          if (c.status !== 200) {
            errors.push(`claim: ${c.status} ${c.text}`);
            return;
          }
          const l = c.body;
          if (acked.has(l.seq)) violations.push(`seq ${l.seq} delivered again after its ack`);
          const ackSent = performance.now();
          const a = await post(`/v1/leases/${l.lease_id}/ack`);
          if (a.status !== 204) {
            errors.push(`ack: ${a.status} ${a.text}`);
            return;
          }
          acked.add(l.seq);
          log.push({ groupId: l.group_id, seq: l.seq, rank: l.event.rank, claimAnswered, ackSent });
        }
      };

      // Meanwhile, on the database: no group may ever hold two live leases.
      let watching = true;
      const dbOverlaps: unknown[] = [];
      const watcher = (async () => {
        while (watching) {
          const rs = await clientOf(admin).execute(`SELECT group_id, count(*) AS live FROM messages
          WHERE locked_by IS NOT NULL AND locked_by <> '__parked__' AND lock_expiry >= unixepoch('subsec')
          GROUP BY group_id HAVING count(*) > 1`);
          dbOverlaps.push(...rs.rows.map((r) => ({ ...r })));
          await sleep(50);
        }
      })();
      await Promise.all(Array.from({ length: CLAIMERS }, (_, w) => claimer(w)));
      watching = false;
      await watcher;
      const drainMs = performance.now() - publishedAt;

      expect(errors).toEqual([]);
      expect(Date.now(), `the run did not finish within ${SECONDS} s`).toBeLessThan(deadline);
      expect(violations).toEqual([]);
      expect(dbOverlaps, "groups seen with two live leases").toEqual([]);
      expect(
        [...published.keys()].filter((s) => !acked.has(s)),
        "lost",
      ).toEqual([]);
      expect(log.length).toBe(MESSAGES);

      const byGroup = new Map<string, Held[]>();
      for (const h of log) byGroup.set(h.groupId, [...(byGroup.get(h.groupId) ?? []), h]);
      for (const [g, list] of byGroup) {
        list.sort((a, b) => a.claimAnswered - b.claimAnswered);
        list.forEach((cur, i) => {
          if (cur.rank !== i) violations.push(`group ${g}: FIFO broken at rank ${cur.rank} (expected ${i})`);
          const prev = list[i - 1];
          if (prev && cur.claimAnswered <= prev.ackSent) {
            violations.push(`group ${g}: seq ${cur.seq} leased while seq ${prev.seq} was live`);
          }
        });
      }
      expect(violations.slice(0, 20)).toEqual([]);
      await checkInvariants(clientOf(admin));
      const left = await tableCounts(clientOf(admin));
      expect([left.messages, left.groups, left.leased, left.dead_letters]).toEqual([0, 0, 0, 0]);

      report(`worker load ${name}`, {
        messages: MESSAGES,
        groups: GROUPS,
        claimers: CLAIMERS,
        lost: 0,
        deliveredTwiceAfterAck: 0,
        overlaps: 0,
        publishMs: Math.round(publishedAt - started),
        drainMs: Math.round(drainMs),
        msgsPerSecond: Math.round((MESSAGES / drainMs) * 1000),
        claims,
        empty,
      });
    });
  },
);
