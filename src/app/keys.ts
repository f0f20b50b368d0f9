/**
 * Who a request's bearer token is, and what it may do: the root key (QUEUE_TOKEN, and QUEUE_TOKEN_NEXT
 * during a rotation), a key made through the API (`tq_<id>_<secret>`), or a JWT minted elsewhere
 * (src/app/jwt.ts). Nothing here reads a database per request:
 *
 * - the keys made through the API are all known to each isolate (`KnownKeys`): fetched from the key
 *   store (src/core/keys.ts) when first needed, then asked again at most every KEYS.revocationSeconds
 *   (an unchanged set costs a version check, no rows). That bound is how long a key revoked elsewhere
 *   keeps working here. A token shaped like a key whose id is not among them is refused on the spot,
 *   so a flood of made-up keys costs no database read;
 * - a known key's secret is hashed once per isolate; later requests compare the token with the one
 *   that matched, in constant time (no crypto per request);
 * - expiry is checked at every request, against this isolate's clock.
 */
import { type KeyStore, type LiveKey, parseApiKey, secretHash } from "../core/keys.js";
import type { KeyGrant } from "../core/types.js";
import { KEYS, SCOPES } from "../rules.js";
import type { Config } from "./env.js";
import { JWT_SHAPE, JwtRefused, verifyJwt } from "./jwt.js";
import { sameSecret } from "./secrets.js";

/** Who made a request, and what it may do (`id`: as the audit records it). */
export type Principal = KeyGrant;

/** The root key (QUEUE_TOKEN): every scope on every queue. */
export const ROOT: Principal = {
  id: "root",
  kind: "root",
  scopes: [...SCOPES],
  queues: undefined,
  expiresAt: undefined,
};
const ROOT_NEXT: Principal = { ...ROOT, id: "root:next" };

/** Why a token was refused: a 401's message (never the token). */
export class Refused extends Error {}

/** The keys made through the API that one isolate knows, for one deployment (its default database). */
class KnownKeys {
  #version: string | undefined;
  #keys = new Map<string, LiveKey>();
  /** When the set was last confirmed (ms); 0: never. */
  #at = 0;
  #refreshing: Promise<void> | undefined;
  /** Each key's whole token, once its secret's hash matched. */
  readonly #verified = new Map<string, string>();
  /** Keys used since the last sync: their `last_used_at` is stamped then. */
  readonly #used = new Set<string>();

  async principal(token: string, id: string, secret: string, store: KeyStore, now: number): Promise<Principal> {
    const age = now - this.#at;
    // A clock that went back counts as stale too: the bound holds whatever the clock does.
    if (age >= KEYS.revocationSeconds * 1000 || age < 0) await this.#refresh(store, now);
    const key = this.#keys.get(id);
    if (key === undefined) throw new Refused("Authorization: unknown or revoked key");
    const verified = this.#verified.get(id);
    if (verified !== undefined) {
      if (!sameSecret(token, verified)) throw new Refused("Authorization: unknown or revoked key");
    } else {
      if (!sameSecret(await secretHash(secret), key.hash)) throw new Refused("Authorization: unknown or revoked key");
      this.#verified.set(id, token);
    }
    if (key.expiresAt !== undefined && key.expiresAt * 1000 <= now) {
      throw new Refused(`Authorization: the key expired at ${new Date(key.expiresAt * 1000).toISOString()}`);
    }
    return { id, kind: "key", scopes: key.scopes, queues: key.queues, expiresAt: key.expiresAt };
  }

  /** A key was used (its request was authorized): stamped at the next sync. */
  used(id: string): void {
    this.#used.add(id);
  }

  /** Forgets what it knows: the next key asks the store (a key made or revoked through this isolate). */
  forget(): void {
    this.#at = 0;
  }

  /** One refresh at a time; every request waiting on it shares its answer. */
  #refresh(store: KeyStore, now: number): Promise<void> {
    this.#refreshing ??= (async () => {
      try {
        const used = [...this.#used];
        this.#used.clear();
        const got = await store.sync(this.#version, used);
        if (got.keys !== undefined) {
          this.#keys = new Map(got.keys.map((k) => [k.id, k]));
          for (const id of this.#verified.keys()) if (!this.#keys.has(id)) this.#verified.delete(id);
        }
        this.#version = got.version;
        this.#at = now;
      } finally {
        this.#refreshing = undefined;
      }
    })();
    return this.#refreshing;
  }
}

/**
 * Tells who a bearer token is. One per app (so, per isolate in the Worker); it keeps what it
 * learns per deployment (its default database).
 */
export class KeyChecker {
  readonly #known = new Map<string, KnownKeys>();

  /** The token's principal, or a Refused saying why not; `store` is asked only for keys made through the API. */
  async principal(token: string, config: Config, store: () => KeyStore, now = Date.now()): Promise<Principal> {
    // The root keys first (two constant-time comparisons): both are always compared.
    const root = sameSecret(token, config.queueToken);
    const next = config.queueTokenNext !== undefined && sameSecret(token, config.queueTokenNext);
    if (root) return ROOT;
    if (next) return ROOT_NEXT;
    const key = parseApiKey(token);
    if (key !== undefined) return this.#keysOf(config).principal(token, key.id, key.secret, store(), now);
    if (config.jwt !== undefined && JWT_SHAPE.test(token)) {
      try {
        const grant = await verifyJwt(token, config.jwt, now);
        return {
          id: grant.subject === undefined ? "jwt" : `jwt:${grant.subject}`,
          kind: "jwt",
          scopes: grant.scopes,
          queues: grant.queues,
          expiresAt: grant.expiresAt,
        };
      } catch (e) {
        if (e instanceof JwtRefused) throw new Refused(`Authorization: ${e.message}`);
        throw e;
      }
    }
    throw new Refused("Authorization: invalid bearer token");
  }

  /** `p` made a request it may make: a key's `last_used_at` is stamped at the next sync. */
  used(config: Config, p: Principal): void {
    if (p.kind === "key") this.#keysOf(config).used(p.id);
  }

  /** After a key was made or revoked through this app: ask the store at the next key. */
  forget(config: Config): void {
    this.#known.get(config.databaseUrl)?.forget();
  }

  #keysOf(config: Config): KnownKeys {
    let known = this.#known.get(config.databaseUrl);
    if (known === undefined) {
      if (this.#known.size >= 16) this.#known.clear();
      known = new KnownKeys();
      this.#known.set(config.databaseUrl, known);
    }
    return known;
  }
}
