/** The busiest-groups read runs on every kind of transport, the library's local-file client included. */
import { afterEach, expect, it } from "vitest";
import { busiestGroups } from "../../src/app/groups.js";
import { LibsqlTransport } from "../../src/index.js";
import { tempFile } from "../support/db.js";

let queue: LibsqlTransport | undefined;
afterEach(() => queue?.close());

it("lists groups deepest first on a local file", async () => {
  queue = await LibsqlTransport.create(`file:${tempFile()}`);
  await queue.publishMany([
    { groupId: "b", event: 1 },
    { groupId: "a", event: 2 },
    { groupId: "a", event: 3, priority: 3 },
  ]);
  const lease = await queue.claim("w", 60);
  expect(lease?.groupId).toBe("b");
  expect(await busiestGroups(queue, 10)).toEqual([
    { group_id: "a", messages: 2, priority: 0, in_flight: false, parked: false, last_claimed_at: null },
    { group_id: "b", messages: 1, priority: 0, in_flight: true, parked: false, last_claimed_at: expect.any(Number) },
  ]);
  expect((await busiestGroups(queue, 1)).map((g) => g.group_id)).toEqual(["a"]);
});
