/**
 * A loopback TCP proxy in front of a sqld (or any HTTP/1.1 server) that the test controls (node:net
 * only), and an HTTP control for it (`controlProxy`) for tests that run where they cannot hold it,
 * inside workerd.
 *
 * It reads whole HTTP/1.1 requests from the client (Content-Length or chunked bodies), so that a
 * fault can be aimed at a request by what its body says (e.g. "the next batch that inserts into
 * messages"). Faults, each one-shot unless `times` says otherwise:
 *  - `cut`:      forward only the first half of the request, then close both sides (never applied);
 *  - `drop`:     forward the whole request, wait for the server's answer (so it has been applied),
 *                then discard the answer and close the client's connection (outcome unknown);
 *  - `truncate`: forward the whole request and pass on only the first half of the answer's first
 *                bytes, then close (applied; the answer is cut mid-read);
 *  - `hang`:     forward the whole request and never pass its answer on (the client times out);
 *  - `stall`:    hold the request, never forwarding nor answering it (a primary whose writes hang:
 *                nothing applied; the client times out);
 *  - `delay`:    forward the whole request and hold its answer `ms` milliseconds;
 *  - `status`:   answer `status` (with `Retry-After` when given) instead of the server: without
 *                forwarding the request (never applied), or after the server answered (`after`:
 *                applied, as a gateway's 5xx after a commit).
 * `latencyMs` delays every answer. `refuse` makes new connections close at once.
 */
import { createServer as createHttpServer } from "node:http";
import { createConnection, createServer, type Server, type Socket } from "node:net";

export type Fault =
  | { kind: "cut" }
  | { kind: "drop" }
  | { kind: "truncate" }
  | { kind: "hang" }
  | { kind: "stall" }
  | { kind: "delay"; ms: number }
  | { kind: "status"; status: number; retryAfter?: string; body?: string; after?: boolean };

interface Rule {
  fault: Fault;
  match: (request: string) => boolean;
  times: number;
}

export interface ProxyStats {
  connections: number;
  requests: number;
  /** Faults applied, by kind. */
  cut: number;
  drop: number;
  truncate: number;
  hang: number;
  stall: number;
  delay: number;
  status: number;
}

export interface Proxy {
  url: string;
  port: number;
  stats: ProxyStats;
  /** Extra delay on every answer, ms. */
  latencyMs: number;
  /** When true, new connections are closed as soon as they open. */
  refuse: boolean;
  /** Called with each whole request's text (for counting requests by what they carry). */
  observe: ((request: string) => void) | undefined;
  /** Queues a fault for the next `times` requests whose text `match` accepts (default: any). */
  inject(fault: Fault, opts?: { match?: string | RegExp | ((request: string) => boolean); times?: number }): void;
  /** Removes every queued fault. */
  clear(): void;
  /** Faults still queued. */
  pending(): number;
  /** Closes every open connection now (both sides). */
  cutAll(): void;
  /** Points the proxy at another upstream port (after a restart). */
  retarget(port: number): void;
  close(): Promise<void>;
}

const HEADER_END = Buffer.from("\r\n\r\n");

/** Length in bytes of the first complete request in `buf`, or -1 when it is not complete yet. */
function requestLength(buf: Buffer): number {
  const end = buf.indexOf(HEADER_END);
  if (end < 0) return -1;
  const head = buf.subarray(0, end).toString("latin1");
  const bodyStart = end + 4;
  const cl = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  if (cl) {
    const total = bodyStart + Number(cl[1]);
    return buf.length >= total ? total : -1;
  }
  if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
    // Walk the chunks to the terminating zero-length chunk.
    let pos = bodyStart;
    for (;;) {
      const lineEnd = buf.indexOf("\r\n", pos);
      if (lineEnd < 0) return -1;
      const size = Number.parseInt(buf.subarray(pos, lineEnd).toString("latin1"), 16);
      if (Number.isNaN(size)) return buf.length; // not HTTP as we know it: pass everything on
      pos = lineEnd + 2 + size + 2;
      if (size === 0) {
        // Trailers end with an empty line; we assume none.
        return buf.length >= pos ? pos : -1;
      }
      if (pos > buf.length) return -1;
    }
  }
  return bodyStart; // no body
}

/**
 * `resetOnHangUp`: a client that goes away resets the connection upstream, as a front line (Cloudflare's
 * in front of a Worker) cancels the request it carried; otherwise it is closed, which workerd does not
 * notice until it answers.
 */
export async function startProxy(upstreamPort: number, o: { resetOnHangUp?: boolean } = {}): Promise<Proxy> {
  let upstream = upstreamPort;
  const rules: Rule[] = [];
  const sockets = new Set<Socket>();
  const stats: ProxyStats = {
    connections: 0,
    requests: 0,
    cut: 0,
    drop: 0,
    truncate: 0,
    hang: 0,
    stall: 0,
    delay: 0,
    status: 0,
  };

  const takeFault = (request: string): Fault | undefined => {
    const i = rules.findIndex((r) => r.match(request));
    if (i < 0) return undefined;
    const rule = rules[i] as Rule;
    rule.times--;
    if (rule.times <= 0) rules.splice(i, 1);
    return rule.fault;
  };

  const proxy: Proxy = {
    url: "",
    port: 0,
    stats,
    latencyMs: 0,
    refuse: false,
    observe: undefined,
    inject(fault, opts = {}) {
      const m = opts.match;
      const match =
        m === undefined
          ? () => true
          : typeof m === "string"
            ? (r: string) => r.includes(m)
            : m instanceof RegExp
              ? (r: string) => m.test(r)
              : m;
      rules.push({ fault, match, times: opts.times ?? 1 });
    },
    clear() {
      rules.splice(0);
    },
    pending() {
      return rules.reduce((n, r) => n + r.times, 0);
    },
    cutAll() {
      for (const s of sockets) s.destroy();
    },
    retarget(port) {
      upstream = port;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };

  const server: Server = createServer((client) => {
    stats.connections++;
    sockets.add(client);
    if (proxy.refuse) {
      client.destroy();
      return;
    }
    const up = createConnection({ host: "127.0.0.1", port: upstream });
    sockets.add(up);
    const closeBoth = () => {
      client.destroy();
      up.destroy();
    };
    client.on("close", () => {
      sockets.delete(client);
      if (o.resetOnHangUp && !up.destroyed) up.resetAndDestroy();
      else up.destroy();
    });
    up.on("close", () => {
      sockets.delete(up);
      client.destroy();
    });
    client.on("error", closeBoth);
    up.on("error", closeBoth);

    let inbound = Buffer.alloc(0);
    // The fault of the request whose answer is awaited (undici sends one request at a time per connection).
    let current: Fault | undefined;
    let awaitingFirstByte = false;
    // Answers are forwarded in order, each after its delay.
    let answerChain: Promise<void> = Promise.resolve();

    client.on("data", (chunk: Buffer) => {
      inbound = Buffer.concat([inbound, chunk]);
      for (;;) {
        const len = requestLength(inbound);
        if (len < 0) return;
        const request = inbound.subarray(0, len);
        inbound = inbound.subarray(len);
        stats.requests++;
        const text = request.toString("utf8");
        proxy.observe?.(text);
        const fault = takeFault(text);
        current = fault;
        awaitingFirstByte = true;
        if (fault?.kind === "cut") {
          stats.cut++;
          up.write(request.subarray(0, Math.max(1, Math.floor(len / 2))), () => setTimeout(closeBoth, 5));
          return;
        }
        if (fault) stats[fault.kind]++;
        if (fault?.kind === "stall") return; // held: the client gives up by itself
        if (fault?.kind === "status" && !fault.after) {
          // Answered here: the server never sees it.
          client.end(statusAnswer(fault), () => closeBoth());
          return;
        }
        up.write(request);
      }
    });

    up.on("data", (chunk: Buffer) => {
      const fault = current;
      if (fault?.kind === "drop") {
        // The server answered, so it applied the request: lose the answer.
        closeBoth();
        return;
      }
      if (fault?.kind === "truncate") {
        if (awaitingFirstByte) client.write(chunk.subarray(0, Math.max(1, Math.floor(chunk.length / 2))));
        awaitingFirstByte = false;
        setTimeout(closeBoth, 5);
        return;
      }
      if (fault?.kind === "status") {
        // The server answered (applied); the client hears the status instead.
        if (awaitingFirstByte) client.end(statusAnswer(fault), () => closeBoth());
        awaitingFirstByte = false;
        return;
      }
      if (fault?.kind === "hang") return; // swallow; the client gives up by itself
      // A delay holds an answer once, before its first byte; later chunks follow in order.
      const wait = awaitingFirstByte ? proxy.latencyMs + (fault?.kind === "delay" ? fault.ms : 0) : 0;
      awaitingFirstByte = false;
      answerChain = answerChain.then(
        () =>
          new Promise<void>((resolve) => {
            const send = () => {
              if (!client.destroyed) client.write(chunk);
              resolve();
            };
            if (wait > 0) setTimeout(send, wait);
            else send();
          }),
      );
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const addr = server.address();
  proxy.port = typeof addr === "object" && addr ? addr.port : 0;
  proxy.url = `http://127.0.0.1:${proxy.port}`;
  return proxy;
}

/** An HTTP/1.1 answer of a `status` fault, closing the connection. */
function statusAnswer(f: Extract<Fault, { kind: "status" }>): string {
  const body = f.body ?? `proxy fault: HTTP ${f.status}`;
  const headers = [
    `HTTP/1.1 ${f.status} Fault`,
    "content-type: text/plain",
    `content-length: ${Buffer.byteLength(body)}`,
    "connection: close",
    ...(f.retryAfter === undefined ? [] : [`retry-after: ${f.retryAfter}`]),
  ];
  return `${headers.join("\r\n")}\r\n\r\n${body}`;
}

export interface ProxyControl {
  /** `http://127.0.0.1:<port>`: POST /inject, /clear, /set, /cut-all; GET /stats, /count. */
  url: string;
  close(): Promise<void>;
}

/**
 * An HTTP control for `proxy`, for tests that cannot hold it (inside workerd):
 *  - `POST /inject` `{ fault, match?, times? }` (`match`: text the request must hold);
 *  - `POST /clear`; `POST /set` `{ latencyMs?, refuse? }`; `POST /cut-all`;
 *  - `GET /stats`: the proxy's counters and the faults still pending;
 *  - `GET /count?match=<text>&since=<n>`: requests holding `text` among those after the `n`th
 *    (`stats.requests` read before).
 * It keeps the text of the last 5,000 requests (through `observe`, after the one set before).
 */
export async function controlProxy(proxy: Proxy): Promise<ProxyControl> {
  const seen: string[] = [];
  let dropped = 0;
  const before = proxy.observe;
  proxy.observe = (request) => {
    before?.(request);
    seen.push(request);
    if (seen.length > 5000) {
      seen.shift();
      dropped++;
    }
  };
  const server = createHttpServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body =
      chunks.length > 0 ? (JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>) : {};
    const url = new URL(req.url ?? "/", "http://control");
    let answer: unknown = {};
    switch (`${req.method} ${url.pathname}`) {
      case "POST /inject":
        proxy.inject(body.fault as Fault, {
          ...(typeof body.match === "string" ? { match: body.match } : {}),
          ...(typeof body.times === "number" ? { times: body.times } : {}),
        });
        break;
      case "POST /clear":
        proxy.clear();
        break;
      case "POST /set":
        if (typeof body.latencyMs === "number") proxy.latencyMs = body.latencyMs;
        if (typeof body.refuse === "boolean") proxy.refuse = body.refuse;
        break;
      case "POST /cut-all":
        proxy.cutAll();
        break;
      case "GET /stats":
        answer = { ...proxy.stats, pending: proxy.pending() };
        break;
      case "GET /count": {
        const match = url.searchParams.get("match") ?? "";
        const since = Number(url.searchParams.get("since") ?? 0);
        answer = { requests: seen.slice(Math.max(0, since - dropped)).filter((r) => r.includes(match)).length };
        break;
      }
      default:
        res.writeHead(404).end();
        return;
    }
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify(answer));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const addr = server.address();
  return {
    url: `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
