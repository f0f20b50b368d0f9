/**
 * Traces and metrics through @opentelemetry/api, with the SDK's in-memory exporters: the library's
 * spans follow the messaging conventions, and a message carries its publisher's trace context to
 * its consumer, whose `process` span (consume()) is a child of the `send` span it was published in.
 */
import { metrics, SpanKind, trace } from "@opentelemetry/api";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { consume, LibsqlTransport } from "../../src/index.js";
import { tempFile } from "../support/db.js";

const spans = new InMemorySpanExporter();
const exported = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({ exporter: exported, exportIntervalMillis: 3_600_000 });

beforeAll(() => {
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }));
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
});
afterAll(() => {
  trace.disable();
  metrics.disable();
});
beforeEach(() => spans.reset());

const named = (name: string) => spans.getFinishedSpans().filter((s) => s.name === name);

describe("the library's spans", () => {
  it("publish, claim and ack make send, receive and settle spans with the messaging attributes", async () => {
    const q = await LibsqlTransport.create(`file:${tempFile()}`, { name: "orders" });
    const seq = await q.publish("g", { n: 1 });
    await q.publishMany([
      { groupId: "h", event: 2 },
      { groupId: "i", event: 3 },
    ]);
    const leases = await q.claimMany("w", 30, 10);
    for (const l of leases) await q.ack(l);
    q.close();

    const [send, batch] = named("send orders");
    expect(send?.kind).toBe(SpanKind.PRODUCER);
    expect(send?.attributes).toMatchObject({
      "messaging.system": "turso_queue",
      "messaging.operation.type": "send",
      "messaging.operation.name": "publish",
      "messaging.destination.name": "orders",
      "messaging.message.id": String(seq),
    });
    expect(batch?.attributes).toMatchObject({
      "messaging.operation.name": "publishMany",
      "messaging.batch.message_count": 2,
    });
    const [receive] = named("receive orders");
    expect(receive?.kind).toBe(SpanKind.CLIENT);
    expect(receive?.attributes).toMatchObject({
      "messaging.operation.type": "receive",
      "messaging.batch.message_count": 3,
    });
    const settles = named("settle orders");
    expect(settles).toHaveLength(3);
    expect(settles.every((s) => s.kind === SpanKind.CLIENT && s.attributes["messaging.operation.name"] === "ack")).toBe(
      true,
    );
    // Every lease carries the trace context its message was published in.
    expect(leases.map((l) => l.traceparent?.split("-")[1])).toEqual(
      [send, batch, batch].map((s) => s?.spanContext().traceId),
    );
  });

  it("consume()'s process span is a child of the publisher's send span, across transports", async () => {
    const file = `file:${tempFile()}`;
    const producer = await LibsqlTransport.create(file, { name: "emails" });
    const consumer = await LibsqlTransport.create(file, { name: "emails" });
    await producer.publish("to-ada", { subject: "hi" });
    const stop = new AbortController();
    await consume(consumer, () => stop.abort(), { workerId: "c", signal: stop.signal });
    producer.close();
    consumer.close();
    const [send] = named("send emails");
    const [process] = named("process emails");
    expect(process?.kind).toBe(SpanKind.CONSUMER);
    expect(process?.spanContext().traceId).toBe(send?.spanContext().traceId);
    expect(process?.parentSpanContext?.spanId).toBe(send?.spanContext().spanId);
    expect(process?.attributes).toMatchObject({
      "messaging.operation.type": "process",
      "messaging.message.delivery_count": 1,
    });
  });

  it("a failed settle ends its span with the error's code", async () => {
    const q = await LibsqlTransport.create(`file:${tempFile()}`);
    await q.publish("g", 1);
    const lease = await q.claim("w", 30);
    await q.ack(lease as NonNullable<typeof lease>);
    await expect(q.ack(lease as NonNullable<typeof lease>)).rejects.toMatchObject({ code: "LEASE_NOT_FOUND" });
    q.close();
    const failed = named("settle default").find((s) => s.status.code === 2);
    expect(failed?.attributes["error.type"]).toBe("LEASE_NOT_FOUND");
  });

  it("records the conventions' metrics: operation durations, messages sent and consumed, processing", async () => {
    const q = await LibsqlTransport.create(`file:${tempFile()}`, { name: "metered" });
    await q.publishMany(Array.from({ length: 4 }, (_, i) => ({ groupId: `g${i}`, event: i })));
    const stop = new AbortController();
    let handled = 0;
    await consume(q, () => void (++handled === 4 && stop.abort()), {
      workerId: "m",
      concurrency: 4,
      signal: stop.signal,
    });
    q.close();
    await reader.forceFlush();
    const all = exported.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics));
    const points = (name: string) =>
      all
        .filter((m) => m.descriptor.name === name)
        .flatMap((m) => m.dataPoints as Array<{ attributes: Record<string, unknown>; value: unknown }>)
        .filter((p) => p.attributes["messaging.destination.name"] === "metered");
    const total = (name: string) => points(name).reduce((n, p) => n + (p.value as number), 0);
    expect(total("messaging.client.sent.messages")).toBe(4);
    expect(total("messaging.client.consumed.messages")).toBe(4);
    expect(points("messaging.process.duration").reduce((n, p) => n + (p.value as { count: number }).count, 0)).toBe(4);
    const operations = new Set(
      points("messaging.client.operation.duration").map((p) => p.attributes["messaging.operation.type"]),
    );
    expect(operations).toEqual(new Set(["send", "receive", "settle"]));
  });
});
