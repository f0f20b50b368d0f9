/**
 * The client against an API older than long polls and acks-with-claims (a scripted server, no
 * Worker): it refuses `"wait"` and `"ack"` as unknown fields; the client then polls for `wait` and
 * sends acks on their own, and stops sending either field.
 */
import { describe, expect, it } from "vitest";
import { createClient, type FetchLike } from "../../src/client/index.js";

const LEASE = (seq: number) => ({
  lease_id: `${seq}.${"0".repeat(32)}`,
  seq,
  group_id: `g${seq}`,
  event: { seq },
  expires_at: 2e9,
  attempts: 1,
});

/** A server that knows neither `wait` nor `ack`; `ready` holds the seqs a claim may lease. */
function oldServer() {
  const ready: number[] = [];
  const log: { path: string; body: Record<string, unknown> }[] = [];
  const answer = (status: number, body?: unknown) =>
    new Response(body === undefined ? null : JSON.stringify(body), {
      status,
      headers: { "content-type": "application/json" },
    });
  const fetch: FetchLike = async (url, init) => {
    const path = new URL(url).pathname;
    const body = init.body === undefined ? {} : (JSON.parse(init.body) as Record<string, unknown>);
    log.push({ path, body });
    if (path === "/v1/claims") {
      for (const field of ["wait", "ack"]) {
        if (field in body) {
          return answer(400, { error: { code: "INVALID_ARGUMENT", message: `"${field}": unknown field` } });
        }
      }
      return answer(200, { leases: ready.splice(0, Number(body.max)).map(LEASE) });
    }
    if (path.endsWith("/ack")) return answer(204);
    return answer(404, { error: { code: "NOT_FOUND", message: "no such route" } });
  };
  return { ready, log, client: createClient({ url: "http://old.example", token: "t", fetch }) };
}

describe("an API without `wait` and `ack`", () => {
  it("a claim asked to wait polls with backoff until a message comes, and stops sending `wait`", async () => {
    const { ready, log, client } = oldServer();
    setTimeout(() => ready.push(1), 300);
    const started = Date.now();
    const leases = await client.claimMany("w", 30, 5, undefined, { wait: 5 });
    expect(leases.map((l) => l.seq)).toEqual([1]);
    expect(Date.now() - started).toBeLessThan(2_000);
    const claims = log.filter((r) => r.path === "/v1/claims");
    // The refused claim, then polls without `wait` (50, 100, 200 ms apart: about 4 in 300 ms).
    expect(claims[0]?.body.wait).toBe(5);
    expect(claims.slice(1).every((r) => !("wait" in r.body))).toBe(true);
    expect(claims.length).toBeGreaterThanOrEqual(3);
    log.length = 0;
    // Known now: `wait` is never sent again; a wait that finds nothing answers none when it is over.
    const none = await client.claim("w", 30, undefined, { wait: 0.2 });
    expect(none).toBeNull();
    expect(log.length).toBeGreaterThan(1);
    expect(log.every((r) => !("wait" in r.body))).toBe(true);
  });

  it("aborting a polled wait rejects with the signal's reason", async () => {
    const { client } = oldServer();
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(new Error("stop")), 200);
    await expect(client.claim("w", 30, undefined, { wait: 10, signal: ctl.signal })).rejects.toThrow("stop");
  });

  it("an ack that rode with a refused claim goes on its own, and later acks never ride", async () => {
    const { ready, log, client } = oldServer();
    ready.push(1, 2, 3);
    const [a, b] = await client.claimMany("w", 30, 2);
    const [, next] = await Promise.all([client.ack(a as never), client.claim("w", 30)]);
    expect(next?.seq).toBe(3);
    await client.ack(b as never);
    expect(log.map((r) => [r.path, "ack" in r.body])).toEqual([
      ["/v1/claims", false],
      ["/v1/claims", true],
      ["/v1/leases/1.00000000000000000000000000000000/ack", false],
      ["/v1/claims", false],
      ["/v1/leases/2.00000000000000000000000000000000/ack", false],
    ]);
  });
});
