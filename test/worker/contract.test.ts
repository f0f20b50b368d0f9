/**
 * What the schemas added or fixed, inside workerd against the real sqld: answers that pass the
 * contract's own schemas, strict percent-decoding, dead-letter paging, the busiest groups, and the
 * pages served without a token or a database.
 */
import * as v from "valibot";
import { beforeEach, describe, expect, it } from "vitest";
import * as S from "../../src/contract/schemas.js";
import type * as T from "../../src/contract/types.js";
import { api, EMPTY, post, resetDatabase, rowCounts } from "./support.js";

beforeEach(resetDatabase);

const claimBody = { worker_id: "w1", visibility: 30 };

/** The answer's body, checked against the contract's schema for it. */
function conforms<S extends v.GenericSchema>(schema: S, body: unknown): v.InferOutput<S> {
  const r = v.safeParse(schema, body);
  expect(r.issues, JSON.stringify(body)).toBeUndefined();
  return r.output as v.InferOutput<S>;
}

/** Publishes `event` into `group` and nacks it until it is a dead letter; returns its seq. */
async function deadLetter(group: string): Promise<number> {
  const { seq } = (await post<T.PublishAnswer>(`/v1/groups/${group}/messages`, { event: { group } })).body;
  for (;;) {
    const c = await post<T.Lease>("/v1/claims", claimBody);
    expect(c.status).toBe(200);
    const n = await post(`/v1/leases/${c.body.lease_id}/nack`);
    if (n.headers.get("dead-lettered") === "true") return seq;
  }
}

describe("answers match the contract", () => {
  it("publish, claim, extend, stats, groups, dead letters, errors and health", async () => {
    conforms(S.PublishAnswer, (await post("/v1/groups/g/messages", { event: 1 })).body);
    conforms(S.PublishBatchAnswer, (await post("/v1/messages", { messages: [{ group_id: "h", event: 2 }] })).body);
    const lease = conforms(S.Lease, (await post("/v1/claims", claimBody)).body);
    conforms(S.LeaseList, (await post("/v1/claims", { ...claimBody, max: 5 })).body);
    conforms(S.ExtendAnswer, (await post(`/v1/leases/${lease.lease_id}/extend`, { visibility: 60 })).body);
    conforms(S.Stats, (await api("/v1/stats")).body);
    conforms(S.GroupList, (await api("/v1/groups")).body);
    conforms(S.DeadLetterPage, (await api("/v1/dead-letters")).body);
    conforms(S.ErrorAnswer, (await post("/v1/claims", {})).body);
    conforms(S.Health, (await api("/healthz", { token: null })).body);
  });
});

describe("percent-encoding is decoded strictly", () => {
  it("a malformed group id in the path is a 400 naming group_id, and nothing is stored", async () => {
    for (const bad of ["a%ZZb", "a%", "%E0%A4%A", "%FF"]) {
      const a = await post(`/v1/groups/${bad}/messages`, { event: 1 });
      expect(a.status, bad).toBe(400);
      expect(a.body.error).toEqual({ code: "INVALID_ARGUMENT", message: "group_id: is not valid percent-encoding" });
    }
    // An encoded percent sign is a percent sign.
    expect((await post("/v1/groups/a%25ZZb/messages", { event: 1 })).status).toBe(201);
    const c = await post("/v1/claims", claimBody);
    expect(c.body.group_id).toBe("a%ZZb");
    expect((await rowCounts()).messages).toBe(1);
  });

  it("so are the query's values", async () => {
    const a = await api("/v1/dead-letters?group_id=a%ZZ");
    expect(a.status).toBe(400);
    expect(a.body.error.message).toBe("group_id: is not valid percent-encoding");
    expect((await api("/v1/dead-letters?group_id=a%25ZZ")).status).toBe(200);
    expect((await api("/v1/dead-letters?group_id=a+b")).status).toBe(200);
  });

  it("lease ids and seqs in the path name their field", async () => {
    expect((await post("/v1/leases/1.%ZZ/ack")).body.error.message).toMatch(/^lease_id: /);
    expect((await post("/v1/dead-letters/%ZZ/redrive")).body.error.message).toMatch(/^seq: /);
    expect(await rowCounts()).toEqual(EMPTY);
  });
});

describe("400 messages start with the API's field name", () => {
  it("as the library words them", async () => {
    const cases: Array<[string, unknown, string]> = [
      [
        "/v1/messages",
        {
          messages: [
            ...Array.from({ length: 3 }, () => ({ group_id: "g", event: 1 })),
            { group_id: "g", event: 1, priority: 9 },
          ],
        },
        "messages[3].priority: must be an integer from 0 to 4, got 9",
      ],
      [
        "/v1/groups/g/messages",
        { event: 1, prority: 1 },
        '"prority": unknown field (expected "event", "priority", "delay", "singleton_key", "replace")',
      ],
      ["/v1/groups/g/messages", { event: 1, delay: -2 }, "delay: must be a finite number of seconds >= 0, got -2"],
      [
        "/v1/messages",
        { messages: [{ group_id: "g", event: 1, delay: "5" }] },
        'messages[0].delay: must be a finite number of seconds >= 0, got "5"',
      ],
      [
        "/v1/claims",
        { worker_id: "w", visibility: 1, wait: 21 },
        "wait: must be a number of seconds from 0 to 20, got 21",
      ],
      ["/v1/claims", { worker_id: "w", visibility: 1, max: 2, ack: ["x"] }, "ack[0]: is not a lease id of this queue"],
      ["/v1/groups/g/messages", {}, "event: is required"],
      [
        "/v1/claims",
        { worker_id: "w", visibility: "30" },
        'visibility: must be a finite number of seconds > 0, got "30"',
      ],
      ["/v1/claims", { worker_id: "w", visibility: 1, max: 0 }, "max: must be an integer from 1 to 1000, got 0"],
      [
        "/v1/claims",
        { worker_id: "__parked__", visibility: 1 },
        'worker_id: must not be "__parked__" (reserved for parked messages)',
      ],
      ["/v1/messages", { messages: [] }, "messages: must hold 1 to 1000 messages, got 0"],
      [
        "/v1/leases/1.0123456789abcdef0123456789abcdef/nack",
        { delay: -1 },
        "delay: must be a finite number of seconds >= 0, got -1",
      ],
      ["/v1/leases/1.0123456789abcdef0123456789abcdef/ack", { x: 1 }, '"x": unknown field (none is accepted)'],
    ];
    for (const [path, body, message] of cases) {
      const a = await post(path, body);
      expect(a.status).toBe(400);
      expect(a.body.error.message).toBe(message);
    }
    for (const [query, message] of [
      ["limit=1&limit=2", "limit: must be given once"],
      ["limit=1001", "limit: must be an integer from 1 to 1000, got 1001"],
      ["after_seq=-1", "after_seq: must be an integer >= 0"],
      ["foo=1", '"foo": unknown query parameter (expected "group_id", "after_seq", "limit")'],
    ]) {
      expect((await api(`/v1/dead-letters?${query}`)).body.error.message).toBe(message);
    }
    expect(await rowCounts()).toEqual(EMPTY);
  });
});

describe("dead letters are paged", () => {
  it("next_after_seq only when another page follows", async () => {
    const seqs = [await deadLetter("a"), await deadLetter("b"), await deadLetter("c")];
    const page = async (q: string) => (await api<T.DeadLetterPage>(`/v1/dead-letters?${q}`)).body;
    const first = await page("limit=2");
    expect(first.dead_letters.map((d) => d.seq)).toEqual(seqs.slice(0, 2));
    expect(first.next_after_seq).toBe(seqs[1]);
    const second = await page(`limit=2&after_seq=${first.next_after_seq}`);
    expect(second.dead_letters.map((d) => d.seq)).toEqual([seqs[2]]);
    expect(second.next_after_seq).toBe(null);
    expect((await page("limit=3")).next_after_seq).toBe(null);
    // A page of the library's maximum (1000) asks once more to know.
    expect((await page("limit=1000")).next_after_seq).toBe(null);
    expect((await page("group_id=b&limit=1")).next_after_seq).toBe(null);
    expect((await page("after_seq=0&limit=1")).next_after_seq).toBe(seqs[0]);
  });
});

describe("GET /v1/groups", () => {
  it("lists the groups holding a lease or park first (newest first), then the next in line", async () => {
    const messages = [
      ...Array.from({ length: 3 }, (_, i) => ({ group_id: "deep", event: i })),
      ...Array.from({ length: 2 }, (_, i) => ({ group_id: "mid", event: i, priority: 2 })),
      { group_id: "one", event: 0 },
      { group_id: "also-one", event: 0 },
    ];
    await post("/v1/messages", { messages });
    // Claim "deep"'s head (never-claimed groups go by first message), then park "mid"'s.
    const deep = await post<T.Lease>("/v1/claims", claimBody);
    expect(deep.body.group_id).toBe("deep");
    const mid = await post<T.Lease>("/v1/claims", claimBody);
    expect(mid.body.group_id).toBe("mid");
    await post(`/v1/leases/${mid.body.lease_id}/nack`, { delay: 3600 });

    const all = (await api<T.GroupList>("/v1/groups")).body.groups;
    // The park ends an hour from now, the lease sooner: the park comes first. Then the groups nothing
    // holds, in round-robin order (never-claimed ones by their first message).
    expect(all.map((g) => [g.group_id, g.messages, g.in_flight, g.parked])).toEqual([
      ["mid", 2, false, true],
      ["deep", 3, true, false],
      ["one", 1, false, false],
      ["also-one", 1, false, false],
    ]);
    expect(all[0]?.priority).toBe(2);
    expect(all[1]?.last_claimed_at).toEqual(expect.any(Number));
    expect(all[2]?.last_claimed_at).toBe(null);
    expect((await api<T.GroupList>("/v1/groups?limit=1")).body.groups.map((g) => g.group_id)).toEqual(["mid"]);
    for (const bad of ["limit=0", "limit=101", "limit=x", "x=1"]) {
      expect((await api(`/v1/groups?${bad}`)).status, bad).toBe(400);
    }
  });

  it("an empty queue has no groups", async () => {
    expect((await api("/v1/groups")).body).toEqual({ groups: [] });
  });
});

describe("pages", () => {
  it("/, /docs, /dashboard, /openapi.json and the assets answer without a token", async () => {
    for (const [path, type] of [
      ["/", "text/html"],
      ["/docs", "text/html"],
      ["/dashboard", "text/html"],
      ["/assets/style.css", "text/css"],
      ["/assets/dashboard.js", "text/javascript"],
      ["/openapi.json", "application/json"],
    ] as const) {
      const a = await api(path, { token: null });
      expect(a.status, path).toBe(200);
      expect(a.headers.get("content-type"), path).toContain(type);
      if (type !== "application/json") {
        expect(a.headers.get("content-security-policy"), path).toContain("script-src 'self'");
      }
    }
    const docs = await api("/docs", { token: null });
    for (const path of ["/v1/groups/{group_id}/messages", "/v1/dead-letters/{seq}/redrive", "IDEMPOTENCY_CONFLICT"]) {
      expect(docs.text).toContain(path);
    }
    // Nothing from elsewhere: every src and href is a path of this Worker or a fragment.
    for (const path of ["/docs", "/dashboard", "/"]) {
      const refs = [...(await api(path, { token: null })).text.matchAll(/(?:src|href)="([^"]*)"/g)].map((m) => m[1]);
      expect(refs.length).toBeGreaterThan(0);
      for (const ref of refs) expect(ref, path).toMatch(/^[/#]/);
    }
    expect(await rowCounts()).toEqual(EMPTY);
  });

  it("405 with Allow for another method on a page; 404 for an unknown one", async () => {
    const a = await api("/docs", { method: "POST", token: null });
    expect(a.status).toBe(405);
    expect(a.body.error.code).toBe("METHOD_NOT_ALLOWED");
    expect(a.headers.get("allow")).toBe("GET, HEAD");
    expect((await api("/docs/nope", { token: null })).status).toBe(404);
  });
});
