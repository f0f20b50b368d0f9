/**
 * Every rule of the queue, written once: limits, patterns, reserved values, defaults, and the words
 * a refusal uses. The library's checks (src/core/validate.ts), the HTTP API's schemas
 * (src/contract/schemas.ts) and the client (src/client) all read them from here, so that the
 * library, the API and the client refuse the same input with the same message.
 *
 * Dependency-free and pure: safe in every runtime and every bundle (the client never loads valibot).
 * A `*Problem` function answers what is wrong with a value (`"must be an integer from 0 to 4, got 9"`),
 * or undefined when nothing is; the caller puts the field's name in front.
 */

/** Longest id (group ids, worker ids, idempotency keys), in UTF-16 code units. */
export const MAX_ID_LENGTH = 512;
/** Largest event, as JSON text in UTF-16 code units (about 1 MiB of ASCII). */
export const MAX_EVENT_CHARS = 1_048_576;
/** Deepest nesting of an event's arrays and objects. */
export const MAX_EVENT_DEPTH = 64;
export const MIN_PRIORITY = 0;
export const MAX_PRIORITY = 4;
/** Longest visibility, delay or park, in seconds (366 days): `now + seconds` stays a sane REAL. */
export const MAX_SECONDS = 366 * 24 * 3600;

/** What `messages.locked_by` holds besides worker ids: the spec's park, a delayed publish, a poison message. */
export const PARKED = "__parked__";
export const DELAYED = "__delayed__";
export const DEAD = "__dead__";
/** The markers, and what each marks: no worker id may be one of them. */
export const RESERVED_HOLDERS: Readonly<Record<string, string>> = {
  [PARKED]: "parked messages",
  [DELAYED]: "delayed messages",
  [DEAD]: "dead messages",
};

/** Most messages in one batch publish. */
export const MAX_PUBLISH_BATCH = 1000;
/**
 * Most leases one claim asks for: consume()'s largest concurrency, so that a round of it is one
 * claim, one request, per database. A claim is one statement whatever its size, and costs the rows
 * its leases cost; what grows with it is the one transaction (the write lock held while its groups
 * are walked) and the answer, which holds every leased event (ask for fewer when events are large).
 */
export const MAX_CLAIM_BATCH = 1000;
/** Longest long poll of a claim, in seconds (SQS's is 20 too). */
export const MAX_CLAIM_WAIT = 20;
/** Most acks one claim carries: a whole round's, as many as its leases. */
export const MAX_CLAIM_ACKS = MAX_CLAIM_BATCH;
/**
 * Most leases one settle acks, nacks and releases: as many as consume() holds at its largest
 * concurrency, so that a consumer gives back everything it holds in one request.
 */
export const MAX_SETTLE_BATCH = 1000;
/** What a settle does with each lease. */
export const SETTLE_ACTIONS = ["ack", "nack", "release"] as const;
/** Dead letters per page. */
export const DEAD_LETTER_PAGE = { default: 100, max: 1000 } as const;
/** Groups one listing returns. */
export const GROUPS_PAGE = { default: 20, max: 100 } as const;
/** A group's next messages one peek returns. */
export const PEEK_PAGE = { default: 10, max: 100 } as const;
/** Messages one write of a purge deletes (a purge of a deeper group takes several). */
export const PURGE_CHUNK = 500;
/** Most messages a group listing counts in one group (a count that reaches it means "at least"). */
export const GROUP_COUNT_CAP = 1000;
/** Largest HTTP request body, in bytes (1 MiB). */
export const MAX_BODY_BYTES = 1_048_576;

/** Deliveries a message gets before it moves to the dead letters, unless configured otherwise. */
export const DEFAULT_MAX_ATTEMPTS = 5;
/** Seconds an idempotency key keeps its first answer, unless configured otherwise (24 h). */
export const DEFAULT_IDEMPOTENCY_WINDOW = 86_400;

/** Push subscriptions: their names, URLs, slots and leases. */
export const SUBSCRIPTION = {
  name: /^[A-Za-z0-9_-]{1,64}$/,
  maxUrlLength: 2048,
  maxInFlight: 100,
  defaultInFlight: 10,
  defaultVisibility: 30,
} as const;

/**
 * The pauses of a loop that polls for messages where nothing can tell it when one arrives: from
 * `minMs`, doubling per empty claim, up to `maxMs` (consume()'s idle backoff, a long poll served
 * without the writer, the client's `wait` on an API without long polls).
 */
export const IDLE_POLL = { minMs: 50, maxMs: 1000 } as const;

/** A lease id: `<seq>.<32 hex>`, the message and the token that fences its holder. */
export const LEASE_ID = /^([1-9][0-9]{0,15})\.([0-9a-f]{32})$/;

/** Lease ids are built and read here only. */
export const leaseId = {
  of: (seq: number, token: string): string => `${seq}.${token}`,
  /** The message and token an id names, or undefined for what is not a lease id. */
  parse(id: unknown): { seq: number; token: string } | undefined {
    const m = typeof id === "string" ? LEASE_ID.exec(id) : null;
    return m ? { seq: Number(m[1]), token: m[2] as string } : undefined;
  },
};

// ---------------------------------------------------------------------------------------------
// problems

/** How a refused value is quoted in a message: `9`, `"30"`, `null`, `an object`. */
export function describe(v: unknown): string {
  if (v === null) return "null";
  if (typeof v === "number") return String(v);
  if (typeof v === "string") return v.length > 40 ? `a string of ${v.length} characters` : JSON.stringify(v);
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : typeof v;
}

/** No lone surrogates (what UTF-8, JSON on the wire and SQLite's TEXT need). */
export function isWellFormed(s: string): boolean {
  // String.prototype.isWellFormed is Node 20+ and workerd; fall back to a regex elsewhere.
  const f = (s as { isWellFormed?: () => boolean }).isWellFormed;
  if (typeof f === "function") return f.call(s);
  return !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
}

/** Group ids, worker ids and idempotency keys: 1 to 512 code units, no NUL, well-formed Unicode. */
export function idProblem(v: unknown): string | undefined {
  if (typeof v !== "string") return `must be a string, got ${describe(v)}`;
  if (v.length === 0) return "must not be empty";
  if (v.length > MAX_ID_LENGTH) return `must be at most ${MAX_ID_LENGTH} characters`;
  if (v.includes("\u0000")) return "must not contain NUL characters";
  if (!isWellFormed(v)) return "must be well-formed Unicode (no lone surrogates)";
  return undefined;
}

/** A worker id is an id that may not impersonate the markers `locked_by` also holds. */
export function workerIdProblem(v: unknown): string | undefined {
  const p = idProblem(v);
  if (p !== undefined) return p;
  const marks = Object.hasOwn(RESERVED_HOLDERS, v as string) ? RESERVED_HOLDERS[v as string] : undefined;
  if (marks !== undefined) return `must not be ${JSON.stringify(v)} (reserved for ${marks})`;
  return undefined;
}

/** An integer from `min` to `max`. */
export function integerProblem(v: unknown, min: number, max: number): string | undefined {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    return `must be an integer from ${min} to ${max}, got ${describe(v)}`;
  }
  return undefined;
}

export const priorityProblem = (v: unknown) => integerProblem(v, MIN_PRIORITY, MAX_PRIORITY);

/** A count from 1 to `max` (leases, messages, a page). */
export const countProblem = (v: unknown, max: number) => integerProblem(v, 1, max);

/** Seconds, finite, `> 0` (a visibility) or `>= 0` (a delay), at most `max`. */
export function secondsProblem(v: unknown, min: "> 0" | ">= 0", max: number = MAX_SECONDS): string | undefined {
  if (typeof v !== "number" || !Number.isFinite(v) || (min === "> 0" ? v <= 0 : v < 0)) {
    return `must be a finite number of seconds ${min}, got ${describe(v)}`;
  }
  if (v > max) return `must be at most ${max} seconds, got ${v}`;
  return undefined;
}

/** A long poll's wait: 0 to MAX_CLAIM_WAIT seconds. */
export function waitProblem(v: unknown): string | undefined {
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0 || v > MAX_CLAIM_WAIT) {
    return `must be a number of seconds from 0 to ${MAX_CLAIM_WAIT}, got ${describe(v)}`;
  }
  return undefined;
}

/** A message's seq (a dead letter's, for one): a positive safe integer. */
export function seqProblem(v: unknown): string | undefined {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1)
    return `must be a positive integer, got ${describe(v)}`;
  return undefined;
}

export function leaseIdProblem(v: unknown): string | undefined {
  return typeof v === "string" && LEASE_ID.test(v) ? undefined : "is not a lease id of this queue";
}

export function settleActionProblem(v: unknown): string | undefined {
  return (SETTLE_ACTIONS as readonly unknown[]).includes(v)
    ? undefined
    : `must be ${SETTLE_ACTIONS.map((a) => JSON.stringify(a)).join(", ")}, got ${describe(v)}`;
}

/** Only a nack takes a delay (an ack deletes the message; a release frees it at once). */
export const SETTLE_DELAY_PROBLEM = 'is only for "nack"';

/** A name of A-Z, a-z, 0-9, `_` and `-`, 1 to 64 long: a subscription's, and a sqld namespace's. */
export function plainNameProblem(v: unknown): string | undefined {
  if (typeof v !== "string" || !SUBSCRIPTION.name.test(v)) {
    return `must be 1 to 64 of A-Z, a-z, 0-9, "_" and "-", got ${describe(v)}`;
  }
  return undefined;
}

export const subscriptionNameProblem = plainNameProblem;

/** Where pushes go: an absolute http(s) URL without credentials (consumers check the signature instead). */
export function pushUrlProblem(v: unknown): string | undefined {
  if (typeof v !== "string") return `must be a string, got ${describe(v)}`;
  if (v.length > SUBSCRIPTION.maxUrlLength) return `must be at most ${SUBSCRIPTION.maxUrlLength} characters`;
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    return `must be an absolute http or https URL, got ${describe(v)}`;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return `must be an absolute http or https URL, got ${describe(v)}`;
  }
  if (url.username !== "" || url.password !== "") {
    return "must not hold credentials (verify the Turso-Queue-Signature header instead)";
  }
  return undefined;
}

/** The worker a push subscription's leases are held by (its deliveries' leases name it). */
export const pushWorkerId = (subscription: string): string => `push:${subscription}`;

// ---------------------------------------------------------------------------------------------
// named and sharded queues

/** The queue that `/v1/...` (no queue in the path) and a Worker's TURSO_DATABASE_URL serve. */
export const DEFAULT_QUEUE = "default";
/** Most shards (databases) one queue spreads over. */
export const MAX_SHARDS = 16;

/**
 * A queue's name: 1 to 40 of a-z, 0-9 and "-", starting and ending with a letter or digit, no "--"
 * (a shard's database is `<name>--<shard>`), so that it is a valid Turso database name and sqld
 * namespace as it is.
 */
/** A queue's name: also a database's (its shards' are `<name>--<n>`), so no `--` of its own. */
export const QUEUE_NAME = {
  maxLength: 40,
  pattern: /^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$/,
  text: 'of a-z, 0-9 and "-", starting and ending with a letter or digit, without "--"',
} as const;

export function queueNameProblem(v: unknown): string | undefined {
  if (typeof v !== "string" || !QUEUE_NAME.pattern.test(v) || v.includes("--")) {
    return `must be 1 to ${QUEUE_NAME.maxLength} ${QUEUE_NAME.text}, got ${describe(v)}`;
  }
  return undefined;
}

/**
 * The shard a group lives on: FNV-1a (32 bits) of the group id's UTF-8 bytes, modulo the shard
 * count. Stable across processes, runtimes and languages, so that every publisher puts a group's
 * messages in one database and FIFO and one-in-flight per group hold as on one database.
 */
export function shardOf(groupId: string, shards: number): number {
  if (shards <= 1) return 0;
  let h = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(groupId)) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % shards;
}

/**
 * A sharded queue's seqs (and lease ids, which start with one) name their shard: `seq × MAX_SHARDS +
 * shard` (a one-shard queue keeps its database's seqs as they are). A group's seqs still grow in
 * publish order, since a group lives on one shard.
 */
export const shardedSeq = {
  of: (local: number, shard: number, shards: number): number => (shards <= 1 ? local : local * MAX_SHARDS + shard),
  shard: (seq: number, shards: number): number => (shards <= 1 ? 0 : seq % MAX_SHARDS),
  local: (seq: number, shards: number): number => (shards <= 1 ? seq : Math.floor(seq / MAX_SHARDS)),
};

/** Where a Durable Object may be asked to run (Cloudflare's location hints): next to its database's primary. */
export const LOCATION_HINTS = ["wnam", "enam", "sam", "weur", "eeur", "apac", "oc", "afr", "me"] as const;

export function locationHintProblem(v: unknown): string | undefined {
  return typeof v === "string" && (LOCATION_HINTS as readonly string[]).includes(v)
    ? undefined
    : `must be one of ${LOCATION_HINTS.join(", ")}, got ${describe(v)}`;
}

/** The database of a queue's shard: the queue's name, or `<name>--<shard>` when it has several. */
export const shardDatabaseName = (queue: string, shard: number, shards: number): string =>
  shards <= 1 ? queue : `${queue}--${shard}`;

/** A push subscription's signing secret, when the caller sets it (to share or rotate one): 16 to 256 visible ASCII characters. */
/** A push subscription's signing secret, when given: visible ASCII. */
export const SIGNING_SECRET = { minLength: 16, maxLength: 256 } as const;

export function signingSecretProblem(v: unknown): string | undefined {
  const { minLength: min, maxLength: max } = SIGNING_SECRET;
  if (typeof v !== "string" || v.length < min || v.length > max || !/^[!-~]*$/.test(v)) {
    return `must be ${min} to ${max} visible ASCII characters, got ${describe(v)}`;
  }
  return undefined;
}

/** A W3C trace context (`traceparent`, version 00): what a message may carry from its publisher's trace. */
export const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

export function traceparentProblem(v: unknown): string | undefined {
  return typeof v === "string" && TRACEPARENT.test(v)
    ? undefined
    : `must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>), got ${describe(v)}`;
}

// ---------------------------------------------------------------------------------------------
// keys: who may do what, on which queue

/**
 * What a key may do. `publish`: publish; `consume`: claim, ack, nack, extend, release; `read`: stats,
 * queues, groups, peek, history, dead letters, subscriptions, `/metrics`; `manage`: make, change and
 * delete queues, purge, redrive and delete dead letters, subscriptions, keys and the audit.
 */
export const SCOPES = ["publish", "consume", "read", "manage"] as const;
export type Scope = (typeof SCOPES)[number];

/**
 * A key made through the API: `tq_<id>_<secret>`, the id 16 hex digits (listed, audited), the secret
 * 43 base64url characters (256 random bits; only its SHA-256 is stored). The prefix lets secret
 * scanners find a leaked one.
 */
export const API_KEY = /^tq_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;
export const KEY_ID = /^[0-9a-f]{16}$/;

export const KEYS = {
  /** Longest key name. */
  maxName: 64,
  /** Most queue patterns a key names. */
  maxQueues: 32,
  /** Longest life given at creation (`expires_in`): 10 years. */
  maxExpiresIn: 10 * 366 * 24 * 3600,
  /** Keys a deployment holds at most (each edge isolate keeps all of them in memory). */
  max: 1000,
  /** Seconds within which a revoked key stops working on every isolate (how long one trusts what it knows). */
  revocationSeconds: 5,
  /** A key's `last_used_at` is written at most this often (seconds): its precision, and its cost in rows. */
  lastUsedSeconds: 60,
  /** An expired key is still listed (as expired) this long, then removed at the next key made (seconds). */
  expiredKeptSeconds: 86_400,
} as const;

/** The audit of `manage` actions: how much is kept, and its pages. */
export const AUDIT = { retention: 10_000, page: { default: 50, max: 500 } } as const;

export function scopeProblem(v: unknown): string | undefined {
  return typeof v === "string" && (SCOPES as readonly string[]).includes(v)
    ? undefined
    : `must be one of ${SCOPES.join(", ")}, got ${describe(v)}`;
}

export function keyNameProblem(v: unknown): string | undefined {
  const p = idProblem(v);
  if (p !== undefined) return p;
  return (v as string).length > KEYS.maxName ? `must be at most ${KEYS.maxName} characters` : undefined;
}

export function keyIdProblem(v: unknown): string | undefined {
  return typeof v === "string" && KEY_ID.test(v) ? undefined : `must be a key id (16 hex digits), got ${describe(v)}`;
}

/**
 * A queue a key may touch: a queue's exact name, or a prefix ending in `*` (`tenant-*`; `*` alone is
 * every queue).
 */
export function queuePatternProblem(v: unknown): string | undefined {
  const words = `must be a queue name or a prefix of one ending in "*" (like "tenant-*"), got ${describe(v)}`;
  if (typeof v !== "string") return words;
  if (v.endsWith("*")) return /^(?:[a-z0-9][a-z0-9-]{0,38})?\*$/.test(v) && !v.includes("--") ? undefined : words;
  return queueNameProblem(v) === undefined ? undefined : words;
}

/** Whether a key limited to `patterns` (undefined: every queue) may touch `queue`. */
export function queueAllowed(patterns: readonly string[] | undefined, queue: string): boolean {
  if (patterns === undefined) return true;
  for (const p of patterns) {
    if (p.endsWith("*") ? queue.startsWith(p.slice(0, -1)) : p === queue) return true;
  }
  return false;
}

/** A key's life at creation, in whole seconds. */
export const expiresInProblem = (v: unknown) => integerProblem(v, 1, KEYS.maxExpiresIn);

// flow control: a group's concurrency and rate, pauses, schedules, singleton publishes

/** Leases one group may hold at once (1, the default, is one message in flight per group). */
export const MAX_GROUP_CONCURRENCY = 1000;

/**
 * A group's rate: at most `limit` claims per `period` seconds, spaced `period / limit` apart, of
 * which `burst` (default 1, at most `limit`) may go back to back after a quiet spell (a token
 * bucket of `burst` tokens refilled one per `period / limit` seconds).
 */
export const RATE = { maxLimit: 100_000, defaultBurst: 1 } as const;

/** A concurrency: 1 to MAX_GROUP_CONCURRENCY leases at once. */
export const concurrencyProblem = (v: unknown) => integerProblem(v, 1, MAX_GROUP_CONCURRENCY);

/** A schedule's name: as a subscription's. */
export const scheduleNameProblem = subscriptionNameProblem;

/** A schedule's interval (`every`), in seconds: at least 1. */
export function everyProblem(v: unknown): string | undefined {
  if (typeof v !== "number" || !Number.isFinite(v) || v < 1 || v > MAX_SECONDS) {
    return `must be a number of seconds from 1 to ${MAX_SECONDS}, got ${describe(v)}`;
  }
  return undefined;
}

/** A singleton key: an id (it names one waiting message of the queue at a time). */
export const singletonKeyProblem = idProblem;

/** An IANA time zone (`Europe/Paris`), as the runtime's Intl knows them. */
export function timeZoneProblem(v: unknown): string | undefined {
  if (typeof v !== "string" || v.length === 0 || v.length > 64) return `must be an IANA time zone, got ${describe(v)}`;
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: v });
    return undefined;
  } catch {
    return `must be an IANA time zone such as "Europe/Paris", got ${describe(v)}`;
  }
}
