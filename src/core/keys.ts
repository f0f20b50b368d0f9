/**
 * Keys made through the API and the audit of `manage` actions, kept in the default queue's database
 * (the plans of src/core/sql/keys.ts). A key is `tq_<id>_<secret>`; only the SHA-256 of its secret is
 * stored, so reading the database gives no usable key. Internal to the package: the app is handed a
 * `KeyStore` (this one over a transport, or the Worker's over the default queue's writer).
 */
import {
  API_KEY,
  AUDIT,
  expiresInProblem,
  KEYS,
  keyIdProblem,
  keyNameProblem,
  queuePatternProblem,
  SCOPES,
  type Scope,
  scopeProblem,
} from "../rules.js";
import { invalid, QueueError } from "./errors.js";
import { internalsOf } from "./internals.js";
import { randomToken } from "./random.js";
import {
  type AuditRow,
  addAuditPlan,
  addKeyPlan,
  auditPagePlan,
  type KeyRow,
  listKeysPlan,
  markKeysUsedPlan,
  type Plan,
  revokeKeyPlan,
} from "./sql/index.js";

export type { AuditRow, KeyRow };

/** What a key is made with. */
export interface NewKey {
  name: string;
  scopes: Scope[];
  /** Queue names and `prefix*` patterns it may touch; absent: every queue. */
  queues?: string[] | undefined;
  /** Seconds it lives; absent: until revoked. */
  expiresIn?: number | undefined;
}

/** What the edge keeps of a key to check one presented to it. */
export interface LiveKey {
  id: string;
  hash: string;
  scopes: Scope[];
  queues: string[] | undefined;
  expiresAt: number | undefined;
}

/** The keys as of `version`; `keys` absent when the asker's version is current. */
export interface KeySync {
  version: string;
  keys?: LiveKey[];
}

/** A `manage` action to record. */
export interface AuditInput {
  keyId: string;
  action: string;
  queue?: string | undefined;
  detail?: Record<string, unknown> | undefined;
}

export interface AuditPage {
  entries: AuditRow[];
  /** Pass as `before` for the next (older) page; undefined on the last. */
  nextBefore: number | undefined;
}

/** Where the app keeps keys and the audit. */
export interface KeyStore {
  /** Makes a key; the secret is answered this once. */
  create(input: NewKey, createdBy: string): Promise<{ key: KeyRow; secret: string }>;
  list(): Promise<KeyRow[]>;
  /** False when there was no such key. */
  revoke(id: string): Promise<boolean>;
  /** The live keys unless `version` is current; stamps `used` (ids) as used. */
  sync(version: string | undefined, used: string[]): Promise<KeySync>;
  audit(entry: AuditInput): Promise<void>;
  auditPage(before: number | undefined, limit: number): Promise<AuditPage>;
}

/** Checks a new key's fields before anything is written; names each field as the API does. */
export function checkNewKey(input: NewKey): NewKey {
  const name = keyNameProblem(input.name);
  if (name !== undefined) throw invalid("name", name);
  if (!Array.isArray(input.scopes) || input.scopes.length === 0) {
    throw invalid("scopes", `must list 1 to ${SCOPES.length} of ${SCOPES.join(", ")}`);
  }
  input.scopes.forEach((s, i) => {
    const p = scopeProblem(s);
    if (p !== undefined) throw invalid(`scopes[${i}]`, p);
  });
  if (new Set(input.scopes).size !== input.scopes.length) throw invalid("scopes", "must not repeat a scope");
  if (input.queues !== undefined) {
    if (!Array.isArray(input.queues) || input.queues.length === 0 || input.queues.length > KEYS.maxQueues) {
      throw invalid("queues", `must list 1 to ${KEYS.maxQueues} queues (leave it out for every queue)`);
    }
    input.queues.forEach((q, i) => {
      const p = queuePatternProblem(q);
      if (p !== undefined) throw invalid(`queues[${i}]`, p);
    });
  }
  if (input.expiresIn !== undefined) {
    const p = expiresInProblem(input.expiresIn);
    if (p !== undefined) throw invalid("expires_in", p);
  }
  // "*" is every queue: the same as naming none.
  const queues = input.queues?.includes("*") ? undefined : input.queues && [...new Set(input.queues)];
  return {
    name: input.name,
    scopes: SCOPES.filter((s) => input.scopes.includes(s)),
    queues,
    expiresIn: input.expiresIn,
  };
}

/** `tq_<id>_<secret>` split, or undefined for what is not shaped like a key. */
export function parseApiKey(text: string): { id: string; secret: string } | undefined {
  const m = API_KEY.exec(text);
  return m ? { id: m[1] as string, secret: m[2] as string } : undefined;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** Hex SHA-256 of a key's secret: what is stored and compared. */
export async function secretHash(secret: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(secret)));
  let out = "";
  for (const b of digest) out += HEX[b];
  return out;
}

/** 256 random bits as 43 base64url characters. */
function newSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

/**
 * The keys and the audit in the database of `home` (the default queue's transport). One per
 * transport, so that a writer's API and its edge-facing `sync` share what they remember.
 */
export class KeyRing implements KeyStore {
  readonly #home: object;
  /** What `sync` answered last: the keys, read at `at`, as `version` (this object's, then a counter). */
  #known: { version: string; keys: LiveKey[]; at: number } | undefined;
  readonly #instance = randomToken().slice(0, 8);
  #generation = 0;
  /** When each key's use was last written (ms), so that a busy key is not stamped at every sync. */
  readonly #stamped = new Map<string, number>();
  /**
   * How long what was read is trusted (ms): 0 re-reads at every sync (any process may change the
   * keys); the default queue's writer, through which every change goes, trusts it longer.
   */
  trustMs = 0;

  constructor(home: object) {
    this.#home = home;
  }

  async create(input: NewKey, createdBy: string): Promise<{ key: KeyRow; secret: string }> {
    const checked = checkNewKey(input);
    const id = randomToken().slice(0, 16);
    const secret = newSecret();
    const key = await this.#write(
      addKeyPlan(
        {
          id,
          name: checked.name,
          hash: await secretHash(secret),
          scopes: checked.scopes,
          queues: checked.queues,
          createdBy,
        },
        checked.expiresIn,
        KEYS,
      ),
    );
    if (key === undefined) {
      throw new QueueError("KEY_LIMIT", `keys: this deployment holds ${KEYS.max} keys already (revoke some first)`);
    }
    this.#known = undefined;
    return { key, secret: `tq_${id}_${secret}` };
  }

  list(): Promise<KeyRow[]> {
    return this.#read(listKeysPlan());
  }

  async revoke(id: string): Promise<boolean> {
    const p = keyIdProblem(id);
    if (p !== undefined) throw invalid("key_id", p);
    const removed = await this.#write(revokeKeyPlan(id));
    this.#known = undefined;
    return removed;
  }

  async sync(version: string | undefined, used: string[]): Promise<KeySync> {
    const now = Date.now();
    const stale = used.filter((id) => now - (this.#stamped.get(id) ?? 0) >= KEYS.lastUsedSeconds * 1000);
    if (stale.length > 0) {
      if (this.#stamped.size > KEYS.max * 2) this.#stamped.clear();
      for (const id of stale) this.#stamped.set(id, now);
      await this.#write(markKeysUsedPlan(stale.slice(0, KEYS.max), KEYS.lastUsedSeconds));
    }
    let known = this.#known;
    // (A clock that went back ends the trust too.)
    if (known === undefined || now - known.at >= this.trustMs || now < known.at) {
      const keys = (await this.list()).map(({ id, hash, scopes, queues, expiresAt }) => ({
        id,
        hash,
        scopes,
        queues,
        expiresAt,
      }));
      known = { version: `${this.#instance}.${++this.#generation}`, keys, at: now };
      this.#known = known;
    }
    return version === known.version ? { version } : { version: known.version, keys: known.keys };
  }

  audit(entry: AuditInput): Promise<void> {
    return this.#write(
      addAuditPlan(
        { keyId: entry.keyId, action: entry.action, queue: entry.queue, detail: entry.detail },
        AUDIT.retention,
      ),
    );
  }

  async auditPage(before: number | undefined, limit: number): Promise<AuditPage> {
    const entries = await this.#read(auditPagePlan(before, limit));
    return { entries, nextBefore: entries.length === limit ? entries.at(-1)?.id : undefined };
  }

  #read<T>(plan: Plan<T>): Promise<T> {
    return internalsOf(this.#home).conn.readPlan(plan);
  }

  #write<T>(plan: Plan<T>): Promise<T> {
    return internalsOf(this.#home).conn.writes.submit({ ...plan, idempotent: true });
  }
}

const rings = new WeakMap<object, KeyRing>();

/**
 * The key ring of the default queue's transport `home`, one per transport; `trustMs` (KeyRing.trustMs)
 * when given: the default queue's writer trusts what it read, since every change goes through it.
 */
export function keyRingOf(home: object, trustMs?: number): KeyRing {
  let ring = rings.get(home);
  if (ring === undefined) {
    ring = new KeyRing(home);
    rings.set(home, ring);
  }
  if (trustMs !== undefined) ring.trustMs = trustMs;
  return ring;
}

/**
 * The key ring of the default queue's transport, opened on first use (`home` opens it): what an app
 * is handed when nothing else keeps its keys.
 */
export function lazyKeyStore(home: () => Promise<object>): KeyStore {
  const ring = async () => keyRingOf(await home());
  return {
    create: async (input, by) => (await ring()).create(input, by),
    list: async () => (await ring()).list(),
    revoke: async (id) => (await ring()).revoke(id),
    sync: async (version, used) => (await ring()).sync(version, used),
    audit: async (entry) => (await ring()).audit(entry),
    auditPage: async (before, limit) => (await ring()).auditPage(before, limit),
  };
}
