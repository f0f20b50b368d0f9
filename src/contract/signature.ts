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

/** The header value for `rawBody`, signed at `t` (unix seconds, default now). */
export async function signPayload(secret: string, rawBody: string, t = Math.floor(Date.now() / 1000)): Promise<string> {
  return `t=${t},v1=${await hmacHex(secret, `${t}.${rawBody}`)}`;
}

/**
 * True when `header` signs `rawBody` (the bytes as received, before parsing) with `secret`, within
 * `toleranceSeconds` (default 300) of now. A malformed header, a stale or future timestamp, a wrong
 * secret or a changed body: false.
 */
export async function verifySignature(
  secret: string,
  header: string | null | undefined,
  rawBody: string,
  options: { toleranceSeconds?: number; now?: number } = {},
): Promise<boolean> {
  if (typeof header !== "string" || typeof secret !== "string" || secret === "") return false;
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
  const expected = await hmacHex(secret, `${ts}.${rawBody}`);
  return sigs.some((s) => constantTimeEqual(s, expected));
}

function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
