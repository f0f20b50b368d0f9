/**
 * The key store as the Worker's edge reaches it: through the default queue's writer, by one RPC
 * method (`keys`) that takes any of the store's calls. The writer runs it on the key ring of its own
 * transport (src/core/keys.ts), which every change of keys goes through, so that it can answer a
 * `sync` from what it remembers.
 */
import { QueueError } from "../core/errors.js";
import type { AuditInput, KeyStore, NewKey } from "../core/keys.js";
import { type Outcome, unwrap } from "./writer/calls.js";

/** One call of the key store, as it crosses to the writer. */
export type KeyCall =
  | { op: "create"; input: NewKey; by: string }
  | { op: "list" }
  | { op: "revoke"; id: string }
  | { op: "sync"; version: string | undefined; used: string[] }
  | { op: "audit"; entry: AuditInput }
  | { op: "auditPage"; before: number | undefined; limit: number };

/** What answers the calls: the default queue's writer. */
export interface KeyPort {
  keys(call: KeyCall): Promise<Outcome<unknown>>;
}

/** Runs a call on `store` (the writer's side). */
export function runKeyCall(store: KeyStore, call: KeyCall): Promise<unknown> {
  switch (call.op) {
    case "create":
      return store.create(call.input, call.by);
    case "list":
      return store.list();
    case "revoke":
      return store.revoke(call.id);
    case "sync":
      return store.sync(call.version, call.used);
    case "audit":
      return store.audit(call.entry);
    case "auditPage":
      return store.auditPage(call.before, call.limit);
  }
}

/** The key store behind `port` (the edge's side); a call that does not come back is UNAVAILABLE. */
export function keyStoreOver(port: () => KeyPort): KeyStore {
  const call = async <T>(c: KeyCall): Promise<T> => {
    let got: Outcome<unknown>;
    try {
      got = await port().keys(c);
    } catch (e) {
      console.error("key store call failed", e);
      throw new QueueError("UNAVAILABLE", "the default queue's writer did not answer (keys)", {
        outcomeUnknown: c.op !== "list" && c.op !== "sync" && c.op !== "auditPage",
      });
    }
    return unwrap(got) as T;
  };
  return {
    create: (input, by) => call({ op: "create", input, by }),
    list: () => call({ op: "list" }),
    revoke: (id) => call({ op: "revoke", id }),
    sync: (version, used) => call({ op: "sync", version, used }),
    audit: (entry) => call({ op: "audit", entry }),
    auditPage: (before, limit) => call({ op: "auditPage", before, limit }),
  };
}
