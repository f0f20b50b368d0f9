/** Push subscriptions in the library: checks naming the field, secrets drawn once and kept. */
import { describe, expect, it } from "vitest";
import { deleteSubscription, listSubscriptions, putSubscription } from "../../src/core/subscriptions.js";
import { LibsqlTransport, type QueueError } from "../../src/index.js";
import { tempFile } from "../support/db.js";

const open = () => LibsqlTransport.create(`file:${tempFile()}`);

describe("subscriptions", () => {
  it("creates, updates (keeping the secret), lists and deletes", async () => {
    const t = await open();
    const a = await putSubscription(t, "a", { url: "http://127.0.0.1:9/x", maxInFlight: 3, visibility: 5 });
    expect(a).toMatchObject({ name: "a", url: "http://127.0.0.1:9/x", minPriority: 0, maxInFlight: 3, visibility: 5 });
    const b = await putSubscription(t, "a", { url: "https://example.com/y", minPriority: 2 });
    expect(b).toMatchObject({ url: "https://example.com/y", minPriority: 2, maxInFlight: 10, visibility: 30 });
    expect(b.signingSecret).toBe(a.signingSecret);
    const other = await putSubscription(t, "b-2_X", { url: "https://example.com/z" });
    expect(other.signingSecret).not.toBe(a.signingSecret);
    expect((await listSubscriptions(t)).map((s) => s.name)).toEqual(["a", "b-2_X"]);
    expect(await deleteSubscription(t, "a")).toBe(true);
    expect(await deleteSubscription(t, "a")).toBe(false);
    expect((await listSubscriptions(t)).map((s) => s.name)).toEqual(["b-2_X"]);
    t.close();
  });

  it.each([
    ["name", "", { url: "https://x.test" }],
    ["name", "a b", { url: "https://x.test" }],
    ["name", "x".repeat(65), { url: "https://x.test" }],
    ["url", "a", { url: "ftp://x.test" }],
    ["url", "a", { url: "https://user:pw@x.test" }],
    ["url", "a", { url: "not a url" }],
    ["minPriority", "a", { url: "https://x.test", minPriority: 5 }],
    ["maxInFlight", "a", { url: "https://x.test", maxInFlight: 0 }],
    ["maxInFlight", "a", { url: "https://x.test", maxInFlight: 101 }],
    ["visibility", "a", { url: "https://x.test", visibility: 0 }],
  ])("refuses a bad %s, storing nothing", async (field, name, input) => {
    const t = await open();
    const e = (await putSubscription(t, name, input).catch((x: unknown) => x)) as QueueError;
    expect(e.code).toBe("INVALID_ARGUMENT");
    expect(e.message.startsWith(`${field}: `)).toBe(true);
    expect(await listSubscriptions(t)).toEqual([]);
    t.close();
  });
});
