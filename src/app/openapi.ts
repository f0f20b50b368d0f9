/**
 * The OpenAPI 3.1 document, generated from the route declarations (src/app/route.ts) and their
 * schemas: built on first use, not at startup, so the Worker's startup stays lean.
 */
import { type ConversionConfig, type JsonSchema, toJsonSchema } from "@valibot/to-json-schema";
import type * as v from "valibot";
import { object } from "../contract/kit.js";
import { ERRORS, ErrorAnswer, type ErrorCode, PushDelivery, QueuePath } from "../contract/schemas.js";
import { SIGNATURE_HEADER } from "../contract/signature.js";
import { DEFAULT_QUEUE, MAX_BODY_BYTES } from "../rules.js";
import { LEASE_EXAMPLE } from "./examples.js";
import { type RouteSpec, scopedPath } from "./route.js";

type Json = Record<string, unknown>;

/** Request parts are converted as they arrive (before a transform turns "12" into 12). */
// `check`s (well-formed Unicode, safe integers) have no JSON Schema form; JSON numbers are finite anyway.
const REQUEST: ConversionConfig = { target: "draft-2020-12", typeMode: "input", ignoreActions: ["check", "finite"] };
const ANSWER: ConversionConfig = { target: "draft-2020-12" };

function schemaOf(schema: v.GenericSchema, config: ConversionConfig): JsonSchema {
  const { $schema: _, ...rest } = toJsonSchema(schema, config) as JsonSchema & { $schema?: string };
  return rest;
}

/** Codes every route of a kind can answer with, besides its own. */
const AUTH_ERRORS: ErrorCode[] = [
  "UNAUTHORIZED",
  "INTERNAL",
  "DATABASE",
  "DATABASE_UNAUTHORIZED",
  "NOT_CONFIGURED",
  "BUSY",
  "UNAVAILABLE",
  "BLOCKED",
  "TIMEOUT",
  "CLOSED",
  "SHARD_MISMATCH",
];
const BODY_ERRORS: ErrorCode[] = ["INVALID_ARGUMENT", "PAYLOAD_TOO_LARGE", "UNSUPPORTED_MEDIA_TYPE"];

const EXAMPLE_MESSAGES: Partial<Record<ErrorCode, string>> = {
  UNAUTHORIZED: "Authorization: invalid bearer token",
  FORBIDDEN: "this key lacks the manage scope on queue billing (it has publish)",
  NOT_FOUND: "seq: no dead letter 7",
  LEASE_NOT_FOUND: "lease_id: message 1 no longer exists (acked or dead-lettered)",
  LEASE_LOST:
    "lease_id: message 1 is no longer leased by this lease (it lapsed and was claimed again, or was released)",
  IDEMPOTENCY_CONFLICT: "Idempotency-Key: already used for a different request",
  PAYLOAD_TOO_LARGE: `body: larger than the maximum of ${MAX_BODY_BYTES} bytes`,
  UNSUPPORTED_MEDIA_TYPE: "Content-Type: the body must be JSON (application/json; charset=utf-8)",
  NOT_CONFIGURED: "the Worker is not configured: QUEUE_TOKEN is not set",
  BUSY: "database is locked",
};

function errorCodes(route: RouteSpec): ErrorCode[] {
  const codes = new Set<ErrorCode>(route.errors ?? []);
  const r = route.request ?? {};
  if (r.params || r.query || r.headers) codes.add("INVALID_ARGUMENT");
  if (r.body) for (const c of BODY_ERRORS) codes.add(c);
  if (route.scope !== "public") for (const c of AUTH_ERRORS) codes.add(c);
  if (route.scope !== "public" && route.scope !== "any") codes.add("FORBIDDEN");
  return [...codes];
}

/** A 400 this route can answer: its first body field missing, or its first parameter malformed. */
function invalidExample(route: RouteSpec): string {
  const r = route.request ?? {};
  const fields = Object.keys((r.body?.schema as { entries?: object } | undefined)?.entries ?? {});
  if (r.body && fields.length > 0) return `${fields[0]}: is required`;
  if (r.body) return '"x": unknown field (none is accepted)';
  const names = [r.params, r.query, r.headers].flatMap((p) => (p ? Object.keys(p.entries) : []));
  return `${names[0] ?? "body"}: is not valid percent-encoding`;
}

function errorResponses(route: RouteSpec): Record<string, Json> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errorCodes(route)) {
    const status = ERRORS[code][0];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const out: Record<string, Json> = {};
  for (const [status, codes] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    const first = codes[0] as ErrorCode;
    const headers: Json = {};
    if (status === 401) {
      headers["WWW-Authenticate"] = {
        description: '`Bearer realm="turso-queue"`, with `error="invalid_token"` when a token was sent.',
        schema: { type: "string" },
      };
    }
    if (status === 403) {
      headers["WWW-Authenticate"] = {
        description: `\`Bearer realm="turso-queue", error="insufficient_scope", scope="${route.scope}"\`.`,
        schema: { type: "string" },
      };
    }
    if (status === 503) {
      headers["Retry-After"] = {
        description: "Seconds to wait before retrying (except NOT_CONFIGURED).",
        schema: { type: "string" },
      };
    }
    out[String(status)] = {
      description: codes.map((c) => `\`${c}\`: ${ERRORS[c][1]}`).join("\n\n"),
      ...(Object.keys(headers).length > 0 ? { headers } : {}),
      content: {
        "application/json": {
          schema: {
            $ref: "#/components/schemas/Error",
            // The codes this status carries on this route.
            properties: { error: { properties: { code: { enum: codes } } } },
          },
          example: {
            error: {
              code: first,
              message:
                first === "INVALID_ARGUMENT" ? invalidExample(route) : (EXAMPLE_MESSAGES[first] ?? ERRORS[first][1]),
            },
          },
        },
      },
    };
  }
  return out;
}

function parameters(
  schema: (v.GenericSchema & { entries: v.ObjectEntries }) | undefined,
  place: "path" | "query" | "header",
) {
  if (!schema) return [];
  return Object.entries(schema.entries).map(([name, entry]) => {
    const { description, ...rest } = schemaOf(entry, REQUEST) as JsonSchema & { description?: string };
    return {
      name,
      in: place,
      required: place === "path" || entry.type !== "optional",
      ...(description ? { description } : {}),
      schema: rest,
    };
  });
}

function operation(route: RouteSpec): Json {
  const r = route.request ?? {};
  const responses: Record<string, Json> = {};
  for (const [status, res] of Object.entries(route.responses)) {
    const headers = Object.fromEntries(
      Object.entries(res.headers ?? {}).map(([name, h]) => [
        name,
        { description: h.description, schema: { type: h.type } },
      ]),
    );
    const media = res.schema
      ? {
          "application/json": {
            schema: schemaOf(res.schema, ANSWER),
            ...(res.example ? { example: res.example } : {}),
          },
        }
      : res.content
        ? { [res.content]: { schema: { type: "string" } } }
        : undefined;
    responses[status] = {
      description: res.description,
      ...(Object.keys(headers).length > 0 ? { headers } : {}),
      ...(media ? { content: media } : {}),
    };
  }
  Object.assign(responses, errorResponses(route));
  return {
    operationId: route.operationId,
    tags: [route.tag],
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    // The scope a key needs, as the role the bearer scheme requires (OpenAPI 3.1).
    security: route.scope === "public" ? [] : [{ bearer: route.scope === "any" ? [] : [route.scope] }],
    parameters: [...parameters(r.params, "path"), ...parameters(r.query, "query"), ...parameters(r.headers, "header")],
    ...(r.body
      ? {
          requestBody: {
            required: r.body.required,
            description: r.body.required
              ? `JSON, UTF-8, at most ${MAX_BODY_BYTES} bytes. Unknown fields are refused.`
              : "Optional: send none, or a JSON object. Unknown fields are refused.",
            content: {
              "application/json": {
                schema: schemaOf(r.body.schema, REQUEST),
                ...(r.body.example ? { example: r.body.example } : {}),
              },
            },
          },
        }
      : {}),
    responses,
  };
}

const TAGS = [
  { name: "Publish", description: "Put messages into groups." },
  { name: "Consume", description: "Claim messages, then ack, nack or extend their leases." },
  {
    name: "Push",
    description:
      "Subscriptions: the queue POSTs each message to your URL, signed, and acks or retries it by your answer (docs/http.md, Push).",
  },
  { name: "Inspect", description: "Counters and groups." },
  { name: "Dead letters", description: "Messages that used their last attempt." },
  { name: "Queues", description: "Named queues, each in its own database (or one per shard)." },
  {
    name: "Keys",
    description:
      "Keys with scopes (`publish`, `consume`, `read`, `manage`), limited to some queues or not, that expire or not, revocable; who a key is; the audit of every `manage` action.",
  },
  {
    name: "Service",
    description:
      "Health, this document, the docs page and the dashboard (no auth); metrics for Prometheus (a key with `read`).",
  },
];

/**
 * Marks an operation that is another operation in a named queue (its value: that operation's id), so
 * that a reader such as the docs page can show each route once. The document keeps both paths: a
 * client generator or a gateway needs every path the API answers.
 */
export const IN_NAMED_QUEUE = "x-in-named-queue";

/** What a named queue's routes have in place of `/v1`. */
const QUEUE_PREFIX = scopedPath({ path: "/v1/" })?.slice(0, -1);

/** A route in a named queue: the queue in its path, and QUEUE_NOT_FOUND among its answers. */
function inQueue(route: RouteSpec, path: `/${string}`): RouteSpec {
  const params = route.request?.params;
  return {
    ...route,
    path,
    operationId: `${route.operationId}InQueue`,
    summary: `${route.summary} (in a named queue)`,
    request: { ...route.request, params: object({ ...QueuePath.entries, ...(params?.entries ?? {}) }) },
    errors: [...(route.errors ?? []), "QUEUE_NOT_FOUND"],
  };
}

/**
 * The push delivery: not a route of ours but a request we send to each subscription's URL, so it is
 * a webhook (OpenAPI 3.1), with the answers that settle it.
 */
function pushWebhook(): Json {
  return {
    post: {
      operationId: "pushDelivery",
      tags: ["Push"],
      summary: "A message pushed to a subscription's URL",
      description:
        'The queue POSTs each deliverable message to the subscription\'s `url`, signed: verify `Turso-Queue-Signature` (`t=<unix seconds>,v1=<hex HMAC-SHA256(signing_secret, "<t>.<raw body>")>`) on the raw bytes before parsing (`verifySignature` in `turso-queue/client`). Exclusivity and FIFO per group hold as for pull claims.',
      parameters: [
        {
          name: SIGNATURE_HEADER,
          in: "header",
          required: true,
          description: '`t=<unix seconds>,v1=<hex HMAC-SHA256(signing_secret, "<t>.<raw body>")>`.',
          schema: { type: "string" },
        },
      ],
      requestBody: {
        required: true,
        content: {
          "application/json": {
            schema: schemaOf(PushDelivery, ANSWER),
            example: { ...LEASE_EXAMPLE, subscription: "billing" },
          },
        },
      },
      responses: {
        "200": { description: "Any 2xx but 202: done, the message is acked." },
        "202": {
          description:
            "Yours: ack, nack, extend or release `lease_id` through the API before `expires_at`, or it comes back.",
        },
        default: {
          description:
            "Any other status, a network error or no answer within 90% of the lease: retried after 1 s doubling per attempt (at most 10 min), or after the answer's `Retry-After` (up to a day); past the queue's attempts it moves to the dead letters.",
        },
      },
    },
  };
}

export function openApiDocument(routes: readonly RouteSpec[], version: string, base = ""): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    paths[route.path] = { ...(paths[route.path] ?? {}), [route.method]: operation(route) };
  }
  // Each queue's own paths, after the default queue's: the same operations, in the named queue.
  for (const route of routes) {
    const scoped = scopedPath(route);
    if (scoped !== undefined)
      paths[scoped] = {
        ...(paths[scoped] ?? {}),
        [route.method]: { ...operation(inQueue(route, scoped)), [IN_NAMED_QUEUE]: route.operationId },
      };
  }
  return {
    openapi: "3.1.0",
    // Relative to the document: the app's paths start where it is mounted.
    servers: [{ url: base === "" ? "/" : base }],
    info: {
      title: "turso-queue",
      version,
      description: [
        "A durable message queue with per-group exclusivity (FIFO message groups, one message in flight per group), kept in Turso/libSQL.",
        "Every `/v1` route and `/metrics` needs `Authorization: Bearer <key>`, whose key holds the scope the operation names (its `security`) on the queue it is about: the root key (QUEUE_TOKEN) holds every scope, keys made with `POST /v1/keys` and JWTs minted elsewhere hold theirs. Bodies are JSON objects in UTF-8, at most 1 MiB; unknown fields are refused. Times are epoch seconds on the database's clock; durations are seconds (fractions allowed).",
        'Errors are always `{ "error": { "code", "message" } }`; a 400\'s message starts with the field at fault. A refused request stores nothing. Any other method on a known path is `405 METHOD_NOT_ALLOWED` (with `Allow`); an unknown path is `404 NOT_FOUND`.',
        `A route under \`/v1/\` serves the queue named \`${DEFAULT_QUEUE}\`. Every one of them but \`/v1/queues\` and its routes also serves a named queue, with \`${QUEUE_PREFIX}\` in place of \`/v1\`: \`POST /v1/claims\` claims from the queue \`${DEFAULT_QUEUE}\`, \`POST ${scopedPath({ path: "/v1/claims" })?.replace("{queue}", "emails")}\` from the queue \`emails\`, and answers \`404 QUEUE_NOT_FOUND\` when there is no such queue.`,
      ].join("\n\n"),
      license: { name: "MIT", identifier: "MIT" },
    },
    tags: TAGS,
    paths,
    webhooks: { pushDelivery: pushWebhook() },
    components: {
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description:
            "The root key (the Worker's QUEUE_TOKEN secret, or QUEUE_TOKEN_NEXT during a rotation: every scope), a key made with `POST /v1/keys` (`tq_<id>_<secret>`), or a JWT signed with the Worker's QUEUE_JWT_SECRET (HS256) or a key of QUEUE_JWT_PUBLIC_KEYS (ES256, EdDSA) carrying `scopes`, `queues`, `exp` and `aud`. Each operation's security names the scope it needs: `publish`, `consume`, `read` or `manage`.",
        },
      },
      schemas: {
        Error: schemaOf(ErrorAnswer, ANSWER),
      },
    },
  };
}
