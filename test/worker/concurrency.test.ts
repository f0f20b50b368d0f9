/** Parallel claims through the Worker: per-group exclusivity holds under contention. */
import { beforeEach, expect, it } from "vitest";
import { groupsWithTwoLiveLeases, post, resetDatabase } from "./support.js";

beforeEach(resetDatabase);

it("8 claims in parallel never yield two leases in one group", async () => {
  // 4 groups of 5 messages: at most 4 leases can be live at once, one per group.
  const messages = Array.from({ length: 20 }, (_, i) => ({ group_id: `g${i % 4}`, event: { i } }));
  expect((await post("/v1/messages", { messages })).status).toBe(201);
  for (let round = 0; round < 5; round++) {
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, w) => post("/v1/claims", { worker_id: `w${w}`, visibility: 60 })),
    );
    const leases = answers.filter((a) => a.status === 200).map((a) => a.body);
    expect(answers.every((a) => a.status === 200 || a.status === 204)).toBe(true);
    expect(leases).toHaveLength(4);
    expect(new Set(leases.map((l) => l.group_id)).size).toBe(4);
    expect(await groupsWithTwoLiveLeases()).toEqual([]);
    // FIFO per group: round r delivers the r-th message of each group.
    expect(leases.map((l) => (l.event as { i: number }).i).sort((a, b) => a - b)).toEqual(
      [0, 1, 2, 3].map((g) => round * 4 + g),
    );
    const acks = await Promise.all(leases.map((l) => post(`/v1/leases/${l.lease_id}/ack`)));
    expect(acks.map((a) => a.status)).toEqual([204, 204, 204, 204]);
  }
  expect((await post("/v1/claims", { worker_id: "w", visibility: 60 })).status).toBe(204);
});

it("8 batch claims (max) in parallel split the groups between them", async () => {
  const messages = Array.from({ length: 40 }, (_, i) => ({ group_id: `g${i % 10}`, event: i }));
  await post("/v1/messages", { messages });
  const answers = await Promise.all(
    Array.from({ length: 8 }, (_, w) => post("/v1/claims", { worker_id: `w${w}`, visibility: 60, max: 5 })),
  );
  const leases = answers.flatMap((a) => a.body.leases);
  expect(leases).toHaveLength(10);
  expect(new Set(leases.map((l) => l.group_id)).size).toBe(10);
  expect(await groupsWithTwoLiveLeases()).toEqual([]);
});
