/**
 * Request bodies: JSON objects only, bounded in size (by Content-Length up front and by the bytes
 * actually read), UTF-8, parsed once. Everything here runs before the library is called, so a
 * refused body stores nothing.
 */
import { MAX_BODY_BYTES } from "../rules.js";
import { badRequest, HttpError } from "./errors.js";

const JSON_TYPE = /^application\/(?:[a-z0-9.+-]+\+)?json$/i;

export type JsonObject = Record<string, unknown>;

/** Reads the body as a JSON object; `undefined` when there is none and `required` is false. */
export async function readJsonObject(req: Request, required: boolean): Promise<JsonObject | undefined> {
  const type = req.headers.get("content-type");
  // A declared non-JSON type is refused before a byte is read.
  if (type !== null && !isJsonType(type)) throw unsupported();

  const bytes = await readBodyBytes(req);
  if (bytes.length === 0) {
    if (required) throw badRequest("body", "a JSON object is required");
    return undefined;
  }
  if (type === null) throw unsupported();

  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch {
    throw badRequest("body", "is not valid UTF-8");
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw badRequest("body", `is not valid JSON (${e instanceof Error ? e.message.slice(0, 200) : "parse error"})`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw badRequest("body", "must be a JSON object");
  }
  return value as JsonObject;
}

/** The body's bytes, refused with 413 past MAX_BODY_BYTES (by Content-Length up front, then as read). */
export async function readBodyBytes(req: Request): Promise<Uint8Array<ArrayBuffer>> {
  const length = req.headers.get("content-length");
  if (length !== null) {
    if (!/^\s*\d+\s*$/.test(length)) throw badRequest("Content-Length", "must be a number of bytes");
    if (Number(length) > MAX_BODY_BYTES) throw tooLarge();
    // Framed by its length (the runtime holds the body to it): read in one go, checked again on
    // the bytes. A chunked body is read piece by piece, and refused as soon as it passes the limit.
    const bytes = new Uint8Array(await req.arrayBuffer());
    if (bytes.byteLength > MAX_BODY_BYTES) throw tooLarge();
    return bytes;
  }
  return readBounded(req.body);
}

/** One strict decoder per isolate (`decode` without `stream` starts afresh each call). */
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

function isJsonType(type: string): boolean {
  if (type === "application/json") return true;
  const [essence, ...params] = type.split(";");
  if (!JSON_TYPE.test((essence ?? "").trim())) return false;
  for (const p of params) {
    const [k, v] = p.split("=").map((s) => s.trim().toLowerCase());
    if (k === "charset" && v !== "utf-8" && v !== "utf8" && v !== '"utf-8"') return false;
  }
  return true;
}

async function readBounded(body: ReadableStream<Uint8Array> | null): Promise<Uint8Array<ArrayBuffer>> {
  if (body === null) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > MAX_BODY_BYTES) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge();
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let offset = 0;
  for (const ch of chunks) {
    out.set(ch, offset);
    offset += ch.byteLength;
  }
  return out;
}

const tooLarge = () =>
  new HttpError(413, "PAYLOAD_TOO_LARGE", `body: larger than the maximum of ${MAX_BODY_BYTES} bytes`);
const unsupported = () =>
  new HttpError(415, "UNSUPPORTED_MEDIA_TYPE", "Content-Type: the body must be JSON (application/json; charset=utf-8)");
