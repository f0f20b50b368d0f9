/**
 * `turso-queue/client`'s entry, without a server: what it exports (its API, and no rule of its own:
 * limits and defaults live in src/rules.ts), and `leaseOfDelivery` for push consumers.
 */
import { describe, expect, it } from "vitest";
import * as entry from "../../src/client/index.js";
import type { PushDelivery } from "../../src/contract/types.js";

describe("turso-queue/client", () => {
  it("exports its API and nothing else: no copy of a limit (they are src/rules.ts's)", () => {
    expect(Object.keys(entry).sort()).toEqual([
      "QueueClient",
      "QueueError",
      "QueueHttpError",
      "SIGNATURE_HEADER",
      "consume",
      "createClient",
      "drain",
      "leaseOfDelivery",
      "signPayload",
      "verifySignature",
    ]);
  });

  it("leaseOfDelivery turns a push delivery into the Lease its subscription holds", () => {
    const delivery: PushDelivery = {
      lease_id: "42.0123456789abcdef0123456789abcdef",
      seq: 42,
      group_id: "orders",
      event: { order: 7 },
      expires_at: 1_796_230_594.2,
      attempts: 3,
      subscription: "hooks",
    };
    const lease: entry.Lease<{ order: number }> = entry.leaseOfDelivery(delivery);
    expect(lease).toEqual({
      id: "42.0123456789abcdef0123456789abcdef",
      seq: 42,
      groupId: "orders",
      event: { order: 7 },
      workerId: "push:hooks",
      expiresAt: 1_796_230_594.2,
      attempts: 3,
    });
  });

  it("refuses a queue without release() by name, before anything else", async () => {
    const queue = { claimMany: () => {}, ack: () => {}, nack: () => {}, extend: () => {} };
    const e = await entry
      .consume(queue as unknown as entry.ConsumerQueue, () => {}, { workerId: "w" })
      .catch((e: unknown) => e);
    expect(e).toBeInstanceOf(entry.QueueError);
    expect(e).toMatchObject({ code: "INVALID_ARGUMENT", field: "queue", message: "queue: has no release() method" });
  });
});
