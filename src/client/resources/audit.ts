/** The audit of `manage` actions (the API's `GET /v1/audit`), newest first, a page at a time. */
import type * as W from "../../contract/types.js";
import { auditEntryFromWire } from "../../contract/wire.js";
import type { AuditEntry } from "../../core/types.js";
import { query } from "../args.js";
import { type Engine, json } from "../engine.js";
import type { CallOptions } from "../options.js";

export interface AuditOptions extends CallOptions {
  /** Entries older than this one (an entry's `id`): the previous page's `nextBefore`. */
  before?: number;
  /** Entries per page, 1-500 (default 50). */
  limit?: number;
}

export interface AuditPage {
  entries: AuditEntry[];
  /** Pass as `before` for the next page; undefined on the last. */
  nextBefore: number | undefined;
}

export class Audit {
  readonly #engine: Engine;

  constructor(engine: Engine) {
    this.#engine = engine;
  }

  async page(options: AuditOptions): Promise<AuditPage> {
    const path = `/v1/audit${query({ before: options.before, limit: options.limit })}`;
    return this.#engine.read(path, options, (a) => {
      const page = json<W.AuditPage>(a, path);
      return { entries: page.entries.map(auditEntryFromWire), nextBefore: page.next_before ?? undefined };
    });
  }
}
