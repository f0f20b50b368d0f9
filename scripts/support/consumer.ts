/**
 * A push consumer for tests: a Node HTTP server on 127.0.0.1 that records every delivery (raw body,
 * signature, when it started and ended, what was in flight beside it) and answers as the test says.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { PushDelivery } from "../../src/contract/types.js";

export interface Received {
  /** The URL's path: tests give each subscription its own. */
  path: string;
  raw: string;
  delivery: PushDelivery;
  signature: string | undefined;
  /** The delivery's `traceparent` header: the trace the message was published in. */
  traceparent: string | undefined;
  startedAt: number;
  endedAt?: number;
}

export interface Answer {
  status: number;
  headers?: Record<string, string>;
  /** Never answer (the request stays open until the client gives up or the server closes). */
  hang?: boolean;
}

export interface Consumer {
  /** `http://127.0.0.1:<port>` (add a path per subscription). */
  url: string;
  received: Received[];
  /** Most deliveries in flight at once, per path. */
  maxInFlight: Map<string, number>;
  /** Times a delivery arrived while another of its group was in flight (must stay 0). */
  overlaps: number;
  close(): Promise<void>;
}

export async function startConsumer(answer: (r: Received) => Answer | Promise<Answer>): Promise<Consumer> {
  const inFlight = new Map<string, number>();
  const groupsInFlight = new Set<string>();
  const open = new Set<ServerResponse>();
  const consumer: Consumer = {
    url: "",
    received: [],
    maxInFlight: new Map(),
    overlaps: 0,
    close: async () => {
      for (const res of open) res.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    const path = req.url ?? "/";
    const r: Received = {
      path,
      raw,
      delivery: JSON.parse(raw) as PushDelivery,
      signature: req.headers["turso-queue-signature"] as string | undefined,
      traceparent: req.headers.traceparent as string | undefined,
      startedAt: Date.now(),
    };
    consumer.received.push(r);
    const n = (inFlight.get(path) ?? 0) + 1;
    inFlight.set(path, n);
    consumer.maxInFlight.set(path, Math.max(consumer.maxInFlight.get(path) ?? 0, n));
    const group = r.delivery.group_id;
    if (groupsInFlight.has(group)) consumer.overlaps++;
    groupsInFlight.add(group);
    const done = () => {
      if (r.endedAt !== undefined) return;
      r.endedAt = Date.now();
      inFlight.set(path, (inFlight.get(path) ?? 1) - 1);
      groupsInFlight.delete(group);
      open.delete(res);
    };
    res.on("close", done);
    const a = await answer(r);
    if (a.hang) {
      open.add(res);
      return;
    }
    // The group is free once the consumer has answered, before the queue acks.
    done();
    res.writeHead(a.status, { "content-type": "text/plain", ...a.headers });
    res.end("ok");
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  consumer.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return consumer;
}
