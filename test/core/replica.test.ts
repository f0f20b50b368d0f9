import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@libsql/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Sqld, startSqld } from "../../scripts/support/sqld.js";
import { clientOf } from "../../src/core/internals.js";
import { type Lease, LibsqlTransport } from "../../src/index.js";
import { checkInvariants } from "../support/db.js";
import { checkDeliveryLog, claimUntilEmpty, type Held } from "../support/exclusivity.js";

// A primary with a gRPC port for replicas, and a second sqld started as its replica node.
let primary: Sqld;
let replicaNode: Sqld;
beforeAll(async () => {
  primary = await startSqld({ grpc: true });
  replicaNode = await startSqld({ primaryGrpcUrl: primary.grpcUrl as string });
});
afterAll(async () => {
  await replicaNode?.stop();
  await primary?.stop();
});

describe("embedded replica (file + syncUrl)", () => {
  it("publishes and claims through the primary; the replica reads them after sync", async () => {
    const dir = mkdtempSync(join(tmpdir(), "turso-queue-replica-"));
    const replica = await LibsqlTransport.create(`file:${join(dir, "replica.db")}`, { syncUrl: primary.url });
    const onPrimary = createClient({ url: primary.url });
    const seq = await replica.publish("emb", { hello: "replica" });
    // The write went to the primary.
    const rows = (await onPrimary.execute({ sql: "SELECT group_id, event FROM messages WHERE seq = ?", args: [seq] }))
      .rows;
    expect(rows.map((r) => ({ ...r }))).toEqual([{ group_id: "emb", event: '{"hello":"replica"}' }]);
    // A message published straight on the primary reaches the replica's reads after a sync.
    await onPrimary.batch(
      [
        "INSERT INTO messages (group_id, event) VALUES ('direct', '1')",
        "INSERT OR IGNORE INTO groups (group_id, priority) VALUES ('direct', 0)",
      ],
      "write",
    );
    await replica.sync();
    expect((await replica.stats()).ready).toBe(2);
    const a = (await replica.claim("emb-worker", 30)) as Lease;
    const b = (await replica.claim("emb-worker", 30)) as Lease;
    expect([a.groupId, b.groupId]).toEqual(["emb", "direct"]);
    // The lease is on the primary, where every other claimer sees it.
    const locked = (await onPrimary.execute("SELECT count(*) AS n FROM messages WHERE locked_by = 'emb-worker'"))
      .rows[0];
    expect(Number(locked?.n)).toBe(2);
    await replica.ack(a);
    await replica.ack(b);
    expect(Number((await onPrimary.execute("SELECT count(*) AS n FROM messages")).rows[0]?.n)).toBe(0);
    await checkInvariants(onPrimary);
    replica.close();
    onPrimary.close();
  });
});

describe("a sqld replica node (--primary-grpc-url)", () => {
  it("serves claims that stay exclusive with claimers on the primary", async () => {
    const viaPrimary = await LibsqlTransport.create(primary.url);
    const viaReplica = await LibsqlTransport.create(replicaNode.url);
    const published = new Map<number, { groupId: string }>();
    const batch = Array.from({ length: 300 }, (_, i) => ({ groupId: `r${i % 20}`, event: i }));
    for (const [i, s] of (await viaReplica.publishMany(batch)).entries())
      published.set(s, batch[i] as { groupId: string });

    const log: Held[] = [];
    const servedBy = { primary: 0, replica: 0 };
    const claimer = async (t: LibsqlTransport, id: string) => {
      servedBy[t === viaReplica ? "replica" : "primary"] += await claimUntilEmpty(t, id, log);
    };
    await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        claimer(i % 2 ? viaReplica : viaPrimary, `${i % 2 ? "replica" : "primary"}-${i}`),
      ),
    );
    checkDeliveryLog(log, published);
    // Both nodes did real work.
    expect(servedBy.primary).toBeGreaterThan(0);
    expect(servedBy.replica).toBeGreaterThan(0);
    await checkInvariants(clientOf(viaPrimary));
    viaPrimary.close();
    viaReplica.close();
  });
});
