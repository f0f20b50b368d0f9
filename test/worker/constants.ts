/** Shared by vitest.config.ts (bindings) and the workers tests. */
export const TEST_TOKEN = "test-queue-token-0123456789abcdef";
/** The next root key (QUEUE_TOKEN_NEXT), as during a rotation. */
export const TEST_TOKEN_NEXT = "test-queue-next-token-0123456789";
/** QUEUE_JWT_SECRET (HS256). */
export const TEST_JWT_SECRET = "test-jwt-secret-0123456789abcdef-0123456789";
/** An Ed25519 key pair for EdDSA JWTs: its public half is QUEUE_JWT_PUBLIC_KEYS (tests only). */
export const TEST_ED25519 = {
  private: {
    kty: "OKP",
    crv: "Ed25519",
    d: "pUQ_vdLIjj2CkPb3hETNM7CIG3gkGrvoeO8djyNaVIA",
    x: "PSx6luVi6-R0mQi2UTiFWxOZB29xIxBL5xaB1SkEAi8",
  },
  public: { kty: "OKP", crv: "Ed25519", x: "PSx6luVi6-R0mQi2UTiFWxOZB29xIxBL5xaB1SkEAi8", kid: "test-ed" },
};
