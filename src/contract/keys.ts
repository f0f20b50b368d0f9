/** Keys and the audit: what `/v1/keys`, `/v1/whoami` and `/v1/audit` take and answer. */
import * as v from "valibot";
import {
  AUDIT,
  KEY_ID,
  KEYS,
  keyIdProblem,
  keyNameProblem,
  queuePatternProblem,
  SCOPES,
  scopeProblem,
} from "../rules.js";
import { countText, id, integer, object, ruleCheck, ruleMessage, seqText, withCommas } from "./kit.js";

const scope = v.picklist(SCOPES, ruleMessage(scopeProblem));
const scopes = (description: string) =>
  v.pipe(
    v.array(scope, `must be an array of scopes (${SCOPES.join(", ")})`),
    v.minLength(1, `must list 1 to ${SCOPES.length} of ${SCOPES.join(", ")}`),
    v.maxLength(SCOPES.length, `must list 1 to ${SCOPES.length} of ${SCOPES.join(", ")}`),
    v.check((list) => new Set(list).size === list.length, "must not repeat a scope"),
    v.description(description),
  );
const queuePattern = v.pipe(v.string(ruleMessage(queuePatternProblem)), ruleCheck<string>(queuePatternProblem));
const queues = (description: string) =>
  v.pipe(
    v.array(queuePattern, "must be an array of queue names and prefixes"),
    v.minLength(1, `must list 1 to ${KEYS.maxQueues} queues (leave it out for every queue)`),
    v.maxLength(KEYS.maxQueues, `must list 1 to ${KEYS.maxQueues} queues (leave it out for every queue)`),
    v.description(description),
  );

export const KeyBody = object({
  name: id(
    `What the key is for, as you will recognize it in the list (1 to ${KEYS.maxName} characters).`,
    keyNameProblem,
  ),
  scopes: scopes(
    "What it may do: `publish` (publish), `consume` (claim, ack, nack, extend, release), `read` (stats, queues, groups, peek, history, dead letters, subscriptions, `/metrics`), `manage` (make, change and delete queues, purge, redrive and delete dead letters, subscriptions, keys, the audit). A key may only give scopes it has.",
  ),
  queues: v.optional(
    queues(
      'The queues it may touch: exact names, or prefixes ending in `*` (`["billing", "tenant-*"]`). Absent: every queue. A key limited to some queues sees only those in `GET /v1/queues` and `/metrics`.',
    ),
  ),
  expires_in: v.optional(
    integer(
      1,
      KEYS.maxExpiresIn,
      "Seconds until it stops working (absent: until revoked). It cannot outlive the key that makes it.",
    ),
  ),
});

export const KeyPath = object({
  key_id: v.pipe(
    v.string(ruleMessage(keyIdProblem)),
    v.regex(KEY_ID, ruleMessage(keyIdProblem)),
    v.description("The key's id (16 hex digits: the part after `tq_` of the key)."),
  ),
});

const keyFields = {
  id: v.pipe(v.string(), v.description("Its id: listed, and recorded in the audit; not a secret.")),
  name: v.string(),
  scopes: v.array(v.picklist(SCOPES)),
  queues: v.pipe(v.nullable(v.array(v.string())), v.description("The queues it may touch; null: every queue.")),
  created_at: v.pipe(v.number(), v.description("Epoch seconds.")),
  expires_at: v.pipe(v.nullable(v.number()), v.description("Epoch seconds; null: until revoked.")),
};

/** A key as listed: no secret (only its hash is stored). */
export const Key = v.object({
  ...keyFields,
  created_by: v.pipe(v.string(), v.description("The key that made it: `root`, a key's id, or `jwt:<sub>`.")),
  last_used_at: v.pipe(
    v.nullable(v.number()),
    v.description(`When it was last used (epoch seconds, to within ${KEYS.lastUsedSeconds} s); null: never.`),
  ),
});

export const KeyList = v.object({ keys: v.pipe(v.array(Key), v.description("Oldest first.")) });

export const KeyCreated = v.object({
  ...keyFields,
  key: v.pipe(
    v.string(),
    v.description(
      "The key itself, `tq_<id>_<secret>`: send it as `Authorization: Bearer <key>`. Answered this once: only a hash of it is kept.",
    ),
  ),
});

export const WhoAmI = v.object({
  id: v.pipe(v.string(), v.description("`root`, `root:next`, a key's id, or `jwt:<sub>`.")),
  kind: v.picklist(["root", "key", "jwt"]),
  scopes: v.array(v.picklist(SCOPES)),
  queues: v.pipe(v.nullable(v.array(v.string())), v.description("The queues it may touch; null: every queue.")),
  expires_at: v.pipe(v.nullable(v.number()), v.description("Epoch seconds; null: never.")),
});

export const AuditQuery = object(
  {
    before: v.optional(seqText("Entries older than this one (an entry's `id`): the previous page's `next_before`.")),
    limit: v.optional(countText(AUDIT.page.max, `Entries per page (default ${AUDIT.page.default}).`)),
  },
  "query parameter",
);

export const AuditEntry = v.object({
  id: v.pipe(v.number(), v.integer(), v.description("Grows with each entry.")),
  at: v.pipe(v.number(), v.description("When (epoch seconds, the database's clock).")),
  key_id: v.pipe(v.string(), v.description("Who: `root`, `root:next`, a key's id, or `jwt:<sub>`.")),
  action: v.pipe(v.string(), v.description("The API operation (`purge`, `createKey`, `deleteQueue`, ...).")),
  queue: v.pipe(v.nullable(v.string()), v.description("The queue it was on; null for keys.")),
  detail: v.pipe(
    v.nullable(v.record(v.string(), v.unknown())),
    v.description("The path's values and, for some actions, fields of the answer (never a secret)."),
  ),
});

export const AuditPage = v.object({
  entries: v.pipe(
    v.array(AuditEntry),
    v.description(`Newest first. The last ${withCommas(AUDIT.retention)} entries are kept.`),
  ),
  next_before: v.pipe(v.nullable(v.number()), v.description("Pass as `before` for the next page; null on the last.")),
});
