/**
 * The slice of the workerd test environment these tests use, typed without pulling
 * @cloudflare/workers-types into the whole program (its globals clash with the DOM lib).
 */
declare module "cloudflare:workers" {
  export const env: Record<string, string | undefined>;
  export const exports: {
    default: { fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> };
  };
}
