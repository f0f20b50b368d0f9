/** The bearer check's comparison (src/app/auth.ts): equal tokens only, whatever the lengths. */
import { expect, it } from "vitest";
import { sameSecret } from "../../src/app/auth.js";

it("accepts the token itself and nothing else: a prefix, an extension, a repetition, one character off", () => {
  const token = "0123456789abcdef-token";
  expect(sameSecret(token, token)).toBe(true);
  for (const other of ["", "0123456789abcdef", `${token}x`, token + token, `${token.slice(0, -1)}m`, "x".repeat(22)]) {
    expect(sameSecret(other, token), other).toBe(false);
  }
  // The given token cycled over the expected length must not pass for it.
  expect(sameSecret("ab", "abab")).toBe(false);
});
