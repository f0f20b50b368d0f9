/** The local-file cases: ours (in-process writes) against plainjob on better-sqlite3, interleaved. */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@libsql/client";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { CFG, EXTRA, GROUPS, PAD, VIS } from "./config.js";
import { one, refillOurs } from "./http.js";
import { progress, type RunResult, record, runLoops, sleep } from "./lib.js";
import { peerRequire } from "./peers.js";

// ---------------------------------------------------------------------------------------------
// local file: ours vs plainjob (better-sqlite3), interleaved

/** Whether plainjob runs here: its peers install (better-sqlite3 builds its native addon) and load. */
function ensureBetterSqlite(): boolean {
  try {
    const Database = peerRequire()("better-sqlite3");
    new Database(":memory:").close();
    return true;
  } catch (e) {
    progress(`could not install or load better-sqlite3, skipping plainjob: ${(e as Error).message}`);
    return false;
  }
}

export async function fileCases(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "turso-queue-bench-"));
  const withPlainjob = ensureBetterSqlite();
  const ms = CFG.fileSliceMs;
  let files = 0;
  const fresh = () => `file:${join(dir, `q${files++}.db`)}`;
  try {
    for (let round = 1; round <= CFG.rounds; round++) {
      progress(`file round ${round}/${CFG.rounds}`);
      {
        const c = createClient({ url: fresh() });
        await c.execute("PRAGMA journal_mode=WAL");
        await c.batch(["CREATE TABLE f (id INTEGER PRIMARY KEY, n INTEGER)", "INSERT INTO f VALUES (1, 0)"], "write");
        record(
          "file.floor.c1",
          await runLoops({
            concurrency: 1,
            ms,
            maxOps: 1_000_000,
            op: () => one(c.batch(["UPDATE f SET n = n + 1 WHERE id = 1"], "write")),
          }),
        );
        c.close();
      }
      for (const [name, sync] of [
        ["ours", null],
        ["ours-normal", "NORMAL"],
      ] as const) {
        for (const c of name === "ours" ? [1, 8] : [1]) {
          const t = await LibsqlTransport.create(fresh(), { ...EXTRA });
          // plainjob runs with synchronous=NORMAL (no fsync per commit); this row shows ours the same way.
          if (sync) await clientOf(t).execute(`PRAGMA synchronous=${sync}`);
          await refillOurs(clientOf(t), CFG.seed);
          record(
            `file.${name}.c${c}`,
            await runLoops({
              concurrency: c,
              ms,
              maxOps: CFG.seed,
              op: async (w) => {
                const l = await t.claim(`w${w}`, VIS);
                if (!l) return 0;
                await t.ack(l);
                return 1;
              },
            }),
          );
          if (c === 1) {
            await refillOurs(clientOf(t), 0);
            let n = 0;
            record(
              `file.${name}.publish.single`,
              await runLoops({
                concurrency: 1,
                ms,
                maxOps: 500_000,
                op: () => one(t.publish(`p${n++ % GROUPS}`, { n })),
              }),
            );
            record(
              `file.${name}.publish.many${CFG.publishBatch}`,
              await runLoops({
                concurrency: 1,
                ms,
                maxOps: 20_000,
                op: async () =>
                  (
                    await t.publishMany(
                      Array.from({ length: CFG.publishBatch }, () => ({
                        groupId: `p${n % GROUPS}`,
                        event: { n: n++ },
                      })),
                    )
                  ).length,
              }),
            );
            await refillOurs(clientOf(t), CFG.seed);
            record(
              `file.${name}.claimMany.n32`,
              await runLoops({
                concurrency: 1,
                ms,
                maxOps: Math.floor(CFG.seed / 32),
                op: async () => {
                  const ls = await t.claimMany("w", VIS, 32);
                  await Promise.all(ls.map((l) => t.ack(l)));
                  return ls.length;
                },
              }),
            );
          }
          t.close();
        }
      }
      if (withPlainjob) {
        const Database = peerRequire()("better-sqlite3");
        const { better, defineQueue } = peerRequire()("plainjob");
        const db = new Database(join(dir, `pj${files++}.db`));
        const quiet = { error() {}, warn() {}, info() {}, debug() {} };
        const queue = defineQueue({ connection: better(db), logger: quiet, maintenanceInterval: 3_600_000 });
        const syncLoop = (maxOps: number, op: () => number): RunResult => {
          const t0 = performance.now();
          const end = t0 + ms;
          let units = 0;
          for (let i = 0; i < maxOps && performance.now() < end; i++) {
            const u = op();
            if (u === 0) break;
            units += u;
          }
          return { units, errors: 0, secs: (performance.now() - t0) / 1000, lat: [] };
        };
        let n = 0;
        record(
          "file.plainjob.add.single",
          syncLoop(500_000, () => {
            queue.add("t", { n: n++ });
            return 1;
          }),
        );
        record(
          `file.plainjob.add.many${CFG.publishBatch}`,
          syncLoop(
            20_000,
            () =>
              queue.addMany(
                "t",
                Array.from({ length: CFG.publishBatch }, () => ({ n: n++ })),
              ).ids.length,
          ),
        );
        queue.addMany(
          "t",
          Array.from({ length: CFG.seed }, () => ({ n: n++, pad: PAD })),
        );
        record(
          "file.plainjob.claim_done.c1",
          syncLoop(CFG.seed, () => {
            const j = queue.getAndMarkJobAsProcessing("t");
            if (!j) return 0;
            queue.markJobAsDone(j.id);
            return 1;
          }),
        );
        queue.close();
        db.close();
      }
      await sleep(10);
    }
    await walFrames(dir, withPlainjob);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What the local-file ratio is bound by: WAL frames (pages) each claim+ack commits, ours and plainjob's. */
export const frames: { ours?: number; plainjob?: number } = {};

async function walFrames(dir: string, withPlainjob: boolean): Promise<void> {
  const n = 2000;
  const size = (p: string) => statSync(`${p}-wal`).size / (4096 + 24);
  const ours = join(dir, "frames-ours.db");
  const t = await LibsqlTransport.create(`file:${ours}`, { synchronous: "normal" });
  await refillOurs(clientOf(t), n * 2);
  await clientOf(t).execute("PRAGMA wal_checkpoint(TRUNCATE)");
  await clientOf(t).execute("PRAGMA wal_autocheckpoint = 0");
  const f0 = size(ours);
  for (let i = 0; i < n; i++) {
    const l = await t.claim("w", VIS);
    if (!l) throw new Error("frames: queue empty");
    await t.ack(l);
  }
  frames.ours = (size(ours) - f0) / n;
  t.close();
  if (!withPlainjob) return;
  const require = peerRequire();
  const Database = require("better-sqlite3");
  const { better, defineQueue } = require("plainjob");
  const pj = join(dir, "frames-pj.db");
  const db = new Database(pj);
  const quiet = { error() {}, warn() {}, info() {}, debug() {} };
  const queue = defineQueue({ connection: better(db), logger: quiet, maintenanceInterval: 3_600_000 });
  queue.addMany(
    "t",
    Array.from({ length: n * 2 }, (_, i) => ({ n: i, pad: PAD })),
  );
  db.pragma("wal_checkpoint(TRUNCATE)");
  db.pragma("wal_autocheckpoint = 0");
  const g0 = size(pj);
  for (let i = 0; i < n; i++) {
    const j = queue.getAndMarkJobAsProcessing("t");
    queue.markJobAsDone(j.id);
  }
  frames.plainjob = (size(pj) - g0) / n;
  queue.close();
  db.close();
  progress(
    `  file.frames: ours ${frames.ours.toFixed(2)}, plainjob ${frames.plainjob.toFixed(2)} WAL frames per cycle`,
  );
}
