/**
 * Traces and metrics through `@opentelemetry/api`, following OpenTelemetry's messaging semantic
 * conventions: spans `send {queue}` (PRODUCER), `receive {queue}` (CLIENT), `process {queue}`
 * (CONSUMER, by consume()), `settle {queue}` (CLIENT), with `messaging.system`,
 * `messaging.operation.type`, `messaging.operation.name`, `messaging.destination.name` and
 * `messaging.batch.message_count`; metrics `messaging.client.operation.duration`,
 * `messaging.client.sent.messages`, `messaging.client.consumed.messages` and
 * `messaging.process.duration`. Without an SDK registered the API is a no-op: nothing is
 * recorded or exported, and a span costs an object.
 *
 * A message carries the W3C trace context it was published in (`traceparent`, stored with it), so
 * that its consumer's `process` span is a child of its publisher's `send` span, across processes,
 * over the library, the HTTP API and push.
 */
import {
  type Attributes,
  type Context,
  context,
  metrics,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from "@opentelemetry/api";
import { TRACEPARENT } from "../rules.js";
import { VERSION } from "../version.js";

/** `messaging.system`: not one of the conventions' well-known values, so the project's own name. */
export const MESSAGING_SYSTEM = "turso_queue";

export type Operation = "send" | "receive" | "process" | "settle";

const KIND: Record<Operation, SpanKind> = {
  send: SpanKind.PRODUCER,
  receive: SpanKind.CLIENT,
  process: SpanKind.CONSUMER,
  settle: SpanKind.CLIENT,
};

const tracer = () => trace.getTracer("turso-queue", VERSION);

type Meter = ReturnType<typeof metrics.getMeter>;
let instruments:
  | {
      provider: unknown;
      duration: ReturnType<Meter["createHistogram"]>;
      sent: ReturnType<Meter["createCounter"]>;
      consumed: ReturnType<Meter["createCounter"]>;
      process: ReturnType<Meter["createHistogram"]>;
    }
  | undefined;

/**
 * The meter's instruments, made again whenever the global meter provider changed (the API does not
 * proxy meters: instruments made before an SDK was registered would stay no-ops).
 */
function meter() {
  const provider = metrics.getMeterProvider();
  if (instruments?.provider !== provider) {
    const m = provider.getMeter("turso-queue", VERSION);
    instruments = {
      provider,
      duration: m.createHistogram("messaging.client.operation.duration", {
        unit: "s",
        description: "Duration of messaging operation initiated by a producer or consumer client.",
      }),
      sent: m.createCounter("messaging.client.sent.messages", {
        unit: "{message}",
        description: "Number of messages producer attempted to send to the broker.",
      }),
      consumed: m.createCounter("messaging.client.consumed.messages", {
        unit: "{message}",
        description: "Number of messages that were delivered to the application.",
      }),
      process: m.createHistogram("messaging.process.duration", {
        unit: "s",
        description: "Duration of processing operation.",
      }),
    };
  }
  return instruments;
}

export interface Traced {
  /** `messaging.operation.name`: the call (publish, claim, ack, ...). */
  name: string;
  /** `messaging.destination.name`: the queue. */
  destination: string;
  /** Messages the operation carries (`messaging.batch.message_count` when more than one may). */
  count?: number;
  /** More attributes. */
  attributes?: Attributes;
  /** The span's parent (default: the active context). */
  parent?: Context;
}

/**
 * Runs `fn` in a span `{operation} {destination}`, recording its duration (and, for a send, the
 * messages sent); `fn` gets the span (to add what it learns). An error ends the span with it.
 */
export async function traced<T>(op: Operation, t: Traced, fn: (span: Span) => Promise<T>): Promise<T> {
  const attributes: Attributes = {
    "messaging.system": MESSAGING_SYSTEM,
    "messaging.operation.type": op,
    "messaging.operation.name": t.name,
    "messaging.destination.name": t.destination,
    ...(t.count !== undefined && t.count !== 1 ? { "messaging.batch.message_count": t.count } : {}),
    ...t.attributes,
  };
  const started = performance.now();
  const span = tracer().startSpan(
    `${op} ${t.destination}`,
    { kind: KIND[op], attributes },
    t.parent ?? context.active(),
  );
  const metric = {
    "messaging.system": MESSAGING_SYSTEM,
    "messaging.operation.type": op,
    "messaging.operation.name": t.name,
    "messaging.destination.name": t.destination,
  };
  try {
    // Without an SDK the span records nothing, and nothing needs it as a parent.
    const result = span.isRecording()
      ? await context.with(trace.setSpan(t.parent ?? context.active(), span), () => fn(span))
      : await fn(span);
    span.end();
    record(op, metric, started, t.count);
    return result;
  } catch (e) {
    const type = errorType(e);
    span.recordException(e instanceof Error ? e : String(e));
    span.setStatus({ code: SpanStatusCode.ERROR, message: e instanceof Error ? e.message : String(e) });
    span.setAttribute("error.type", type);
    span.end();
    record(op, { ...metric, "error.type": type }, started, t.count);
    throw e;
  }
}

function record(op: Operation, attributes: Attributes, started: number, count: number | undefined): void {
  const seconds = (performance.now() - started) / 1000;
  const m = meter();
  if (op === "process") m.process.record(seconds, attributes);
  else m.duration.record(seconds, attributes);
  if (op === "send" && attributes["error.type"] === undefined) m.sent.add(count ?? 1, attributes);
}

/** Counts messages delivered to the application (a receive that got them). */
export function consumed(destination: string, count: number, name: string): void {
  if (count === 0) return;
  meter().consumed.add(count, {
    "messaging.system": MESSAGING_SYSTEM,
    "messaging.operation.type": "receive",
    "messaging.operation.name": name,
    "messaging.destination.name": destination,
  });
}

/** The stable code of an error (a QueueError's), or its name. */
function errorType(e: unknown): string {
  const code = (e as { code?: unknown })?.code;
  if (typeof code === "string") return code;
  return e instanceof Error ? e.name : "_OTHER";
}

/**
 * A span's context as a W3C `traceparent` (the active span's by default); undefined when it records
 * nothing (no SDK). Taken from the span itself, not the active context: no context manager is needed
 * (a Worker has none by default).
 */
export function traceparentOf(span: Span | undefined = trace.getSpan(context.active())): string | undefined {
  if (span === undefined || !span.isRecording()) return undefined;
  const sc = span.spanContext();
  if (!trace.isSpanContextValid(sc)) return undefined;
  return `00-${sc.traceId}-${sc.spanId}-${sc.traceFlags.toString(16).padStart(2, "0")}`;
}

/** A context whose parent is the span a `traceparent` names (the message's publisher's); the active one otherwise. */
export function contextOf(traceparent: string | null | undefined): Context {
  const m = typeof traceparent === "string" ? TRACEPARENT.exec(traceparent) : null;
  if (!m) return context.active();
  const sc = {
    traceId: m[1] as string,
    spanId: m[2] as string,
    traceFlags: Number.parseInt(m[3] as string, 16) & TraceFlags.SAMPLED,
    isRemote: true,
  };
  return trace.isSpanContextValid(sc) ? trace.setSpanContext(ROOT_CONTEXT, sc) : context.active();
}

/** A `traceparent` that is one (what the API and the library accept to store with a message). */
export const isTraceparent = (v: unknown): v is string => typeof v === "string" && TRACEPARENT.test(v);
