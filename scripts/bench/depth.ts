/** Claim latency against the depth of the queue: one sqld per level, sampled in interleaved turns. */
import { createClient } from "@libsql/client";
import { LibsqlTransport } from "../../src/index.js";
import { type Sqld, startSqld } from "../support/sqld.js";
import { CFG, DEPTH_GROUPS, EXTRA, VIS } from "./config.js";
import { resetOurs, seedGroups, seedMessages } from "./http.js";
import { fmt, progress, record, timeoutFetch } from "./lib.js";

// ---------------------------------------------------------------------------------------------
// depth: one sqld per level, filled with SQL, sampled in interleaved rounds

export async function depthCases(): Promise<void> {
  const levels: { n: number; sqld: Sqld; t: LibsqlTransport }[] = [];
  try {
    for (const n of CFG.depth) {
      const sqld = await startSqld();
      const t = await LibsqlTransport.create(sqld.url, { ...EXTRA });
      const fill = createClient({ url: sqld.url, fetch: timeoutFetch(600_000) });
      const groups = Math.min(n, DEPTH_GROUPS);
      const chunk = 100_000;
      await fill.batch([...resetOurs, seedGroups("groups", groups)], "write");
      for (let from = 0; from < n; from += chunk) {
        await fill.execute(seedMessages("messages", from, Math.min(n, from + chunk), groups));
        progress(`depth ${fmt(n)}: filled ${fmt(Math.min(n, from + chunk))}`);
      }
      const check = await fill.execute(
        "SELECT (SELECT count(*) FROM messages) AS m, (SELECT count(*) FROM groups) AS g, (SELECT count(*) FROM groups WHERE last_claimed_at = 0) AS never",
      );
      progress(`depth ${fmt(n)}: ${JSON.stringify(check.rows[0])}`);
      fill.close();
      levels.push({ n, sqld, t });
    }
    const per = Math.ceil(CFG.depthSamples / CFG.rounds);
    const sample = async (lv: (typeof levels)[number], count: number, keep: boolean) => {
      const lat: number[] = [];
      for (let i = 0; i < count; i++) {
        const t0 = performance.now();
        const l = await lv.t.claim("depth", VIS);
        const dt = performance.now() - t0;
        if (!l) throw new Error(`depth ${lv.n}: queue unexpectedly empty`);
        if (keep) lat.push(dt);
        await lv.t.ack(l);
        // Put one back so that the depth stays what it says.
        await lv.t.publish(l.groupId, l.event);
      }
      return lat;
    };
    for (const lv of levels) await sample(lv, 30, false);
    for (let round = 1; round <= CFG.rounds; round++) {
      progress(`depth round ${round}/${CFG.rounds}`);
      // Several short turns per round so that every level sees the same spells of machine load.
      for (let turn = 0; turn < 5; turn++) {
        for (const lv of levels) {
          const t0 = performance.now();
          const lat = await sample(lv, Math.ceil(per / 5), true);
          record(`depth.${lv.n}`, { units: lat.length, secs: (performance.now() - t0) / 1000, errors: 0, lat });
        }
      }
    }
  } finally {
    for (const lv of levels) {
      lv.t.close();
      await lv.sqld.stop();
    }
  }
}
