/** One error shape for every failure, whoever raised it (in Node: plain Hono, no database). */
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import { expect, it } from "vitest";
import { HttpError, handleError } from "../../src/app/errors.js";
import { QueueError } from "../../src/core/errors.js";

function appThrowing(err: unknown) {
  const app = new Hono();
  app.get("/", () => {
    throw err;
  });
  app.onError(handleError);
  return app;
}

it("our HttpError is a Hono HTTPException with a code and headers", async () => {
  const err = new HttpError(429, "BUSY", "slow down", { "Retry-After": "2" });
  expect(err).toBeInstanceOf(HTTPException);
  const res = await appThrowing(err).request("/");
  expect(res.status).toBe(429);
  expect(res.headers.get("retry-after")).toBe("2");
  expect(await res.json()).toEqual({ error: { code: "BUSY", message: "slow down" } });
});

it("any other HTTPException keeps its status and headers and gets our shape", async () => {
  const res = await appThrowing(
    new HTTPException(401, { message: "nope", res: new Response(null, { headers: { "WWW-Authenticate": "Bearer" } }) }),
  ).request("/");
  expect(res.status).toBe(401);
  expect(res.headers.get("www-authenticate")).toBe("Bearer");
  expect(await res.json()).toEqual({ error: { code: "UNAUTHORIZED", message: "nope" } });

  // A Hono middleware's own refusal, end to end.
  const app = new Hono();
  app.post(
    "/",
    bodyLimit({
      maxSize: 4,
      onError: () => {
        throw new HTTPException(413, { message: "too big" });
      },
    }),
    (c) => c.text("ok"),
  );
  app.onError(handleError);
  const big = await app.request("/", { method: "POST", body: "0123456789" });
  expect(big.status).toBe(413);
  expect(await big.json()).toEqual({ error: { code: "PAYLOAD_TOO_LARGE", message: "too big" } });

  const teapot = await appThrowing(new HTTPException(418)).request("/");
  expect(teapot.status).toBe(418);
  expect(await teapot.json()).toEqual({ error: { code: "INVALID_ARGUMENT", message: "HTTP 418" } });
});

it("library errors get their status; lease and key fields are renamed to the API's", async () => {
  const lost = await appThrowing(
    new QueueError("LEASE_LOST", "lease: message 1 is no longer leased", { field: "lease" }),
  ).request("/");
  expect(lost.status).toBe(409);
  expect(await lost.json()).toEqual({
    error: { code: "LEASE_LOST", message: "lease_id: message 1 is no longer leased" },
  });
  const busy = await appThrowing(new QueueError("BUSY", "database is locked")).request("/");
  expect(busy.status).toBe(503);
  expect(busy.headers.get("retry-after")).toBe("1");
  const db = await appThrowing(new QueueError("UNAUTHORIZED", "bad token")).request("/");
  expect(db.status).toBe(502);
  expect(((await db.json()) as { error: { code: string } }).error.code).toBe("DATABASE_UNAUTHORIZED");
});

it("anything else is a 500 INTERNAL that says nothing of the cause", async () => {
  const res = await appThrowing(new Error("secret detail")).request("/");
  expect(res.status).toBe(500);
  expect(await res.json()).toEqual({ error: { code: "INTERNAL", message: "internal error" } });
});
