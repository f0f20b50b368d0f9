/**
 * A trace across the HTTP API: the client's publish span sends its trace context (`traceparent`)
 * with the message, the Worker stores it, a claim (and a push delivery) hands it back, and consume()
 * over the client processes the message in a span that is a child of the publisher's.
 */
import { SpanKind, trace } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { type Consumer, startConsumer } from "../../scripts/support/consumer.js";
import { type RunningWorker, startWorker } from "../../scripts/support/worker.js";
import { consume, createClient } from "../../src/client/index.js";
import { clientOf } from "../../src/core/internals.js";
import { LibsqlTransport } from "../../src/index.js";
import { resetDatabase } from "../support/db.js";
import { waitFor } from "../support/wait.js";

const TOKEN = "telemetry-test-token-0123456789";
const spans = new InMemorySpanExporter();
let worker: RunningWorker;
let admin: LibsqlTransport;
let consumer: Consumer;

beforeAll(async () => {
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }));
  admin = await LibsqlTransport.create(inject("sqldUrl"));
  await resetDatabase(clientOf(admin));
  worker = await startWorker({ databaseUrl: inject("sqldUrl"), queueToken: TOKEN });
  consumer = await startConsumer(() => ({ status: 200 }));
}, 120_000);
afterAll(async () => {
  trace.disable();
  await consumer?.close();
  await worker?.stop();
  admin?.close();
});

it("a message published through the client is processed, over the client, in a child of its send span", async () => {
  const api = createClient({ url: worker.url, token: TOKEN });
  const seq = await api.publish("traced", { n: 1 });
  const stop = new AbortController();
  await consume(api, () => stop.abort(), { workerId: "traced", signal: stop.signal });
  const send = spans.getFinishedSpans().find((s) => s.name === "send default");
  const process = spans.getFinishedSpans().find((s) => s.name === "process default");
  expect(send?.kind).toBe(SpanKind.PRODUCER);
  expect(send?.attributes["messaging.message.id"]).toBe(String(seq));
  expect(process?.spanContext().traceId).toBe(send?.spanContext().traceId);
  expect(process?.parentSpanContext?.spanId).toBe(send?.spanContext().spanId);
  expect(spans.getFinishedSpans().some((s) => s.name === "receive default" && s.kind === SpanKind.CLIENT)).toBe(true);
});

it("a push delivery carries the publisher's trace context, in its body and its traceparent header", async () => {
  const api = createClient({ url: worker.url, token: TOKEN });
  await api.subscribe("traced", { url: `${consumer.url}/traced` });
  try {
    spans.reset();
    await api.publish("pushed", { n: 2 });
    const got = await waitFor(async () => consumer.received.find((r) => r.path === "/traced"), {
      what: "the delivery",
    });
    const send = spans.getFinishedSpans().find((s) => s.name === "send default");
    const ctx = send?.spanContext();
    const expected = `00-${ctx?.traceId}-${ctx?.spanId}-01`;
    expect(got.traceparent).toBe(expected);
    expect(got.delivery.traceparent).toBe(expected);
  } finally {
    await api.unsubscribe("traced");
  }
});

it("a traceparent that is not one is refused, naming the header, and stores nothing", async () => {
  const res = await fetch(`${worker.url}/v1/groups/g/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", traceparent: "not-a-trace" },
    body: JSON.stringify({ event: 1 }),
  });
  expect(res.status).toBe(400);
  expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
    /^traceparent: must be a W3C traceparent/,
  );
  expect((await admin.stats()).groups).toBe(0);
});
