import { describe, expect, inject, it } from "vitest";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { checkInvariants, resetDatabase } from "../support/db.js";
import { checkDeliveryLog, claimUntilEmpty, type Held } from "../support/exclusivity.js";

describe("16 claimers at once over HTTP", () => {
  it("deliver 1,000 messages in 50 groups exactly once each, never two live leases in a group", async () => {
    // Two transports (two "processes"), eight claimers each.
    const transports = await Promise.all(Array.from({ length: 2 }, () => LibsqlTransport.create(inject("sqldUrl"))));
    const [first] = transports as [LibsqlTransport];
    await resetDatabase(clientOf(first));
    const published = new Map<number, { groupId: string }>();
    for (let chunk = 0; chunk < 10; chunk++) {
      const batch = Array.from({ length: 100 }, (_, i) => ({
        groupId: `g${(chunk * 100 + i) % 50}`,
        event: { n: chunk * 100 + i },
      }));
      const seqs = await first.publishMany(batch);
      for (const [i, s] of seqs.entries()) published.set(s, { groupId: (batch[i] as { groupId: string }).groupId });
    }

    const log: Held[] = [];
    await Promise.all(
      Array.from({ length: 16 }, (_, i) => claimUntilEmpty(transports[i % 2] as LibsqlTransport, `worker-${i}`, log)),
    );
    checkDeliveryLog(log, published);
    expect((await first.stats()).ready).toBe(0);
    await checkInvariants(clientOf(first));
    for (const t of transports) t.close();
  });
});
