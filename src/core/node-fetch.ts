/**
 * The default `fetch` of a transport in Node: `node:http(s)` with keep-alive connections and Nagle's
 * algorithm off: a round trip costs less than through the global fetch (undici), the same absolute
 * saving per request at any distance, which is what a claim+ack loop pays for.
 *
 * Node only, and loaded without an `import`: `process.getBuiltinModule` (Node >= 20.16) keeps
 * bundlers for Workers from ever seeing `node:http`. Elsewhere (Workers, Deno, Bun, browsers)
 * `nodeFetch()` answers undefined and the transport uses the platform's own `fetch`.
 */

interface IncomingMessage {
  statusCode?: number;
  statusMessage?: string;
  rawHeaders: string[];
  on(event: "data", f: (chunk: Uint8Array) => void): this;
  on(event: "end" | "aborted", f: () => void): this;
  on(event: "error", f: (e: Error) => void): this;
}
interface ClientRequest {
  on(event: "error", f: (e: Error) => void): this;
  on(event: "response", f: (res: IncomingMessage) => void): this;
  on(event: "socket", f: (s: { once(e: "connect", f: () => void): void; connecting?: boolean }) => void): this;
  setNoDelay(noDelay: boolean): void;
  end(body?: Uint8Array): void;
  destroy(e?: Error): void;
}
interface HttpModule {
  Agent: new (o: Record<string, unknown>) => unknown;
  request(url: URL, o: Record<string, unknown>): ClientRequest;
}
interface NodeProcess {
  versions?: Record<string, string | undefined>;
  getBuiltinModule?: (id: string) => unknown;
}

/** Requests sent and connections opened through it (tests check that it is the one in use). */
export const nodeFetchStats = { requests: 0, connections: 0 };

/** Free connections close after this long idle (undici's default; a server's Keep-Alive hint wins if shorter). */
const IDLE_MS = 4_000;

let cached: typeof fetch | null | undefined;

/** The keep-alive `fetch` in Node; undefined on every other runtime. One per process, like the global one. */
export function nodeFetch(): typeof fetch | undefined {
  if (cached === undefined) cached = make() ?? null;
  return cached ?? undefined;
}

function make(): typeof fetch | undefined {
  const proc = (globalThis as { process?: NodeProcess }).process;
  const v = proc?.versions;
  if (!v?.node || v.bun || v.deno || typeof proc?.getBuiltinModule !== "function") return undefined;
  if ((globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent === "Cloudflare-Workers") {
    return undefined;
  }
  const http = proc.getBuiltinModule("node:http") as HttpModule | undefined;
  const https = proc.getBuiltinModule("node:https") as HttpModule | undefined;
  if (!http || !https) return undefined;
  const options = { keepAlive: true, timeout: IDLE_MS, scheduling: "lifo" };
  const modules = {
    "http:": { mod: http, agent: new http.Agent(options) },
    "https:": { mod: https, agent: new https.Agent(options) },
  };

  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const url = new URL(request.url);
    const target = modules[url.protocol as keyof typeof modules];
    if (!target) return fetch(request);
    const signal = request.signal;
    signal.throwIfAborted();
    const body =
      request.method === "GET" || request.method === "HEAD" ? undefined : new Uint8Array(await request.arrayBuffer());
    const headers: Record<string, string> = {};
    request.headers.forEach((value, key) => {
      headers[key] = value;
    });
    if (body !== undefined) headers["content-length"] = String(body.byteLength);

    return new Promise<Response>((resolve, reject) => {
      let settled = false;
      const fail = (e: unknown) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener("abort", onAbort);
        reject(e);
      };
      const onAbort = () => {
        fail(signal.reason);
        req.destroy();
      };
      const req = target.mod.request(url, { method: request.method, headers, agent: target.agent });
      nodeFetchStats.requests++;
      req.setNoDelay(true);
      req.on("socket", (s) => {
        if (s.connecting) s.once("connect", () => void nodeFetchStats.connections++);
      });
      // The same shape undici's fetch rejects with, so that errors map the same way (toQueueError).
      req.on("error", (e) => fail(new TypeError("fetch failed", { cause: e })));
      req.on("response", (res) => {
        const chunks: Uint8Array[] = [];
        res.on("data", (c) => chunks.push(c));
        res.on("error", (e) => fail(new TypeError("fetch failed", { cause: e })));
        res.on("aborted", () => fail(new TypeError("fetch failed", { cause: new Error("response aborted") })));
        res.on("end", () => {
          if (settled) return;
          settled = true;
          signal.removeEventListener("abort", onAbort);
          const status = res.statusCode ?? 0;
          const h = new Headers();
          for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
            h.append(res.rawHeaders[i] as string, res.rawHeaders[i + 1] as string);
          }
          const empty = request.method === "HEAD" || [101, 204, 205, 304].includes(status);
          try {
            resolve(
              new Response(empty ? null : concat(chunks), { status, statusText: res.statusMessage ?? "", headers: h }),
            );
          } catch (e) {
            reject(new TypeError("fetch failed", { cause: e }));
          }
        });
      });
      signal.addEventListener("abort", onAbort, { once: true });
      req.end(body);
    });
  };
}

function concat(chunks: Uint8Array[]): Uint8Array<ArrayBuffer> {
  if (chunks.length === 1) return chunks[0] as Uint8Array<ArrayBuffer>;
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}
