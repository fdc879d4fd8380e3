// The gateway's OTLP/HTTP JSON next to what npm's
// @opentelemetry/exporter-trace-otlp-http sends for an equivalent span
// (docs/design.md §5 Traces): both exporters post to one collector on
// 127.0.0.1; the JS SDK is given the gateway's ids, times, kinds, status and
// attributes, and the two encodings are compared field by field: ids as the
// same lowercase hex, times as the same decimal strings, kind and status
// code as the same integers, attribute keys and value kinds the same. The
// one documented difference: an intValue is a JSON string from the gateway
// (docs/design.md §5: 64-bit integers as strings, as the proto3 JSON mapping
// writes int64) and a JSON number from the JS exporter; collectors accept
// both.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { context, trace, SpanKind, SpanStatusCode, TraceFlags } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';

import {
  SLOW, startMock, startGateway, gatewayConfig, startCapture, postJSON, assertCleanExit,
  stopAll, sleep,
} from './lib.mjs';

const TID = '0af7651916cd43dd8448eb211c80319c';
const PARENT = 'b7ad6b7169203331';

let mock;
let gw;
let col;

before(async () => {
  col = await startCapture(() => ({
    status: 200,
    headers: { 'content-type': 'application/json' },
    chunks: ['{}'],
  }));
  mock = await startMock();
  gw = await startGateway(
    gatewayConfig(mock.port, {
      routes: [
        {
          name: 'switch',
          targets: ['mo/p@503', 'mo/f'],
          rules: [{ on: ['overloaded'], action: 'switch' }],
        },
      ],
    }),
    {
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${col.port}`,
        OTEL_BSP_SCHEDULE_DELAY: '20',
        OTEL_SERVICE_NAME: 'airetry',
      },
    },
  );
});

after(async () => {
  await stopAll(gw, mock);
  await col?.stop();
});

// Every span posted to path, in arrival order.
function spansAt(path) {
  const out = [];
  for (const s of col.seen) {
    if (s.url !== path) continue;
    for (const rs of s.body.resourceSpans)
      for (const ss of rs.scopeSpans) out.push(...ss.spans);
  }
  return out;
}

async function waitSpans(path, pred, n, what) {
  const end = Date.now() + 10000 * SLOW;
  for (;;) {
    const got = spansAt(path).filter(pred);
    if (got.length >= n) return got;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20); // a bounded poll of what the collector received
  }
}

// An attribute list as the JS SDK's attribute map (intValue -> number).
function toSdkAttributes(list) {
  const out = {};
  for (const { key, value } of list) {
    if ('stringValue' in value) out[key] = value.stringValue;
    else if ('intValue' in value) out[key] = Number(value.intValue);
    else if ('arrayValue' in value) out[key] = value.arrayValue.values.map((v) => v.stringValue);
    else throw new Error(`unexpected value kind for ${key}: ${JSON.stringify(value)}`);
  }
  return out;
}

const hr = (ns) => [Number(BigInt(ns) / 1000000000n), Number(BigInt(ns) % 1000000000n)];

test('a gateway span and the JS exporter’s equivalent encode alike', async () => {
  const r = await postJSON(
    `${gw.url}/v1/chat/completions`,
    { model: 'switch', messages: [{ role: 'user', content: 'hi' }] },
    { traceparent: `00-${TID}-${PARENT}-01` },
  );
  assert.equal(r.status, 200, r.body);
  const ours = await waitSpans('/v1/traces', (s) => s.traceId === TID, 3, 'the gateway spans');
  const server = ours.find((s) => s.kind === 2);
  const attempts = ours.filter((s) => s.kind === 3);
  assert.ok(server && attempts.length === 2, JSON.stringify(ours));

  // The JS SDK, handed the same ids: the server span's first, then each
  // attempt's, in the order the spans are started below.
  const ids = [server.spanId, ...attempts.map((s) => s.spanId)];
  const provider = new BasicTracerProvider({
    resource: new Resource({ 'service.name': 'airetry' }),
    idGenerator: { generateTraceId: () => TID, generateSpanId: () => ids.shift() },
  });
  const exporter = new OTLPTraceExporter({ url: `http://127.0.0.1:${col.port}/js/v1/traces` });
  provider.addSpanProcessor(new SimpleSpanProcessor(exporter));
  const tracer = provider.getTracer('airetry');
  const remote = trace.setSpanContext(context.active(), {
    traceId: TID,
    spanId: PARENT,
    traceFlags: TraceFlags.SAMPLED,
    isRemote: true,
  });
  const kinds = { 2: SpanKind.SERVER, 3: SpanKind.CLIENT };
  const start = (s, ctx) =>
    tracer.startSpan(
      s.name,
      { kind: kinds[s.kind], startTime: hr(s.startTimeUnixNano), attributes: toSdkAttributes(s.attributes) },
      ctx,
    );
  const end = (span, s) => {
    if (s.status.code === 2) span.setStatus({ code: SpanStatusCode.ERROR, message: s.status.message });
    span.end(hr(s.endTimeUnixNano));
  };
  const jsServer = start(server, remote);
  const under = trace.setSpan(context.active(), jsServer);
  for (const a of attempts) end(start(a, under), a);
  end(jsServer, server);
  await provider.forceFlush();
  const theirs = await waitSpans('/js/v1/traces', (s) => s.traceId === TID, 3, 'the JS spans');

  for (const o of ours) {
    const t = theirs.find((s) => s.spanId === o.spanId);
    assert.ok(t, `no JS span ${o.spanId}`);
    // Every field we send, the JS exporter sends too, with the same JSON type
    // and value (it adds the empty events, links and dropped counts).
    for (const k of Object.keys(o)) {
      assert.ok(k in t, `JS lacks ${k}`);
      if (k === 'attributes' || k === 'status') continue;
      assert.deepEqual(o[k], t[k], `${k} of ${o.name}`);
    }
    for (const k of ['traceId', 'spanId', 'parentSpanId', 'startTimeUnixNano', 'endTimeUnixNano'])
      assert.equal(typeof t[k], 'string', `JS ${k} is a string`);
    assert.equal(typeof t.kind, 'number');
    assert.equal(t.status.code, o.status.code, `status of ${o.name}`);
    assert.equal(t.status.message, o.status.message);
    const ta = Object.fromEntries(t.attributes.map((a) => [a.key, a.value]));
    assert.deepEqual(
      o.attributes.map((a) => a.key).sort(),
      Object.keys(ta).sort(),
      `attribute keys of ${o.name}`,
    );
    for (const { key, value } of o.attributes) {
      const tv = ta[key];
      assert.deepEqual(Object.keys(value), Object.keys(tv), `value kind of ${key}`);
      if ('intValue' in value) {
        // The one difference: int64 as a string (ours) or a number (JS).
        assert.equal(typeof value.intValue, 'string');
        assert.equal(typeof tv.intValue, 'number');
        assert.equal(Number(value.intValue), tv.intValue, key);
      } else {
        assert.deepEqual(value, tv, key);
      }
    }
  }
  // The resource: service.name the same way.
  const ourRes = col.seen.find((s) => s.url === '/v1/traces').body.resourceSpans[0].resource;
  const jsRes = col.seen.find((s) => s.url === '/js/v1/traces').body.resourceSpans[0].resource;
  const svc = (res) => res.attributes.find((a) => a.key === 'service.name').value;
  assert.deepEqual(svc(ourRes), svc(jsRes));
  await provider.shutdown();
});

test('the gateway and the mock exit cleanly', async () => {
  await assertCleanExit(assert, gw, mock);
});
