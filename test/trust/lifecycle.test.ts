/**
 * A queue's life through the Worker as `npm start` runs it: the production bundle on Miniflare, named
 * queues in namespaces of a sqld of this file's own (test/trust/named-worker.ts), so that a delete
 * drops the queue's databases and a queue made again gets new ones. Deleting a queue ends its long
 * polls at once (404), and a delete racing a make of the same name never leaves a half of each: no
 * 5xx from sqld, no 500 from a writer still serving the dropped database.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as T from "../../src/contract/types.js";
import { envInt } from "../support/trust.js";
import { type NamedWorker, startNamedWorker } from "./named-worker.js";

const TOKEN = "lifecycle-test-token-0123456789";
const TRIES = envInt("TRUST_LIFECYCLE_TRIES", 25);

let w: NamedWorker;

beforeAll(async () => {
  w = await startNamedWorker({ token: TOKEN });
}, 180_000);

afterAll(async () => w?.stop());

describe.each([1, 4])("a queue of %i shard(s), deleted and made again", (shards) => {
  const name = `life-${shards}`;
  const q = `/v1/queues/${name}`;

  it(`a delete racing a make of its name (${TRIES} tries): no 5xx, then it serves whole or is gone`, async () => {
    expect((await w.api(q, { method: "PUT", json: { shards } })).status).toBe(201);
    const problems: string[] = [];
    const saw = (what: string, a: { status: number; text: string }, ok: number[]) => {
      if (!ok.includes(a.status)) problems.push(`${what}: ${a.status} ${a.text.slice(0, 160)}`);
    };
    for (let i = 0; i < TRIES; i++) {
      saw(`try ${i}: publish before`, await w.api(`${q}/groups/g/messages`, { json: { event: `old-${i}` } }), [201]);
      const [deleted, made] = await Promise.all([
        w.api(`${q}?force=true`, { method: "DELETE" }),
        w.api<T.QueueAnswer>(q, { method: "PUT", json: { shards } }),
      ]);
      saw(`try ${i}: delete`, deleted, [204]);
      saw(`try ${i}: put`, made, [200, 201]);
      const got = await w.api<T.QueueWithSettings>(q);
      saw(`try ${i}: get`, got, [200, 404]);
      if (got.status === 404) {
        const refused = await w.api<T.ErrorAnswer>(`${q}/groups/g/messages`, { json: { event: "none" } });
        saw(`try ${i}: publish to a deleted queue`, refused, [404]);
        if (refused.status === 404 && refused.body.error.code !== "QUEUE_NOT_FOUND")
          problems.push(`try ${i}: ${refused.text}`);
        saw(`try ${i}: make it again`, await w.api(q, { method: "PUT", json: { shards } }), [201]);
      } else if (made.status === 201 && got.body.stats.ready + got.body.stats.waiting > 0) {
        // Made again after the delete: nothing of the old queue is in it.
        problems.push(`try ${i}: the queue made again holds ${JSON.stringify(got.body.stats)}`);
      }
      // Whichever came last, the queue now serves every route, with nothing of what was dropped.
      const pub = await w.api<T.PublishAnswer>(`${q}/groups/g/messages`, { json: { event: `new-${i}` } });
      saw(`try ${i}: publish`, pub, [201]);
      const peek = await w.api<T.PeekAnswer>(`${q}/groups/g/messages`);
      saw(`try ${i}: peek`, peek, [200]);
      const lease = await w.api<T.Lease>(`${q}/claims`, { json: { worker_id: "w", visibility: 30 } });
      saw(`try ${i}: claim`, lease, [200]);
      if (lease.status === 200) {
        saw(`try ${i}: ack`, await w.api(`${q}/leases/${lease.body.lease_id}/ack`, { method: "POST" }), [204]);
      }
      saw(`try ${i}: stats`, await w.api(`${q}/stats`), [200]);
    }
    expect(problems).toEqual([]);
  });

  it("deleting it ends its long polls at once with 404; a queue made again under the name gives them nothing", async () => {
    expect([200, 201]).toContain((await w.api(q, { method: "PUT", json: { shards } })).status);
    const waiting = Array.from({ length: 4 }, (_, i) =>
      w.api<T.ErrorAnswer>(`${q}/claims`, { json: { worker_id: `old-${i}`, visibility: 30, wait: 20 } }),
    );
    // Held by the writers (nothing from outside says when): a moment to arrive.
    await new Promise((r) => setTimeout(r, 500));
    expect((await w.api(`${q}?force=true`, { method: "DELETE" })).status).toBe(204);
    // A wait left to run would answer 204 after its 20 s, or a message of the queue made below.
    const remade = w.api(q, { method: "PUT", json: { shards } }).then(async (made) => {
      expect(made.status).toBe(201);
      const messages = Array.from({ length: 8 }, (_, i) => ({ group_id: `g${i}`, event: i }));
      expect((await w.api(`${q}/messages`, { json: { messages } })).status).toBe(201);
    });
    const answers = await Promise.all(waiting);
    await remade;
    expect(answers.map((a) => [a.status, a.body?.error?.code])).toEqual(Array(4).fill([404, "QUEUE_NOT_FOUND"]));
    // Everything published to the queue made again is there, unclaimed.
    const stats = await w.api<T.Stats>(`${q}/stats`);
    expect(stats.body).toMatchObject({ ready: 8, in_flight: 0 });
    const got = await w.api<T.LeaseList>(`${q}/claims`, { json: { worker_id: "new", visibility: 30, max: 8 } });
    expect(got.body.leases.map((l) => l.attempts)).toEqual(Array(8).fill(1));
  });
});
