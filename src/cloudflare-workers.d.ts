/**
 * The slice of the Workers runtime this repo uses (src/worker.ts and the tests inside workerd),
 * typed without pulling @cloudflare/workers-types into the whole program (its globals clash with
 * the DOM lib that the library's Node side is checked against).
 */
declare module "cloudflare:workers" {
  export abstract class DurableObject<Env = unknown> {
    protected readonly ctx: unknown;
    protected readonly env: Env;
    constructor(ctx: unknown, env: Env);
    fetch?(request: Request): Response | Promise<Response>;
  }
  /** The bindings, as the tests inside workerd see them. */
  export const env: Record<string, string | undefined>;
  export const exports: {
    default: { fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> };
  };
}

interface DurableObjectId {
  toString(): string;
}

interface DurableObjectStub {
  fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response>;
}

interface DurableObjectNamespace<_T = unknown> {
  idFromName(name: string): DurableObjectId;
  get(id: DurableObjectId): DurableObjectStub;
}
