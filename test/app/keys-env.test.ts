/** The keys' configuration (src/app/env.ts): each mistake refused with a message that names what to fix. */
import { expect, it } from "vitest";
import { parseEnv } from "../../src/app/env.js";

const BASE = { TURSO_DATABASE_URL: "http://127.0.0.1:8080", QUEUE_TOKEN: "root-token-0123456789" };
const ED = { kty: "OKP", crv: "Ed25519", x: "PSx6luVi6-R0mQi2UTiFWxOZB29xIxBL5xaB1SkEAi8" };

const problems = (env: Record<string, string>) => {
  const parsed = parseEnv({ ...BASE, ...env });
  return parsed.ok ? [] : parsed.error.problems;
};

it("accepts the root key's rotation and the JWT settings", () => {
  const parsed = parseEnv({
    ...BASE,
    QUEUE_TOKEN_NEXT: "next-token-0123456789",
    QUEUE_JWT_SECRET: "s".repeat(32),
    QUEUE_JWT_SECRET_NEXT: "t".repeat(32),
    QUEUE_JWT_PUBLIC_KEYS: JSON.stringify({ keys: [{ ...ED, kid: "a" }] }),
    QUEUE_JWT_AUDIENCE: "my-queue",
    QUEUE_JWT_ISSUER: "https://auth.example.com",
  });
  expect(parsed.ok && parsed.config).toMatchObject({
    queueTokenNext: "next-token-0123456789",
    jwt: { secrets: ["s".repeat(32), "t".repeat(32)], audience: "my-queue", issuer: "https://auth.example.com" },
  });
  const plain = parseEnv(BASE);
  expect(plain.ok && plain.config).toMatchObject({ queueTokenNext: undefined, jwt: undefined });
  const one = parseEnv({ ...BASE, QUEUE_JWT_PUBLIC_KEYS: JSON.stringify(ED) });
  expect(one.ok && one.config.jwt).toMatchObject({ secrets: [], audience: "turso-queue", publicKeys: [ED] });
});

it("refuses each mistake, naming the variable and what to do", () => {
  expect(problems({ QUEUE_TOKEN_NEXT: "short" })).toEqual(["QUEUE_TOKEN_NEXT must be at least 16 characters"]);
  expect(problems({ QUEUE_TOKEN_NEXT: BASE.QUEUE_TOKEN })).toEqual([
    "QUEUE_TOKEN_NEXT is QUEUE_TOKEN: delete QUEUE_TOKEN_NEXT once the rotation is over",
  ]);
  expect(problems({ QUEUE_JWT_SECRET: "too-short" })).toEqual(["QUEUE_JWT_SECRET must be at least 32 characters"]);
  expect(problems({ QUEUE_JWT_SECRET_NEXT: "too-short" })).toEqual([
    "QUEUE_JWT_SECRET_NEXT must be at least 32 characters",
  ]);
  for (const keys of [
    "not json",
    JSON.stringify({ ...ED, d: "the private part" }),
    JSON.stringify({ kty: "EC", crv: "P-384", x: "a", y: "b" }),
    JSON.stringify({ kty: "RSA", n: "a", e: "AQAB" }),
    JSON.stringify({ keys: [] }),
  ]) {
    expect(problems({ QUEUE_JWT_PUBLIC_KEYS: keys }), keys).toEqual([
      expect.stringMatching(/^QUEUE_JWT_PUBLIC_KEYS must be a public JWK or a JWK set/),
    ]);
  }
  expect(problems({ QUEUE_JWT_AUDIENCE: "x" })).toEqual([
    "QUEUE_JWT_AUDIENCE and QUEUE_JWT_ISSUER need QUEUE_JWT_SECRET or QUEUE_JWT_PUBLIC_KEYS",
  ]);
});
