/** Examples the OpenAPI document shows, each written once (test/app/openapi.test.ts checks them against their schemas). */
import type * as T from "../contract/types.js";

export const LEASE_EXAMPLE = {
  lease_id: "1.e60920e7c2e2f9e880bfec5577612017",
  seq: 1,
  group_id: "orders",
  event: { order: 1001, action: "charge" },
  expires_at: 1796230564.197,
  attempts: 1,
} satisfies T.Lease;

export const STATS_EXAMPLE = {
  ready: 2,
  waiting: 1,
  in_flight: 1,
  parked: 0,
  delayed: 0,
  groups: 3,
  dead_letters: 0,
  now: 1796230534.29,
  oldest_age: 12.5,
  lag: [
    { group_id: "orders", age: 12.5 },
    { group_id: "emails", age: 3.1 },
  ],
} satisfies T.Stats;
