/**
 * Tokens minted elsewhere: JWTs signed with a secret the Worker shares (HS256) or with a private key
 * whose public half it is configured with (ES256, EdDSA), carrying `scopes`, `queues`, `exp` and
 * `aud`. Checked with Web Crypto and nothing read from a database; a token already checked is
 * remembered (its signature compared in constant time), so that one used for many requests costs
 * one verification per isolate.
 */
import { queuePatternProblem, type Scope, scopeProblem } from "../rules.js";
import { sameSecret } from "./secrets.js";

/** What the Worker accepts (src/app/env.ts parses it from QUEUE_JWT_*). */
export interface JwtConfig {
  /** HS256 secrets: the current one and, during a rotation, the next. */
  secrets: string[];
  /** Public keys (JWK) for ES256 (`kty: EC`, `crv: P-256`) and EdDSA (`kty: OKP`, `crv: Ed25519`). */
  publicKeys: JsonWebKey[];
  /** The `aud` every token must carry. */
  audience: string;
  /** The `iss` every token must carry, when set. */
  issuer: string | undefined;
}

/** What a verified token grants. */
export interface JwtGrant {
  subject: string | undefined;
  scopes: Scope[];
  queues: string[] | undefined;
  /** Unix seconds. */
  expiresAt: number;
}

/** A token refused, and why (for the 401's message: never the token itself). */
export class JwtRefused extends Error {}

export const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

type Alg = "HS256" | "ES256" | "EdDSA";

interface Verifier {
  alg: Alg;
  kid: string | undefined;
  key: CryptoKey;
}

const encoder = new TextEncoder();
const verifiers = new WeakMap<JwtConfig, Promise<Verifier[]>>();

function importVerifiers(config: JwtConfig): Promise<Verifier[]> {
  let v = verifiers.get(config);
  if (v === undefined) {
    v = Promise.all([
      ...config.secrets.map(async (s) => ({
        alg: "HS256" as const,
        kid: undefined,
        key: await crypto.subtle.importKey("raw", encoder.encode(s), { name: "HMAC", hash: "SHA-256" }, false, [
          "verify",
        ]),
      })),
      ...config.publicKeys.map(async (jwk) => {
        const { kid, alg: _alg, use: _use, key_ops: _ops, ...material } = jwk as JsonWebKey & { kid?: string };
        const ec = jwk.kty === "EC";
        const algorithm = ec ? { name: "ECDSA", namedCurve: "P-256" } : { name: "Ed25519" };
        const key = await crypto.subtle.importKey("jwk", material, algorithm, false, ["verify"]);
        return { alg: (ec ? "ES256" : "EdDSA") as Alg, kid, key };
      }),
    ]);
    verifiers.set(config, v);
    v.catch(() => verifiers.delete(config));
  }
  return v;
}

function decodePart(part: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    const bin = atob(part.replaceAll("-", "+").replaceAll("_", "/"));
    value = JSON.parse(
      new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(Uint8Array.from(bin, (c) => c.charCodeAt(0))),
    );
  } catch {
    throw new JwtRefused(`the token's ${what} is not base64url JSON`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new JwtRefused(`the token's ${what} is not a JSON object`);
  }
  return value as Record<string, unknown>;
}

function signatureBytes(part: string): Uint8Array<ArrayBuffer> {
  try {
    const bin = atob(part.replaceAll("-", "+").replaceAll("_", "/"));
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  } catch {
    throw new JwtRefused("the token's signature is not base64url");
  }
}

async function verifySignature(header: Record<string, unknown>, signed: string, sig: string, config: JwtConfig) {
  const alg = header.alg;
  if (alg !== "HS256" && alg !== "ES256" && alg !== "EdDSA") {
    throw new JwtRefused(`the token's alg ${JSON.stringify(alg)} is not accepted (HS256, ES256 or EdDSA)`);
  }
  const all = (await importVerifiers(config)).filter((v) => v.alg === alg);
  const kid = typeof header.kid === "string" ? header.kid : undefined;
  const candidates = kid === undefined ? all : all.filter((v) => v.kid === undefined || v.kid === kid);
  if (candidates.length === 0) throw new JwtRefused(`no key of this Worker verifies ${alg} tokens`);
  const bytes = signatureBytes(sig);
  const data = encoder.encode(signed);
  for (const v of candidates) {
    const params = v.alg === "ES256" ? { name: "ECDSA", hash: "SHA-256" } : v.alg === "EdDSA" ? "Ed25519" : "HMAC";
    if (await crypto.subtle.verify(params, v.key, bytes, data)) return;
  }
  throw new JwtRefused("the token's signature does not verify");
}

function grantOf(claims: Record<string, unknown>, config: JwtConfig, nowSeconds: number): JwtGrant {
  const exp = claims.exp;
  if (typeof exp !== "number" || !Number.isFinite(exp)) throw new JwtRefused("the token has no exp");
  if (nowSeconds >= exp) throw new JwtRefused("the token expired");
  if (claims.nbf !== undefined && (typeof claims.nbf !== "number" || nowSeconds < claims.nbf)) {
    throw new JwtRefused("the token is not valid yet (nbf)");
  }
  const aud = claims.aud;
  if (!(aud === config.audience || (Array.isArray(aud) && aud.includes(config.audience)))) {
    throw new JwtRefused(`the token's aud is not ${JSON.stringify(config.audience)}`);
  }
  if (config.issuer !== undefined && claims.iss !== config.issuer) {
    throw new JwtRefused(`the token's iss is not ${JSON.stringify(config.issuer)}`);
  }
  const scopes = claims.scopes;
  if (!Array.isArray(scopes) || scopes.length === 0 || scopes.some((s) => scopeProblem(s) !== undefined)) {
    throw new JwtRefused("the token's scopes must list publish, consume, read or manage");
  }
  const queues = claims.queues;
  if (
    queues !== undefined &&
    (!Array.isArray(queues) || queues.length === 0 || queues.some((q) => queuePatternProblem(q) !== undefined))
  ) {
    throw new JwtRefused('the token\'s queues must list queue names or prefixes ending in "*"');
  }
  const sub = claims.sub;
  return {
    subject: typeof sub === "string" ? sub.slice(0, 128) : undefined,
    scopes: scopes as Scope[],
    queues: queues === undefined || (queues as string[]).includes("*") ? undefined : (queues as string[]),
    expiresAt: exp,
  };
}

/** What this isolate verified already under a configuration, by the token's signed part; bounded. */
const remembered = new WeakMap<JwtConfig, Map<string, { sig: string; claims: Record<string, unknown> }>>();
const MAX_REMEMBERED = 1000;

/** The grant of a JWT, or a JwtRefused saying why not. */
export async function verifyJwt(token: string, config: JwtConfig, now = Date.now()): Promise<JwtGrant> {
  const dot = token.lastIndexOf(".");
  const signed = token.slice(0, dot);
  const sig = token.slice(dot + 1);
  let verified = remembered.get(config);
  if (verified === undefined) {
    verified = new Map();
    remembered.set(config, verified);
  }
  const seen = verified.get(signed);
  if (seen !== undefined && sameSecret(sig, seen.sig)) return grantOf(seen.claims, config, now / 1000);
  const [headerPart, payloadPart] = signed.split(".") as [string, string];
  const header = decodePart(headerPart, "header");
  if (header.alg === "none" || sig === "") throw new JwtRefused("unsigned tokens (alg none) are refused");
  const claims = decodePart(payloadPart, "payload");
  await verifySignature(header, signed, sig, config);
  const grant = grantOf(claims, config, now / 1000);
  if (verified.size >= MAX_REMEMBERED) verified.clear();
  verified.set(signed, { sig, claims });
  return grant;
}
