/** Push subscriptions: the queue POSTs each deliverable message to a subscription's URL. */
import type * as W from "../../contract/types.js";
import { subscriptionFromWire, subscriptionInputToWire } from "../../contract/wire.js";
import type { Subscription, SubscriptionInput } from "../../core/types.js";
import { checkOptions, idSegment } from "../args.js";
import { type Engine, json } from "../engine.js";
import type { CallOptions } from "../options.js";

export class Subscriptions {
  readonly #engine: Engine;

  constructor(engine: Engine) {
    this.#engine = engine;
  }

  /** A PUT: sent again after a lost answer, it sets the same settings (and keeps the secret). */
  async subscribe(
    name: string,
    options: SubscriptionInput & CallOptions,
  ): Promise<Subscription & { signingSecret: string; nextSigningSecret: string | undefined }> {
    checkOptions(options);
    const path = `/v1/subscriptions/${idSegment("name", name)}`;
    return this.#engine.send(
      {
        method: "PUT",
        path,
        body: subscriptionInputToWire(options),
        write: true,
        retryUnknown: true,
        ok: (a) => {
          const s = json<W.SubscriptionAnswer>(a, path);
          return {
            ...subscriptionFromWire(s),
            signingSecret: s.signing_secret ?? "",
            nextSigningSecret: s.next_signing_secret ?? undefined,
          };
        },
      },
      options,
    );
  }

  async list(options: CallOptions): Promise<Subscription[]> {
    const path = "/v1/subscriptions";
    return this.#engine.read(path, options, (a) =>
      json<W.SubscriptionList>(a, path).subscriptions.map(subscriptionFromWire),
    );
  }

  async unsubscribe(name: string, options: CallOptions): Promise<boolean> {
    return this.#engine.remove(`/v1/subscriptions/${idSegment("name", name)}`, options, ["NOT_FOUND"]);
  }
}
