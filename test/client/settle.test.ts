/**
 * `POST /v1/settlements` and the client's settle(), through the API app in this process (a
 * long-lived server over one transport) against real sqld: a settle of 256 leases is one request
 * with an outcome each; a bad entry is refused whole; a resend after a lost answer reads the first
 * attempt's work as done; an API without the route is settled lease by lease; a sharded queue over
 * its shards' APIs settles once per shard; and stopping a consume(256) whose every slot holds an ack
 * takes one request.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { createApp } from "../../src/app/app.js";
import { sharedTransports } from "../../src/app/transports.js";
import { consume, createClient, type FetchLike, type Lease, QueueHttpError } from "../../src/client/index.js";
import { sqldNamespaces } from "../../src/core/databases.js";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport, ShardedQueue } from "../../src/index.js";
import { checkInvariants, resetDatabase } from "../support/db.js";

const TOKEN = "settle-test-token-0123456789abcdef";
let admin: LibsqlTransport;
const app = createApp(sharedTransports(), { dbConcurrency: Number.POSITIVE_INFINITY });

beforeAll(async () => {
  admin = await LibsqlTransport.create(inject("sqldUrl"));
});
afterAll(() => admin?.close());
beforeEach(async () => {
  await resetDatabase(clientOf(admin));
});

/** A client of the app on `database`; `requests` lists what it sent, and `through` may stand in for the app. */
function client(
  through?: (url: string, init: Parameters<FetchLike>[1], app: FetchLike) => ReturnType<FetchLike>,
  vars: Record<string, string> = { TURSO_DATABASE_URL: inject("sqldUrl") },
) {
  const requests: { path: string; body: string | undefined }[] = [];
  const env = { QUEUE_TOKEN: TOKEN, ...vars };
  const direct: FetchLike = (url, init) => app.fetch(new Request(url, init), env) as ReturnType<FetchLike>;
  const fetch: FetchLike = (url, init) => {
    requests.push({ path: new URL(url).pathname, body: init.body });
    return through ? through(url, init, direct) : direct(url, init);
  };
  return { c: createClient({ url: "http://queue.test", token: TOKEN, fetch }), requests };
}

async function leases(n: number): Promise<Lease[]> {
  await admin.publishMany(Array.from({ length: n }, (_, i) => ({ groupId: `g${i}`, event: { i } })));
  const got: Lease[] = [];
  while (got.length < n) got.push(...(await admin.claimMany("w", 60, Math.min(100, n - got.length))));
  return got;
}

describe("POST /v1/settlements", () => {
  it("settles 256 leases in one request, each with its own outcome, fenced as on its own route", async () => {
    const held = await leases(256);
    // One of them lost: released by someone else and claimed again.
    const lost = held[255] as Lease;
    await admin.release(lost);
    const thief = (await admin.claim("thief", 60)) as Lease;
    const { c, requests } = client();
    const outcomes = await c.settle(
      held.map((lease, i) =>
        i % 3 === 0
          ? { action: "ack", lease }
          : i % 3 === 1
            ? { action: "nack", lease, delay: 30 }
            : { action: "release", lease },
      ),
    );
    expect(requests.map((r) => r.path)).toEqual(["/v1/settlements"]);
    expect(outcomes).toHaveLength(256);
    expect(outcomes.slice(0, 255).every((o, i) => o.leaseId === held[i]?.id && o.error === undefined)).toBe(true);
    expect(outcomes[1]).toEqual({ leaseId: held[1]?.id, action: "nack", deadLettered: false });
    const failed = outcomes[255];
    expect(failed?.error).toBeInstanceOf(QueueHttpError);
    expect(failed?.error).toMatchObject({ code: "LEASE_LOST", status: 409, field: "lease_id" });
    const stats = await admin.stats();
    expect({ parked: stats.parked, inFlight: stats.inFlight }).toEqual({ parked: 85, inFlight: 1 });
    await admin.ack(thief);
    await checkInvariants(clientOf(admin));
  });

  it("refuses a list with one bad entry, naming it, and changes nothing", async () => {
    const [a, b] = await leases(2);
    const send = (body: unknown) =>
      app.fetch(
        new Request("http://queue.test/v1/settlements", {
          method: "POST",
          headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        }),
        { TURSO_DATABASE_URL: inject("sqldUrl"), QUEUE_TOKEN: TOKEN },
      );
    const refusal = async (body: unknown) => {
      const res = await send(body);
      expect(res.status).toBe(400);
      return ((await res.json()) as { error: { code: string; message: string } }).error;
    };
    const ok = { lease_id: a?.id, action: "ack" };
    expect(await refusal({ leases: [ok, { lease_id: b?.id, action: "release", delay: 3 }] })).toMatchObject({
      code: "INVALID_ARGUMENT",
      message: 'leases[1].delay: is only for "nack"',
    });
    expect((await refusal({ leases: [ok, { lease_id: b?.id, action: "done" }] })).message).toMatch(
      /^leases\[1\]\.action: /,
    );
    expect((await refusal({ leases: [ok, { lease_id: "7", action: "ack" }] })).message).toMatch(
      /^leases\[1\]\.lease_id: /,
    );
    expect((await refusal({ leases: [] })).message).toMatch(/^leases: must hold 1 to 1000/);
    expect((await admin.stats()).inFlight).toBe(2);
    // The client refuses the same before sending anything.
    const { c, requests } = client();
    const e = await c.settle([{ action: "release", lease: a as Lease, delay: 3 } as never]).catch((x: unknown) => x);
    expect(e).toMatchObject({ code: "INVALID_ARGUMENT", field: "settlements[0].delay" });
    expect(requests).toEqual([]);
  });

  it("a settle whose answer is lost is sent again, and reads what the first attempt did as done", async () => {
    const [a, b] = await leases(2);
    let dropped = 0;
    const { c, requests } = client(async (url, init, direct) => {
      const res = await direct(url, init);
      if (dropped++ === 0) throw new TypeError("fetch failed: other side closed");
      return res;
    });
    const outcomes = await c.settle([
      { action: "ack", lease: a as Lease },
      { action: "release", lease: b as Lease },
    ]);
    // The release's resend finds the message free: our lease had not lapsed (the stats' clock says), so the lost attempt released it.
    expect(requests.map((r) => r.path)).toEqual(["/v1/settlements", "/v1/settlements", "/v1/stats"]);
    expect(outcomes).toEqual([
      { leaseId: a?.id, action: "ack" },
      { leaseId: b?.id, action: "release" },
    ]);
    expect((await admin.stats()).ready).toBe(1);
  });

  it("an API without the route is settled lease by lease, and not asked again", async () => {
    const held = await leases(4);
    const { c, requests } = client((url, init, direct) =>
      new URL(url).pathname === "/v1/settlements"
        ? Promise.resolve(
            new Response(JSON.stringify({ error: { code: "NOT_FOUND", message: "no route" } }), { status: 404 }),
          )
        : direct(url, init),
    );
    const first = await c.settle(held.slice(0, 2).map((lease) => ({ action: "ack" as const, lease })));
    const second = await c.settle(held.slice(2).map((lease) => ({ action: "nack" as const, lease })));
    expect([...first, ...second].map((o) => o.error)).toEqual([undefined, undefined, undefined, undefined]);
    expect(requests.map((r) => r.path.replace(/\/v1\/leases\/[^/]+\//, "…/"))).toEqual([
      "/v1/settlements",
      "…/ack",
      "…/ack",
      "…/nack",
      "…/nack",
    ]);
  });

  it("a ShardedQueue over its shards' APIs settles once per shard, outcomes named as the queue names them", async () => {
    // Two databases: the shared sqld, and the default queue's namespace on the other shared sqld.
    const namespaces = { url: inject("nsSqldUrl"), adminUrl: inject("nsAdminUrl") };
    await sqldNamespaces(namespaces).create("default");
    const second = await LibsqlTransport.create(namespaces.url, { namespace: "default" });
    try {
      await resetDatabase(clientOf(second));
      const sent: number[] = [];
      const vars: Record<string, string>[] = [
        { TURSO_DATABASE_URL: inject("sqldUrl") },
        { TURSO_DATABASE_URL: namespaces.url, QUEUE_DATABASES: "namespaces", SQLD_ADMIN_URL: namespaces.adminUrl },
      ];
      const shards = vars.map((v, i) =>
        client((url, init, direct) => {
          sent.push(i);
          return direct(url, init);
        }, v),
      );
      const q = new ShardedQueue(shards.map((s) => s.c));
      await q.publishMany(Array.from({ length: 10 }, (_, i) => ({ groupId: `g${i}`, event: { i } })));
      const got = await q.claimMany("w", 60, 10);
      expect(new Set(got.map((l) => q.shardOf(l.groupId)))).toEqual(new Set([0, 1]));
      sent.length = 0;
      const outcomes = await q.settle(got.map((lease) => ({ action: "ack", lease })));
      expect(outcomes.map((o) => [o.leaseId, o.error])).toEqual(got.map((l) => [l.id, undefined]));
      expect(sent.sort()).toEqual([0, 1]);
      expect(shards.flatMap((s) => s.requests.slice(-1).map((r) => r.path))).toEqual([
        "/v1/settlements",
        "/v1/settlements",
      ]);
      expect((await q.stats()).groups).toBe(0);
    } finally {
      second.close();
    }
  });
});

describe("consume() over HTTP, stopping", () => {
  it("stopping a consume(256) whose every slot holds an ack takes one request: a settle of 256", async () => {
    await admin.publishMany(Array.from({ length: 256 }, (_, g) => ({ groupId: `g${g}`, event: {} })));
    const { c, requests } = client();
    const stop = new AbortController();
    const all = (() => {
      let open!: () => void;
      return { opened: new Promise<void>((r) => (open = r)), open: () => open() };
    })();
    let started = 0;
    let atStop = 0;
    const summary = await consume(
      c,
      async () => {
        if (++started === 256) {
          atStop = requests.length;
          stop.abort();
          all.open();
        }
        await all.opened;
      },
      { workerId: "wide", concurrency: 256, signal: stop.signal },
    );
    const after = requests.slice(atStop);
    expect(after.length).toBeLessThanOrEqual(3);
    expect(after.map((r) => r.path)).toEqual(["/v1/settlements"]);
    expect((JSON.parse(after[0]?.body ?? "{}") as { leases: unknown[] }).leases).toHaveLength(256);
    expect(summary).toMatchObject({ stopped: "signal", claimed: 256, acked: 256, settleFailed: 0, leftLeased: [] });
    expect((await admin.stats()).groups).toBe(0);
  });
});
