/** The Worker's configuration (src/app/env.ts): defaults, and an error that names what to set. */
import { expect, it } from "vitest";
import { parseEnv } from "../../src/app/env.js";

const base = { TURSO_DATABASE_URL: "http://127.0.0.1:8080", QUEUE_TOKEN: "0123456789abcdef" };

it("defaults: a re-check every 2 s, 4 push connections", () => {
  const parsed = parseEnv({ ...base });
  expect(parsed.ok && parsed.config).toMatchObject({ recheckMs: 2000, pushConnections: 4 });
});

it("takes QUEUE_RECHECK_SECONDS, QUEUE_PUSH_CONNECTIONS, QUEUE_HOLD_MS, QUEUE_RIDE_MS and QUEUE_SAMPLE_SECONDS within their bounds, and names them when not", () => {
  const parsed = parseEnv({ ...base, QUEUE_RECHECK_SECONDS: "0.5", QUEUE_PUSH_CONNECTIONS: "16" });
  expect(parsed.ok && parsed.config).toMatchObject({ recheckMs: 500, pushConnections: 16 });
  for (const bad of ["0", "65", "2.5", "many"]) {
    const p = parseEnv({ ...base, QUEUE_PUSH_CONNECTIONS: bad });
    expect(p.ok).toBe(false);
    expect(!p.ok && p.error.message).toContain(`QUEUE_PUSH_CONNECTIONS must be an integer from 1 to 64, got "${bad}"`);
  }
  const byDefault = parseEnv(base);
  expect(byDefault.ok && byDefault.config.holdMs).toBe(4);
  const never = parseEnv({ ...base, QUEUE_HOLD_MS: "0" });
  expect(never.ok && never.config.holdMs).toBe(0);
  expect(byDefault.ok && byDefault.config.rideMs).toBe(100);
  const noRide = parseEnv({ ...base, QUEUE_RIDE_MS: "0" });
  expect(noRide.ok && noRide.config.rideMs).toBe(0);
  for (const name of ["QUEUE_HOLD_MS", "QUEUE_RIDE_MS"]) {
    for (const bad of ["-1", "1001", "2.5", "soon"]) {
      const p = parseEnv({ ...base, [name]: bad });
      expect(p.ok).toBe(false);
      expect(!p.ok && p.error.message).toContain(
        `${name} must be an integer number of ms from 0 to 1000, got "${bad}"`,
      );
    }
  }
  expect(byDefault.ok && byDefault.config.sampleMs).toBe(60_000);
  for (const bad of ["0", "3601", "1.5", "often"]) {
    const p = parseEnv({ ...base, QUEUE_SAMPLE_SECONDS: bad });
    expect(!p.ok && p.error.message).toContain(
      `QUEUE_SAMPLE_SECONDS must be an integer number of seconds from 1 to 3600, got "${bad}"`,
    );
  }
  const slow = parseEnv({ ...base, QUEUE_RECHECK_SECONDS: "301" });
  expect(!slow.ok && slow.error.message).toContain(
    "QUEUE_RECHECK_SECONDS must be a number of seconds from 0.05 to 300",
  );
});
