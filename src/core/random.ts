/** Random tokens for leases, publisher slots and secrets, drawn 4 KiB at a time (a token per claim should not cost a syscall). */

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));
let pool = new Uint8Array(0);
let poolAt = 0;

/** 128 random bits as 32 hex digits. */
export function randomToken(): string {
  // Drawn on first use: a Worker may not generate random values at module scope.
  if (poolAt + 16 > pool.length) {
    pool = crypto.getRandomValues(new Uint8Array(4096));
    poolAt = 0;
  }
  let out = "";
  for (let i = poolAt; i < poolAt + 16; i++) out += HEX[pool[i] as number];
  poolAt += 16;
  return out;
}
