/**
 * The OpenAPI document is generated from the routes' schemas: it is a valid OpenAPI 3.1 document,
 * it describes every route the app answers and nothing else, and its examples pass the schemas.
 * (In Node: the OpenAPI validator compiles JSON Schemas with `new Function`, which workerd forbids.)
 */
import { Validator } from "@seriousme/openapi-schema-validator";
import Ajv2020 from "ajv/dist/2020.js";
import * as v from "valibot";
import { beforeAll, describe, expect, it } from "vitest";
import { API_ROUTES, createApp, PAGE_ROUTES } from "../../src/app/app.js";
import { type RouteSpec, scopedPath } from "../../src/app/route.js";
import { VERSION } from "../../src/version.js";

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, unknown> };
};
type Operation = {
  security: unknown[];
  parameters: Array<{ name: string; in: string }>;
  requestBody?: { content: Record<string, { schema: object; example?: unknown }> };
  responses: Record<string, { content?: Record<string, { schema: object; example?: unknown }> }>;
};

// Never called: the document needs no database.
const app = createApp(() => {
  throw new Error("no database in this test");
});
let doc: Doc;

beforeAll(async () => {
  const res = await app.request("/openapi.json");
  expect(res.status).toBe(200);
  doc = (await res.json()) as Doc;
});

const operations = () =>
  Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({ path, method, op })),
  );

it("carries the package's version", async () => {
  const { readFileSync } = await import("node:fs");
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  expect(VERSION).toBe(pkg.version);
});

it("is a valid OpenAPI 3.1 document, and every schema in it compiles as JSON Schema 2020-12", async () => {
  expect(doc.openapi).toBe("3.1.0");
  const result = await new Validator().validate(structuredClone(doc));
  expect(result.errors ?? [], JSON.stringify(result.errors)).toEqual([]);
  expect(result.valid).toBe(true);

  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addSchema({ $id: "doc", components: (doc as unknown as { components: object }).components }, "doc");
  for (const { path, method, op } of operations()) {
    const media = [
      ...Object.values(op.requestBody?.content ?? {}),
      ...Object.values(op.responses).flatMap((r) => Object.values(r.content ?? {})),
    ];
    for (const m of media) {
      const schema = JSON.parse(JSON.stringify(m.schema).replaceAll('"#/components/', '"doc#/components/'));
      const check = ajv.compile(schema);
      if (m.example !== undefined)
        expect(check(m.example), `${method} ${path}: ${ajv.errorsText(check.errors)}`).toBe(true);
    }
  }
});

it("describes every route the app answers, and nothing else", () => {
  const answered = new Set(
    app.routes
      // Middlewares (auth, 405) are registered for every method; routes have one.
      .filter((r) => r.method !== "ALL")
      .map((r) => `${r.method} ${r.path.replace(/:([^/]+)/g, "{$1}")}`),
  );
  const documented = new Set(operations().map((o) => `${o.method.toUpperCase()} ${o.path}`));
  expect([...documented].sort()).toEqual([...answered].sort());
  // Every route about one queue is there twice: for the default queue, and under /v1/queues/{queue}.
  const scoped = API_ROUTES.filter((r) => scopedPath(r) !== undefined).length;
  expect(documented.size).toBe(API_ROUTES.length + PAGE_ROUTES.length + scoped);
});

it("is routed by Hono's RegExpRouter: no route is ambiguous (a fixed segment where another has a parameter)", () => {
  // beforeAll's request made SmartRouter pick the first router that takes every route; an ambiguous
  // one sends the whole app to the TrieRouter, whose matching costs every request more CPU.
  expect(app.router.name).toBe("SmartRouter + RegExpRouter");
});

describe("each operation", () => {
  it("/v1 routes and /metrics need a key, answer 401 and the database's 5xx; the pages need nothing", () => {
    expect(doc.components.securitySchemes).toEqual({
      bearer: expect.objectContaining({ type: "http", scheme: "bearer" }),
    });
    for (const { path, op } of operations()) {
      if (path.startsWith("/v1/") || path === "/metrics") {
        // The scope each needs: test/app/keys.test.ts.
        expect(op.security, path).toEqual([{ bearer: expect.any(Array) }]);
        for (const status of ["401", "500", "502", "503"]) expect(Object.keys(op.responses), path).toContain(status);
      } else {
        expect(op.security, path).toEqual([]);
        expect(Object.keys(op.responses), path).toEqual(["200"]);
      }
    }
  });

  it("a route with a body answers 400, 413 and 415; one with path, query or header values 400", () => {
    for (const { path, method, op } of operations()) {
      if (op.requestBody)
        for (const s of ["400", "413", "415"]) expect(Object.keys(op.responses), `${method} ${path}`).toContain(s);
      if (op.parameters.length > 0) expect(Object.keys(op.responses), `${method} ${path}`).toContain("400");
    }
  });

  it("lists the error codes each status can carry, with an example", () => {
    const publish = doc.paths["/v1/groups/{group_id}/messages"]?.post as Operation;
    const conflict = publish.responses["409"]?.content?.["application/json"];
    expect(conflict?.schema).toMatchObject({
      properties: { error: { properties: { code: { enum: ["IDEMPOTENCY_CONFLICT"] } } } },
    });
    const ack = doc.paths["/v1/leases/{lease_id}/ack"]?.post as Operation;
    expect(ack.responses["404"]?.content?.["application/json"]?.schema).toMatchObject({
      properties: { error: { properties: { code: { enum: ["LEASE_NOT_FOUND"] } } } },
    });
    expect(ack.responses["409"]?.content?.["application/json"]?.example).toEqual({
      error: { code: "LEASE_LOST", message: expect.stringMatching(/^lease_id: /) },
    });
  });

  it("documents the Idempotency-Key header on both publish routes", () => {
    for (const path of ["/v1/groups/{group_id}/messages", "/v1/messages"]) {
      expect(doc.paths[path]?.post?.parameters).toContainEqual(
        expect.objectContaining({ name: "Idempotency-Key", in: "header", required: false }),
      );
    }
  });
});

it("every example in the route declarations passes the route's own schema", () => {
  const routes: readonly RouteSpec[] = [...API_ROUTES, ...PAGE_ROUTES];
  for (const r of routes) {
    const body = r.request?.body;
    if (body?.example !== undefined)
      expect(v.safeParse(body.schema, body.example).issues, r.operationId).toBeUndefined();
    for (const [status, res] of Object.entries(r.responses)) {
      if (res.schema && res.example !== undefined) {
        expect(v.safeParse(res.schema, res.example).issues, `${r.operationId} ${status}`).toBeUndefined();
      }
    }
  }
});
