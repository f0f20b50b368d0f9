/** Push signatures during a rotation: a delivery signed with both secrets verifies with either, and a verifier given both accepts either. */
import { expect, it } from "vitest";
import { signPayload, verifySignature } from "../../src/client/index.js";

const OLD = "o".repeat(64);
const NEXT = "n".repeat(64);
const BODY = '{"seq":1}';

it("a delivery signed with both secrets carries a v1 for each, and verifies with either alone", async () => {
  const header = await signPayload([OLD, NEXT], BODY);
  expect(header).toMatch(/^t=[0-9]+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
  expect(await verifySignature(OLD, header, BODY)).toBe(true);
  expect(await verifySignature(NEXT, header, BODY)).toBe(true);
  expect(await verifySignature("x".repeat(64), header, BODY)).toBe(false);
  expect(await verifySignature(NEXT, header, `${BODY} `)).toBe(false);
});

it("a verifier holding both secrets accepts a delivery signed with either, and nothing else", async () => {
  expect(await verifySignature([OLD, NEXT], await signPayload(OLD, BODY), BODY)).toBe(true);
  expect(await verifySignature([OLD, NEXT], await signPayload(NEXT, BODY), BODY)).toBe(true);
  expect(await verifySignature([OLD, NEXT], await signPayload("x".repeat(64), BODY), BODY)).toBe(false);
  expect(await verifySignature([], await signPayload(OLD, BODY), BODY)).toBe(false);
  expect(await verifySignature(["", NEXT], await signPayload(OLD, BODY), BODY)).toBe(false);
});
