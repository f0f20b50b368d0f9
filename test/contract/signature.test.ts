/** Push signatures: a signed body verifies; a tampered body, wrong secret, stale time or malformed header does not. */
import { describe, expect, it } from "vitest";
import { signPayload, verifySignature } from "../../src/client/index.js";
import { verifySignature as fromLibrary } from "../../src/index.js";

const SECRET = "a".repeat(64);
const BODY = '{"lease_id":"1.0123456789abcdef0123456789abcdef","seq":1}';

describe("signatures", () => {
  it("verifies what was signed, from both entry points", async () => {
    const header = await signPayload(SECRET, BODY);
    expect(header).toMatch(/^t=[0-9]+,v1=[0-9a-f]{64}$/);
    expect(await verifySignature(SECRET, header, BODY)).toBe(true);
    expect(await fromLibrary(SECRET, header, BODY, { toleranceSeconds: 60 })).toBe(true);
  });

  it("refuses a tampered body, a wrong secret, a stale timestamp and malformed headers", async () => {
    const header = await signPayload(SECRET, BODY);
    expect(await verifySignature(SECRET, header, `${BODY} `)).toBe(false);
    expect(await verifySignature("b".repeat(64), header, BODY)).toBe(false);
    const old = await signPayload(SECRET, BODY, Math.floor(Date.now() / 1000) - 600);
    expect(await verifySignature(SECRET, old, BODY, { toleranceSeconds: 300 })).toBe(false);
    for (const bad of [undefined, null, "", "v1=abc", "t=1", "t=x,v1=00", "garbage", `${header},t=1`]) {
      expect(await verifySignature(SECRET, bad, BODY)).toBe(false);
    }
  });
});
