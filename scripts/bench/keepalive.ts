/**
 * `npm run bench:fetch` [--quick]: the transport's default fetch in Node (keep-alive node:http, Nagle
 * off: src/core/node-fetch.ts) against the global fetch (undici) it replaced, over one local sqld,
 * in alternating rounds: round-trip p50 at concurrency 1 (a read, and a one-batch publish) and
 * claim+ack cycles/s at concurrency 8.
 */
import { pathToFileURL } from "node:url";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { startSqld } from "../support/sqld.js";
import { fmt, percentile, progress, runLoops, table } from "./lib.js";

export async function keepAliveBench({ quick = false }: { quick?: boolean } = {}): Promise<void> {
  const cfg = quick ? { rounds: 2, samples: 100, sliceMs: 700 } : { rounds: 4, samples: 250, sliceMs: 1500 };
  const sqld = await startSqld();
  const sides = {
    "global fetch (before)": await LibsqlTransport.create(sqld.url, { fetch: globalThis.fetch }),
    "keep-alive node:http (after)": await LibsqlTransport.create(sqld.url),
  };
  const lat = new Map<string, number[]>();
  const cycles = new Map<string, { units: number; secs: number }>();
  const push = (k: string, v: number) => lat.set(k, [...(lat.get(k) ?? []), v]);
  try {
    const [first] = Object.values(sides) as [LibsqlTransport];
    const topUp = async () => {
      const s = await first.stats();
      for (let have = s.ready + s.waiting; have < 20_000; have += 1000) {
        await first.publishMany(Array.from({ length: 1000 }, (_, i) => ({ groupId: `g${i % 256}`, event: { i } })));
      }
    };
    for (let round = 1; round <= cfg.rounds; round++) {
      progress(`fetch round ${round}/${cfg.rounds}`);
      const order = Object.entries(sides);
      if (round % 2 === 0) order.reverse();
      for (const [name, t] of order) {
        for (let i = 0; i < cfg.samples; i++) {
          const t0 = performance.now();
          await clientOf(t).execute("SELECT 1");
          push(`${name}.read`, performance.now() - t0);
        }
        for (let i = 0; i < cfg.samples; i++) {
          const t0 = performance.now();
          await t.publish(`w${i % 256}`, { i });
          push(`${name}.write`, performance.now() - t0);
        }
        await topUp();
        const r = await runLoops({
          concurrency: 8,
          ms: cfg.sliceMs,
          maxOps: 1_000_000,
          op: async (w) => {
            const l = await t.claim(`w${w}`, 60);
            if (!l) return 0;
            await t.ack(l);
            return 1;
          },
        });
        const c = cycles.get(name) ?? { units: 0, secs: 0 };
        cycles.set(name, { units: c.units + r.units, secs: c.secs + r.secs });
        progress(`  ${name}: ${fmt(r.units / r.secs)} cycles/s`);
      }
    }
  } finally {
    for (const t of Object.values(sides)) t.close();
    await sqld.stop();
  }
  const p50 = (k: string) =>
    percentile(
      [...(lat.get(k) ?? [])].sort((a, b) => a - b),
      50,
    );
  const names = Object.keys(sides);
  const row = (label: string, f: (n: string) => number, digits: number) => [
    label,
    ...names.map((n) => fmt(f(n), digits)),
    fmt(f(names[1] as string) / f(names[0] as string), 2),
  ];
  const rate = (n: string) => (cycles.get(n)?.units ?? 0) / (cycles.get(n)?.secs ?? 1);
  process.stdout.write(
    `\n### Node fetch for @libsql/client over a local sqld (${cfg.rounds} alternating rounds)\n\n${table(
      ["", ...names, "after / before"],
      [
        row("read round trip p50, c=1 (ms)", (n) => p50(`${n}.read`), 2),
        row("publish (one write batch) p50, c=1 (ms)", (n) => p50(`${n}.write`), 2),
        row("claim+ack cycles/s, c=8", rate, 0),
      ],
    )}\n`,
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await keepAliveBench({ quick: process.argv.includes("--quick") });
  process.exit(0);
}
