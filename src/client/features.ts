/**
 * What the server can do, learnt from its refusals. A server older than a feature refuses its
 * field as unknown (`"wait": unknown field`, INVALID_ARGUMENT), or its route as missing (404
 * NOT_FOUND); the client then stops sending it, so that it works with both: acks go on their own,
 * a claim asked to wait polls instead, and a settle sends each lease by its own route.
 */
import type { QueueHttpError } from "./http-errors.js";

export class ServerFeatures {
  /** Claims may carry acks (`"ack": [...]`). */
  acks = true;
  /** Claims may wait for a message (`"wait": seconds`, long poll). */
  waits = true;
  /** Many leases may be settled in one request (`POST /v1/settlements`). */
  settle = true;

  /** A settle was refused with `e`: true when the server has no such route (it predates it). */
  lacksRoute(e: QueueHttpError): boolean {
    if (e.status !== 404 || e.code !== "NOT_FOUND") return false;
    this.settle = false;
    return true;
  }

  /**
   * A claim that carried acks and/or a wait was refused with `e`: true when the refusal was about
   * them (the claim itself was fine: send it again without them), noting a feature the server
   * lacks. An ack list refused for one of its ids (`ack[2]: ...`) also counts: its acks then go on
   * their own, each to its own answer.
   */
  refusedFor(e: QueueHttpError, sent: { acks: boolean; wait: boolean }): boolean {
    if (e.code !== "INVALID_ARGUMENT") return false;
    const acksRefused = sent.acks && /^(ack\b|"ack")/.test(e.field ?? "");
    if (acksRefused && unknownField(e, "ack")) this.acks = false;
    const waitRefused = sent.wait && unknownField(e, "wait");
    if (waitRefused) this.waits = false;
    return acksRefused || waitRefused;
  }
}

/** True when the server refused `name` as an unknown field: it predates the feature. */
const unknownField = (e: QueueHttpError, name: string) =>
  e.code === "INVALID_ARGUMENT" && e.field === JSON.stringify(name);
