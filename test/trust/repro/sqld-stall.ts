/**
 * Reproduces a sqld stall seen while building the crash test (not a test; run by hand):
 *   npx tsx test/trust/repro/sqld-stall.ts          # RT=2000: client request timeout 2 s -> stalls
 *   RT=25000 npx tsx test/trust/repro/sqld-stall.ts # no request ever abandoned -> no stall
 * 4 publishers + 8 polling claimers, each on its own transport, against one sqld (0.24.1-pre.42).
 * With a 2 s per-request timeout, some requests are abandoned under load; within a minute every write
 * (also from a fresh transport) stops answering while reads still work, until sqld is restarted.
 * The library keeps its promise (every call ends with TIMEOUT by its deadline) but the database is wedged.
 */
import { startSqld } from "../../../scripts/support/sqld.js";
import { writeStatsOf } from "../../../src/core/internals.js";
import { LibsqlTransport, type QueueError } from "../../../src/index.js";

process.env.RUST_LOG = process.env.RUST_LOG ?? "warn";
const sqld = await startSqld({ inheritOutput: true });
const url = sqld.url;
const opts = { requestTimeoutMs: Number(process.env.RT ?? 2000), timeoutMs: 30000, maxAttempts: Infinity };
const pubs = await Promise.all(Array.from({ length: 4 }, () => LibsqlTransport.create(url, opts)));
const subs = await Promise.all(Array.from({ length: 8 }, () => LibsqlTransport.create(url, opts)));
let published = 0,
  acked = 0,
  errs: Record<string, number> = {},
  stop = false;
const started = Date.now();
let last = -1;
const iv = setInterval(async () => {
  if (published === last) {
    const f = await LibsqlTransport.create(url, { requestTimeoutMs: 3000, timeoutMs: 4000 });
    const t0 = Date.now();
    try {
      await f.publish("fresh", 1);
      console.log("FRESH transport publish ok", Date.now() - t0);
    } catch (err) {
      const e = err as QueueError;
      console.log("FRESH failed", e.code, e.message);
    }
    try {
      f.close();
    } catch {}
  }
  last = published;
  console.log(
    `+${Date.now() - started} pub ${published} acked ${acked} errs ${JSON.stringify(errs)} subs0 ${JSON.stringify(subs[0] && writeStatsOf(subs[0]))}`,
  );
}, 2000);
const P = pubs.map(async (t, p) => {
  for (let i = p; i < 600; i += 4) {
    try {
      await t.publish(`g${i % 20}`, { i });
      published++;
    } catch (err) {
      const e = err as QueueError;
      errs[e.code] = (errs[e.code] ?? 0) + 1;
    }
  }
});
const claimers = subs.map(async (t, c) => {
  while (!stop) {
    try {
      const l = await t.claim(`w${c}`, 1.5);
      if (!l) {
        await new Promise((r) => setTimeout(r, 20));
        continue;
      }
      await t.ack(l);
      acked++;
    } catch (err) {
      const e = err as QueueError;
      errs[e.code] = (errs[e.code] ?? 0) + 1;
      console.log(e.code, e.message.slice(0, 300));
    }
  }
});
await Promise.race([Promise.all(P), new Promise((r) => setTimeout(r, 50000))]);
stop = true;
await Promise.race([Promise.all(claimers), new Promise((r) => setTimeout(r, 5000))]);
clearInterval(iv);
console.log("done", published, acked, Date.now() - started);
await sqld.kill();
process.exit(0);
