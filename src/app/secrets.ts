/** Comparing secrets without telling an attacker, by the time it takes, how much of a guess was right. */

/**
 * Compares two secrets in time independent of where they differ and of the given one's length: every
 * character of `expected` is compared (with the given one's, cycled), and the lengths are folded in. Plain
 * JavaScript, synchronous: it runs on every request, where two Web Crypto digests would cost more than
 * the rest of the bearer check.
 */
export function sameSecret(given: string, expected: string): boolean {
  if (given.length === 0) return false;
  let diff = given.length ^ expected.length;
  for (let i = 0; i < expected.length; i++) diff |= given.charCodeAt(i % given.length) ^ expected.charCodeAt(i);
  return diff === 0;
}
