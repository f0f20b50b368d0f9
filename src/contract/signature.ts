/**
 * Push deliveries' signature (Web Crypto only: runs in Workers, Node 20 and browsers):
 * `Turso-Queue-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`.
 */

/** The header deliveries carry. */
export const SIGNATURE_HEADER = "Turso-Queue-Signature";

const encoder = new TextEncoder();
const toHex = (b: ArrayBuffer) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");

async function hmacHex(secret: string, text: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  return toHex(await crypto.subtle.sign("HMAC", key, encoder.encode(text)));
}

/**
 * The header value for `rawBody`, signed at `t` (unix seconds, default now). With several secrets
 * (a subscription's secret and, during its rotation, the next one) it carries one `v1` per secret,
 * so that a consumer holding either verifies it.
 */
export async function signPayload(
  secret: string | readonly string[],
  rawBody: string,
  t = Math.floor(Date.now() / 1000),
): Promise<string> {
  const secrets = typeof secret === "string" ? [secret] : secret;
  const sigs = await Promise.all(secrets.map((s) => hmacHex(s, `${t}.${rawBody}`)));
  return `t=${t},${sigs.map((v) => `v1=${v}`).join(",")}`;
}

/**
 * True when `header` signs `rawBody` (the bytes as received, before parsing) with `secret`, within
 * `toleranceSeconds` (default 300) of now. A malformed header, a stale or future timestamp, a wrong
 * secret or a changed body: false. While you switch to a subscription's next secret, pass both
 * (`[current, next]`): either one verifies.
 */
export async function verifySignature(
  secret: string | readonly string[],
  header: string | null | undefined,
  rawBody: string,
  options: { toleranceSeconds?: number; now?: number } = {},
): Promise<boolean> {
  const secrets = (typeof secret === "string" ? [secret] : Array.isArray(secret) ? secret : []).filter(
    (x): x is string => typeof x === "string" && x !== "",
  );
  if (typeof header !== "string" || secrets.length === 0) return false;
  const parts = new Map<string, string[]>();
  for (const item of header.split(",")) {
    const eq = item.indexOf("=");
    if (eq <= 0) return false;
    const k = item.slice(0, eq).trim();
    parts.set(k, [...(parts.get(k) ?? []), item.slice(eq + 1).trim()]);
  }
  const t = parts.get("t");
  const sigs = parts.get("v1") ?? [];
  if (t?.length !== 1 || !/^[0-9]{1,12}$/.test(t[0] as string) || sigs.length === 0) return false;
  const ts = Number(t[0]);
  const now = options.now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - ts) > (options.toleranceSeconds ?? 300)) return false;
  for (const one of secrets) {
    const expected = await hmacHex(one, `${ts}.${rawBody}`);
    if (sigs.some((s) => constantTimeEqual(s, expected))) return true;
  }
  return false;
}

function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
