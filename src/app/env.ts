/**
 * The Worker's configuration, parsed from its bindings once per isolate (per bindings object) with
 * errors that say what to set and where. Nothing here touches the network.
 */
import type { Database } from "../core/databases.js";
import { DEFAULT_QUEUE, locationHintProblem } from "../rules.js";
import type { JwtConfig } from "./jwt.js";

/** What `wrangler.toml` [vars] and `wrangler secret put` provide. */
export interface Bindings {
  /** `libsql://<db>-<org>.turso.io`, or `http://127.0.0.1:8080` for a local sqld. A [var]. */
  TURSO_DATABASE_URL?: string;
  /** The database token (`turso db tokens create <db>`). A secret; optional for a local sqld. */
  TURSO_AUTH_TOKEN?: string;
  /** The root key: every scope on every queue. A secret; the API refuses to run without it. */
  QUEUE_TOKEN?: string;
  /**
   * During a rotation of QUEUE_TOKEN, the next root key, accepted as well; then make it QUEUE_TOKEN
   * and delete this one. A secret.
   */
  QUEUE_TOKEN_NEXT?: string;
  /** HS256 secret (32 characters or more) that JWTs minted elsewhere are signed with. A secret. */
  QUEUE_JWT_SECRET?: string;
  /** During a rotation of QUEUE_JWT_SECRET, the next one, accepted as well. A secret. */
  QUEUE_JWT_SECRET_NEXT?: string;
  /**
   * Public keys that JWTs minted elsewhere are signed with: a JWK or a JWK set (`{"keys": [...]}`),
   * EC P-256 (ES256) or OKP Ed25519 (EdDSA); several during a rotation (told apart by `kid`). A [var].
   */
  QUEUE_JWT_PUBLIC_KEYS?: string;
  /** The `aud` every JWT must carry (default `turso-queue`). A [var]. */
  QUEUE_JWT_AUDIENCE?: string;
  /** The `iss` every JWT must carry, if set. A [var]. */
  QUEUE_JWT_ISSUER?: string;
  /**
   * Seconds between the QueueWriter's safety re-checks for long-poll waiters and push subscriptions
   * (default 2): how late they may learn of a message written by something that bypasses the Worker. A [var].
   */
  QUEUE_RECHECK_SECONDS?: string;
  /**
   * Push deliveries the QueueWriter keeps in flight at once, shared fairly among subscriptions
   * (default 4, 1-64). A Workers invocation opens 6 connections at once and queues the rest, the
   * database's requests included: raise it only for consumers that answer fast. A [var].
   */
  QUEUE_PUSH_CONNECTIONS?: string;
  /**
   * Most ms the QueueWriter holds its next write batch for the consumers the last one answered to come
   * back with their next write (default 4, 0-1000; 0: never). See `holdMs` in docs/library.md. A [var].
   */
  QUEUE_HOLD_MS?: string;
  /**
   * Most ms the QueueWriter's acks, nacks and releases wait, when nothing else is queued, for another
   * write's batch to ride (default 100, 0-1000; 0: never). See `rideMs` in docs/library.md. A [var].
   */
  QUEUE_RIDE_MS?: string;
  /**
   * Seconds between the samples of a queue's state its writer keeps for the dashboard's charts
   * (default 60, 1-3600; the last 60 are kept: an hour at the default). A [var].
   */
  QUEUE_SAMPLE_SECONDS?: string;
  /**
   * Where named queues' databases come from (`PUT /v1/queues/{queue}` makes them): `namespaces` (one
   * sqld with `--enable-namespaces`: TURSO_DATABASE_URL is its HTTP URL, SQLD_ADMIN_URL its admin
   * API, the default queue the namespace `default`), `turso` (the Platform API: TURSO_ORG,
   * TURSO_GROUP and the secret TURSO_API_TOKEN; TURSO_AUTH_TOKEN must then be a group token), or a
   * JSON map of queue database names to URLs (`{"emails": "libsql://…"}`) for databases you manage.
   * Unset: only the default queue. A [var].
   */
  QUEUE_DATABASES?: string;
  /** The admin API of the sqld that holds the namespaces (QUEUE_DATABASES = "namespaces"). A [var]. */
  SQLD_ADMIN_URL?: string;
  /** Your Turso organization and the group new databases go in (QUEUE_DATABASES = "turso"). [vars]. */
  TURSO_ORG?: string;
  TURSO_GROUP?: string;
  /** A Turso Platform API token (`turso auth api-tokens mint`). A secret. */
  TURSO_API_TOKEN?: string;
  /**
   * Where the queues' writers (Durable Objects) should run unless a queue says otherwise: next to
   * the databases' primary (wnam, enam, sam, weur, eeur, apac, oc, afr, me). A [var].
   */
  QUEUE_LOCATION_HINT?: string;
}

/** Where named queues' databases come from (QUEUE_DATABASES), checked. */
export type DatabasesConfig =
  | { kind: "none" }
  | { kind: "namespaces"; adminUrl: string }
  | { kind: "turso"; organization: string; group: string; apiToken: string }
  | { kind: "static"; map: Record<string, Database> };

export interface Config {
  /** An `http:`/`https:`/`libsql:` URL (libsql: is sent over HTTP: one request per operation). */
  databaseUrl: string;
  databaseAuthToken: string | undefined;
  /** The default queue's database (with its namespace when QUEUE_DATABASES is `namespaces`). */
  database: Database;
  /** QUEUE_DATABASES and what it needs. */
  databases: DatabasesConfig;
  /** QUEUE_LOCATION_HINT. */
  locationHint: string | undefined;
  /** QUEUE_TOKEN, the root key. */
  queueToken: string;
  /** QUEUE_TOKEN_NEXT, during a rotation. */
  queueTokenNext: string | undefined;
  /** JWTs minted elsewhere (QUEUE_JWT_*); undefined when none is configured. */
  jwt: JwtConfig | undefined;
  /** QUEUE_RECHECK_SECONDS in ms (also the push subscriptions' re-check). */
  recheckMs: number;
  /** QUEUE_PUSH_CONNECTIONS. */
  pushConnections: number;
  /** QUEUE_HOLD_MS. */
  holdMs: number;
  /** QUEUE_RIDE_MS. */
  rideMs: number;
  /** QUEUE_SAMPLE_SECONDS in ms. */
  sampleMs: number;
}

/** The namespace of the default queue's database on an sqld with namespaces. */
export const DEFAULT_NAMESPACE = DEFAULT_QUEUE;

/** Shortest QUEUE_TOKEN accepted: a guessable token is as good as none. */
export const MIN_QUEUE_TOKEN_LENGTH = 16;

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`the Worker is not configured: ${problems.join("; ")}`);
    this.name = "ConfigError";
    this.problems = problems;
  }
}

export type ParsedConfig = { ok: true; config: Config } | { ok: false; error: ConfigError };

const cache = new WeakMap<object, ParsedConfig>();

/** Parses `env` once (cached per bindings object, which is stable within an isolate). */
export function parseEnv(env: unknown): ParsedConfig {
  const key = typeof env === "object" && env !== null ? env : EMPTY;
  let parsed = cache.get(key);
  if (!parsed) {
    parsed = parse(key as Record<string, unknown>);
    cache.set(key, parsed);
  }
  return parsed;
}

const EMPTY = {};

function parse(env: Record<string, unknown>): ParsedConfig {
  const problems: string[] = [];
  const str = (name: string): string | undefined => {
    const v = env[name];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "string") {
      problems.push(`${name} must be a string`);
      return undefined;
    }
    const t = v.trim();
    return t === "" ? undefined : t;
  };

  const queueToken = str("QUEUE_TOKEN");
  if (queueToken === undefined) {
    problems.push(
      "QUEUE_TOKEN is not set (run `wrangler secret put QUEUE_TOKEN`); every /v1 request is refused until it is",
    );
  } else if (queueToken.length < MIN_QUEUE_TOKEN_LENGTH) {
    problems.push(`QUEUE_TOKEN must be at least ${MIN_QUEUE_TOKEN_LENGTH} characters`);
  }

  const queueTokenNext = str("QUEUE_TOKEN_NEXT");
  if (queueTokenNext !== undefined && queueTokenNext.length < MIN_QUEUE_TOKEN_LENGTH) {
    problems.push(`QUEUE_TOKEN_NEXT must be at least ${MIN_QUEUE_TOKEN_LENGTH} characters`);
  } else if (queueTokenNext !== undefined && queueTokenNext === queueToken) {
    problems.push("QUEUE_TOKEN_NEXT is QUEUE_TOKEN: delete QUEUE_TOKEN_NEXT once the rotation is over");
  }
  const jwt = jwtOf(str, problems);

  const url = str("TURSO_DATABASE_URL");
  if (url === undefined) {
    problems.push("TURSO_DATABASE_URL is not set (a [vars] entry in wrangler.toml, e.g. libsql://<db>-<org>.turso.io)");
  } else {
    let parsedUrl: URL | undefined;
    try {
      parsedUrl = new URL(url);
    } catch {
      problems.push("TURSO_DATABASE_URL is not a valid URL");
    }
    if (parsedUrl && !["libsql:", "http:", "https:"].includes(parsedUrl.protocol)) {
      problems.push(
        `TURSO_DATABASE_URL must be a libsql:, https: or http: URL, got ${parsedUrl.protocol} (a Worker talks to the database over HTTP)`,
      );
    }
  }

  const authToken = str("TURSO_AUTH_TOKEN");
  const recheck = str("QUEUE_RECHECK_SECONDS") ?? "2";
  const recheckSeconds = Number(recheck);
  if (!(recheckSeconds >= 0.05 && recheckSeconds <= 300)) {
    problems.push(`QUEUE_RECHECK_SECONDS must be a number of seconds from 0.05 to 300, got ${JSON.stringify(recheck)}`);
  }
  const connections = str("QUEUE_PUSH_CONNECTIONS") ?? "4";
  const pushConnections = Number(connections);
  if (!(Number.isInteger(pushConnections) && pushConnections >= 1 && pushConnections <= 64)) {
    problems.push(`QUEUE_PUSH_CONNECTIONS must be an integer from 1 to 64, got ${JSON.stringify(connections)}`);
  }
  /** A wait of the writer's batches (`holdMs`, `rideMs`): integer ms, 0-1000. */
  const waitMs = (name: "QUEUE_HOLD_MS" | "QUEUE_RIDE_MS", byDefault: number) => {
    const text = str(name) ?? String(byDefault);
    const ms = Number(text);
    if (!(Number.isInteger(ms) && ms >= 0 && ms <= 1000)) {
      problems.push(`${name} must be an integer number of ms from 0 to 1000, got ${JSON.stringify(text)}`);
    }
    return ms;
  };
  const holdMs = waitMs("QUEUE_HOLD_MS", 4);
  const rideMs = waitMs("QUEUE_RIDE_MS", 100);
  const sample = str("QUEUE_SAMPLE_SECONDS") ?? "60";
  const sampleSeconds = Number(sample);
  if (!(Number.isInteger(sampleSeconds) && sampleSeconds >= 1 && sampleSeconds <= 3600)) {
    problems.push(
      `QUEUE_SAMPLE_SECONDS must be an integer number of seconds from 1 to 3600, got ${JSON.stringify(sample)}`,
    );
  }
  const databases = databasesOf(str, problems);
  const locationHint = str("QUEUE_LOCATION_HINT");
  if (locationHint !== undefined && locationHintProblem(locationHint) !== undefined) {
    problems.push(`QUEUE_LOCATION_HINT ${locationHintProblem(locationHint)}`);
  }
  if (problems.length > 0) return { ok: false, error: new ConfigError(problems) };
  return {
    ok: true,
    config: {
      databaseUrl: url as string,
      databaseAuthToken: authToken,
      database: {
        url: url as string,
        authToken,
        ...(databases.kind === "namespaces" ? { namespace: DEFAULT_NAMESPACE } : {}),
      },
      databases,
      locationHint,
      queueToken: queueToken as string,
      queueTokenNext,
      jwt,
      recheckMs: Math.round(recheckSeconds * 1000),
      pushConnections,
      holdMs,
      rideMs,
      sampleMs: sampleSeconds * 1000,
    },
  };
}

/** Shortest QUEUE_JWT_SECRET accepted (HS256 wants a key as long as its hash: 256 bits). */
export const MIN_JWT_SECRET_LENGTH = 32;

function jwtOf(str: (name: string) => string | undefined, problems: string[]): JwtConfig | undefined {
  const secrets: string[] = [];
  for (const name of ["QUEUE_JWT_SECRET", "QUEUE_JWT_SECRET_NEXT"]) {
    const secret = str(name);
    if (secret === undefined) continue;
    if (secret.length < MIN_JWT_SECRET_LENGTH)
      problems.push(`${name} must be at least ${MIN_JWT_SECRET_LENGTH} characters`);
    else secrets.push(secret);
  }
  const publicKeys: JsonWebKey[] = [];
  const keys = str("QUEUE_JWT_PUBLIC_KEYS");
  if (keys !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(keys);
    } catch {
      parsed = undefined;
    }
    const list = (parsed as { keys?: unknown } | undefined)?.keys ?? parsed;
    const all = Array.isArray(list) ? list : [list];
    const ok = (k: unknown): k is JsonWebKey => {
      const j = k as Record<string, unknown> | null;
      return (
        typeof j === "object" &&
        j !== null &&
        j.d === undefined &&
        ((j.kty === "EC" && j.crv === "P-256" && typeof j.x === "string" && typeof j.y === "string") ||
          (j.kty === "OKP" && j.crv === "Ed25519" && typeof j.x === "string"))
      );
    };
    if (all.length === 0 || !all.every(ok)) {
      problems.push(
        'QUEUE_JWT_PUBLIC_KEYS must be a public JWK or a JWK set ({"keys": [...]}) of EC P-256 (ES256) or OKP Ed25519 (EdDSA) keys, without their private part',
      );
    } else publicKeys.push(...all);
  }
  if (secrets.length === 0 && publicKeys.length === 0) {
    if (str("QUEUE_JWT_AUDIENCE") !== undefined || str("QUEUE_JWT_ISSUER") !== undefined) {
      problems.push("QUEUE_JWT_AUDIENCE and QUEUE_JWT_ISSUER need QUEUE_JWT_SECRET or QUEUE_JWT_PUBLIC_KEYS");
    }
    return undefined;
  }
  return {
    secrets,
    publicKeys,
    audience: str("QUEUE_JWT_AUDIENCE") ?? "turso-queue",
    issuer: str("QUEUE_JWT_ISSUER"),
  };
}

function databasesOf(str: (name: string) => string | undefined, problems: string[]): DatabasesConfig {
  const value = str("QUEUE_DATABASES");
  if (value === undefined) return { kind: "none" };
  if (value === "namespaces") {
    const adminUrl = str("SQLD_ADMIN_URL");
    if (adminUrl === undefined) {
      problems.push(
        'SQLD_ADMIN_URL is not set (QUEUE_DATABASES = "namespaces" makes databases through the admin API of the sqld at TURSO_DATABASE_URL)',
      );
      return { kind: "none" };
    }
    return { kind: "namespaces", adminUrl };
  }
  if (value === "turso") {
    const [organization, group, apiToken] = ["TURSO_ORG", "TURSO_GROUP", "TURSO_API_TOKEN"].map(str);
    const missing = ["TURSO_ORG", "TURSO_GROUP", "TURSO_API_TOKEN"].filter(
      (_, i) => [organization, group, apiToken][i] === undefined,
    );
    if (missing.length > 0) {
      problems.push(
        `${missing.join(", ")} not set (QUEUE_DATABASES = "turso" makes databases through the Turso Platform API)`,
      );
      return { kind: "none" };
    }
    return {
      kind: "turso",
      organization: organization as string,
      group: group as string,
      apiToken: apiToken as string,
    };
  }
  let map: unknown;
  try {
    map = JSON.parse(value);
  } catch {
    map = undefined;
  }
  const entries = typeof map === "object" && map !== null && !Array.isArray(map) ? Object.entries(map) : undefined;
  const ok =
    entries?.every(
      ([, d]) =>
        typeof d === "string" ||
        (typeof d === "object" && d !== null && typeof (d as { url?: unknown }).url === "string"),
    ) ?? false;
  if (!ok) {
    problems.push(
      'QUEUE_DATABASES must be "namespaces", "turso", or a JSON object mapping database names to URLs ({"emails": "libsql://…"})',
    );
    return { kind: "none" };
  }
  return {
    kind: "static",
    map: Object.fromEntries(
      (entries as [string, string | Database][]).map(([k, d]) => [k, typeof d === "string" ? { url: d } : d]),
    ),
  };
}
