/** Keys (the API's `/v1/keys`, `/v1/whoami`): make one, list them, revoke one, and who this client's key is. */
import type * as W from "../../contract/types.js";
import { grantFromWire, keyFromWire } from "../../contract/wire.js";
import type { ApiKey, KeyGrant } from "../../core/types.js";
import { keyIdProblem, type Scope } from "../../rules.js";
import { checkOptions } from "../args.js";
import { type Engine, json } from "../engine.js";
import { invalidArgument } from "../http-errors.js";
import type { CallOptions } from "../options.js";

/** What a key is made with. */
export interface KeyInput {
  name: string;
  /** What it may do: `publish`, `consume`, `read`, `manage` (only those the client's own key has). */
  scopes: Scope[];
  /** Queue names and `prefix*` patterns it may touch; absent: every queue. */
  queues?: string[];
  /** Seconds until it stops working; absent: until revoked. */
  expiresIn?: number;
}

/** A key just made: `key` is its secret, answered this once. */
export type CreatedKey = Omit<ApiKey, "createdBy" | "lastUsedAt"> & { key: string };

export class Keys {
  readonly #engine: Engine;

  constructor(engine: Engine) {
    this.#engine = engine;
  }

  /** Not sent again after a lost answer: a second attempt would make a second key. */
  async create(input: KeyInput & CallOptions): Promise<CreatedKey> {
    checkOptions(input);
    const path = "/v1/keys";
    const body: W.KeyRequest = { name: input.name, scopes: input.scopes };
    if (input.queues !== undefined) body.queues = input.queues;
    if (input.expiresIn !== undefined) body.expires_in = input.expiresIn;
    return this.#engine.send(
      {
        method: "POST",
        path,
        body,
        write: true,
        retryUnknown: false,
        ok: (a) => {
          const k = json<W.KeyCreated>(a, path);
          return {
            id: k.id,
            name: k.name,
            scopes: k.scopes,
            queues: k.queues ?? undefined,
            createdAt: k.created_at,
            expiresAt: k.expires_at ?? undefined,
            key: k.key,
          };
        },
      },
      input,
    );
  }

  async list(options: CallOptions): Promise<ApiKey[]> {
    const path = "/v1/keys";
    return this.#engine.read(path, options, (a) => json<W.KeyList>(a, path).keys.map(keyFromWire));
  }

  /** False when there was no such key. */
  async revoke(id: string, options: CallOptions): Promise<boolean> {
    const problem = keyIdProblem(id);
    if (problem !== undefined) throw invalidArgument("key_id", problem);
    return this.#engine.remove(`/v1/keys/${id}`, options, ["NOT_FOUND"]);
  }

  async whoami(options: CallOptions): Promise<KeyGrant> {
    const path = "/v1/whoami";
    return this.#engine.read(path, options, (a) => grantFromWire(json<W.WhoAmI>(a, path)));
  }
}
