// The HTTP surface: bad requests of every kind get the documented status and
// a JSON error in the caller's dialect, and the gateway keeps serving; client
// auth (client_keys_env); /healthz, /v1/models, /metrics; HTTP/1.1 details
// (chunked bodies, Expect: 100-continue, pipelining, idle and slow-request
// timeouts). docs/design.md §4, 5, 8.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import {
  OpenAI, Anthropic, startMock, startGateway, gatewayConfig, canonical, request, postJSON,
  rawExchange, parseRaw, thrown, assertCleanExit, stopAll,
} from './lib.mjs';

const KEYS = ['k-one-7f3a', 'k-two-91bc'];
const WRONG = 'k-wrong-0000';
const MAX_BODY = 4096;
const MAX_HEADER = 2048;
const IDLE_MS = 1000;
const REQUEST_MS = 1000;

let mock;
let gw;
let base;

before(async () => {
  mock = await startMock();
  gw = await startGateway(gatewayConfig(mock.port, {
    client_keys_env: 'AIRETRY_E2E_KEYS',
    routes: [
      { name: 'alpha', targets: ['mo/h-alpha'] },
      { name: 'beta', targets: ['ma/h-beta', 'mo/h-beta-fb'] },
      { name: 'metered', targets: ['mo/h-met@529@k=1', 'ma/h-met-fb'] },
    ],
    limits: { max_body_bytes: MAX_BODY, max_header_bytes: MAX_HEADER, idle_timeout_ms: IDLE_MS, request_timeout_ms: REQUEST_MS },
  }), { env: { AIRETRY_E2E_KEYS: ` ${KEYS[0]}, ${KEYS[1]} ` } });
  base = gw.url;
});

after(async () => {
  await stopAll(gw, mock);
});

const AUTH = { authorization: `Bearer ${KEYS[0]}` };
const OAI = '/v1/chat/completions';
const ANT = '/v1/messages';
const GOOD_OAI = { model: 'alpha', messages: [{ role: 'user', content: 'hi' }] };
const GOOD_ANT = { model: 'alpha', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] };

// An OpenAI-dialect error body: {"error": {"message", "type", ...}}.
function assertOpenAIError(r, status) {
  assert.equal(r.status, status, r.body);
  assert.match(r.headers['content-type'] || '', /^application\/json/);
  const b = JSON.parse(r.body);
  assert.equal(typeof b.error, 'object', r.body);
  assert.equal(typeof b.error.message, 'string');
  assert.ok(b.error.message.length > 0);
  assert.equal(typeof b.error.type, 'string');
  assert.equal(b.type, undefined, 'not the Anthropic shape');
  return b;
}

// An Anthropic-dialect error body: {"type": "error", "error": {"type", "message"}}.
function assertAnthropicError(r, status) {
  assert.equal(r.status, status, r.body);
  assert.match(r.headers['content-type'] || '', /^application\/json/);
  const b = JSON.parse(r.body);
  assert.equal(b.type, 'error', r.body);
  assert.equal(typeof b.error.type, 'string');
  assert.equal(typeof b.error.message, 'string');
  assert.ok(b.error.message.length > 0);
  return b;
}

async function stillServing() {
  const r = await postJSON(base + OAI, GOOD_OAI, AUTH);
  assert.equal(r.status, 200, r.body);
  assert.equal(JSON.parse(r.body).choices[0].message.content, canonical('h-alpha'));
}

/* ---- bad JSON and wrong types -------------------------------------------------------- */

const BAD_BODIES = [
  ['invalid JSON', '{"model": "alpha", "messages": ['],
  ['not JSON at all', 'hello'],
  ['a JSON array', '[1, 2]'],
  ['a JSON string', '"alpha"'],
  ['messages not an array', { model: 'alpha', messages: 'hi' }],
  ['stream not a boolean', { model: 'alpha', messages: [{ role: 'user', content: 'hi' }], stream: 'yes' }],
  ['max_tokens a string', { model: 'alpha', messages: [{ role: 'user', content: 'hi' }], max_tokens: '20' }],
  ['model not a string', { model: 7, messages: [{ role: 'user', content: 'hi' }], max_tokens: 20 }],
  ['missing model', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 20 }],
  ['missing messages', { model: 'alpha', max_tokens: 20 }],
  ['a message not an object', { model: 'alpha', messages: ['hi'], max_tokens: 20 }],
  ['empty body', ''],
];

for (const [what, body] of BAD_BODIES) {
  test(`400 for ${what}, in both dialects`, async () => {
    const o = await postJSON(base + OAI, body, AUTH);
    assertOpenAIError(o, 400);
    const a = await postJSON(base + ANT, body, { 'x-api-key': KEYS[1] });
    assertAnthropicError(a, 400);
    assert.equal(o.headers['x-should-retry'], 'false');
  });
}

test('400 for invalid UTF-8 inside a JSON string, in both dialects', async () => {
  const pre = Buffer.from('{"model":"alpha","max_tokens":20,"messages":[{"role":"user","content":"bad ');
  const post = Buffer.from('"}]}');
  const body = Buffer.concat([pre, Buffer.from([0xc3, 0x28, 0xff]), post]);
  const o = await request(base + OAI, { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body });
  assertOpenAIError(o, 400);
  const a = await request(base + ANT, { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body });
  assertAnthropicError(a, 400);
});

test('the SDKs surface a 400 as BadRequestError', async () => {
  const oa = new OpenAI({ baseURL: base + '/v1', apiKey: KEYS[0], maxRetries: 0 });
  const e = await thrown(() => oa.chat.completions.create({ model: 'alpha', messages: 'nope' }));
  assert.ok(e instanceof OpenAI.BadRequestError, `${e?.constructor?.name}`);
  const an = new Anthropic({ baseURL: base, apiKey: KEYS[1], maxRetries: 0 });
  const e2 = await thrown(() => an.messages.create({ model: 'alpha', max_tokens: 'x', messages: [] }));
  assert.ok(e2 instanceof Anthropic.BadRequestError, `${e2?.constructor?.name}`);
});

test('unknown model: 404 in the dialect, through both SDKs', async () => {
  const oa = new OpenAI({ baseURL: base + '/v1', apiKey: KEYS[0], maxRetries: 0 });
  const e = await thrown(() => oa.chat.completions.create({ model: 'no-such-route', messages: [{ role: 'user', content: 'x' }] }));
  assert.ok(e instanceof OpenAI.NotFoundError, `${e?.constructor?.name}: ${e?.message}`);
  assert.equal(typeof e.error.message, 'string');
  const an = new Anthropic({ baseURL: base, apiKey: KEYS[1], maxRetries: 0 });
  const e2 = await thrown(() => an.messages.create({ model: 'nope/none', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }));
  assert.ok(e2 instanceof Anthropic.NotFoundError, `${e2?.constructor?.name}: ${e2?.message}`);
  assert.equal(e2.error.type, 'error');
  assert.equal((await mock.log()).filter((a) => a.model === 'none' || a.model === 'no-such-route').length, 0);
});

/* ---- limits ------------------------------------------------------------------------------ */

const bigBody = (n) => JSON.stringify({ ...GOOD_OAI, messages: [{ role: 'user', content: 'x'.repeat(n) }] });

test('body over limits.max_body_bytes: 413 with a JSON error (OpenAI endpoint)', async () => {
  const r = await postJSON(base + OAI, bigBody(MAX_BODY), AUTH);
  assertOpenAIError(r, 413);
  await stillServing();
});

test('body over limits.max_body_bytes: 413 in the Anthropic dialect on /v1/messages', {
}, async () => {
  const r = await postJSON(base + ANT, bigBody(MAX_BODY), { 'x-api-key': KEYS[1] });
  assertAnthropicError(r, 413);
});

test('body over the limit sent chunked (no content-length): 413', async () => {
  const chunk = 'x'.repeat(1000);
  let raw = `POST ${OAI} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${KEYS[0]}\r\n` +
    'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
  for (let i = 0; i < 6; i++) raw += `${chunk.length.toString(16)}\r\n${chunk}\r\n`;
  raw += '0\r\n\r\n';
  const r = await rawExchange(gw.port, raw);
  const p = parseRaw(r.data);
  assert.equal(p.status, 413, r.data.slice(0, 200));
  assert.equal(typeof p.body.error.message, 'string');
});

test('request head over limits.max_header_bytes: 431 with a JSON error', async () => {
  const r = await request(base + OAI, {
    method: 'POST',
    headers: { ...AUTH, 'content-type': 'application/json', 'x-padding': 'p'.repeat(MAX_HEADER + 100) },
    body: JSON.stringify(GOOD_OAI),
  });
  assertOpenAIError(r, 431);
  await stillServing();
});

test('malformed HTTP on a raw socket: 400 with a JSON error, connection closed', async () => {
  for (const bytes of [
    'GARBAGE\r\n\r\n',
    'POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello',
    /* with the key: without it the head alone gets 401 (auth before body) */
    `POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${KEYS[0]}\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n`,
    'GET /healthz HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n',
  ]) {
    const r = await rawExchange(gw.port, bytes);
    const p = parseRaw(r.data);
    assert.equal(p.status, 400, `${JSON.stringify(bytes)} → ${r.data.slice(0, 200)}`);
    assert.equal(typeof p.body?.error?.message, 'string', r.data);
    assert.ok(r.closed, 'the connection is closed after a malformed request');
  }
  const v = parseRaw((await rawExchange(gw.port, 'GET / HTTP/9.9\r\n\r\n')).data);
  assert.equal(v.status, 505, 'an unknown HTTP version');
  await stillServing();
});

test('unknown path: 404 JSON; wrong method: 405 in the dialect', async () => {
  const r = await request(base + '/v2/nothing', { headers: AUTH });
  assertOpenAIError(r, 404);
  const g1 = await request(base + OAI, { method: 'GET', headers: AUTH });
  assertOpenAIError(g1, 405);
  const g2 = await request(base + ANT, { method: 'GET', headers: { 'x-api-key': KEYS[1] } });
  assertAnthropicError(g2, 405);
  const g3 = await request(base + OAI, { method: 'PUT', headers: AUTH, body: '{}' });
  assertOpenAIError(g3, 405);
  const h = await request(base + '/healthz', { method: 'POST', body: '' });
  assert.equal(h.status, 405);
  await stillServing();
});

test('wrong method on GET endpoints (/v1/models, /metrics): 405', {
}, async () => {
  assert.equal((await request(base + '/v1/models', { method: 'POST', headers: AUTH, body: '' })).status, 405);
  assert.equal((await request(base + '/metrics', { method: 'POST', headers: AUTH, body: '' })).status, 405);
});

test('405 answers carry an Allow header (RFC 9110 15.5.6)', {
}, async () => {
  const g1 = await request(base + OAI, { method: 'GET', headers: AUTH });
  assert.equal(g1.status, 405);
  assert.match(g1.headers.allow || '', /POST/);
  const h = await request(base + '/healthz', { method: 'POST', body: '' });
  assert.equal(h.status, 405);
  assert.match(h.headers.allow || '', /GET/);
});

/* ---- client auth ------------------------------------------------------------------------ */

test('client auth: no key / wrong key → 401 in the dialect; Bearer and x-api-key accepted', async () => {
  assertOpenAIError(await postJSON(base + OAI, GOOD_OAI), 401);
  assertAnthropicError(await postJSON(base + ANT, GOOD_ANT), 401);
  assertOpenAIError(await postJSON(base + OAI, GOOD_OAI, { authorization: `Bearer ${WRONG}` }), 401);
  assertAnthropicError(await postJSON(base + ANT, GOOD_ANT, { 'x-api-key': WRONG }), 401);
  assertOpenAIError(await postJSON(base + OAI, GOOD_OAI, { authorization: `Bearer ${KEYS[0]}x` }), 401);
  assertOpenAIError(await postJSON(base + OAI, GOOD_OAI, { authorization: `Bearer ${KEYS[0].slice(0, -1)}` }), 401);
  assertOpenAIError(await postJSON(base + OAI, GOOD_OAI, { authorization: KEYS[0] }), 401);
  assertOpenAIError(await request(base + '/v1/models'), 401);
  // Accepted: either key, either header.
  for (const h of [{ authorization: `Bearer ${KEYS[0]}` }, { authorization: `Bearer ${KEYS[1]}` },
    { 'x-api-key': KEYS[0] }, { 'x-api-key': KEYS[1] }]) {
    const r = await postJSON(base + OAI, GOOD_OAI, h);
    assert.equal(r.status, 200, `${JSON.stringify(h)}: ${r.body}`);
  }
  assert.equal((await request(base + '/healthz')).status, 200, '/healthz needs no key');
});

test('client auth through the SDKs: wrong key → AuthenticationError; right key answers', async () => {
  const bad = new OpenAI({ baseURL: base + '/v1', apiKey: WRONG, maxRetries: 0 });
  const e = await thrown(() => bad.chat.completions.create(GOOD_OAI));
  assert.ok(e instanceof OpenAI.AuthenticationError, `${e?.constructor?.name}`);
  const badA = new Anthropic({ baseURL: base, apiKey: WRONG, maxRetries: 0 });
  const e2 = await thrown(() => badA.messages.create(GOOD_ANT));
  assert.ok(e2 instanceof Anthropic.AuthenticationError, `${e2?.constructor?.name}`);
  const oa = new OpenAI({ baseURL: base + '/v1', apiKey: KEYS[1], maxRetries: 0 });
  assert.equal((await oa.chat.completions.create(GOOD_OAI)).choices[0].message.content, canonical('h-alpha'));
  const an = new Anthropic({ baseURL: base, apiKey: KEYS[0], maxRetries: 0 });
  assert.equal((await an.messages.create(GOOD_ANT)).content[0].text, canonical('h-alpha'));
});

test('client keys (right or wrong) never appear in the gateway\'s logs', async () => {
  assert.ok(gw.logLines().length > 0, 'requests were logged');
  for (const k of [...KEYS, WRONG]) assert.ok(!gw.p.stderr.includes(k), `key ${k} leaked into the gateway's stderr`);
});

test('every request gets a JSON log line, rejected ones too', {
}, async () => {
  const before = gw.logLines().length;
  const r = await postJSON(base + OAI, GOOD_OAI, { 'x-request-id': 'e2e-unauth-1' });
  assert.equal(r.status, 401);
  const r2 = await postJSON(base + OAI, '{', { ...AUTH, 'x-request-id': 'e2e-badjson-1' });
  assert.equal(r2.status, 400);
  const l1 = await gw.logFor('e2e-unauth-1', 1000);
  const l2 = await gw.logFor('e2e-badjson-1', 1000);
  assert.ok(l1 && l2, `log lines: ${gw.logLines().length - before} new`);
  assert.equal(l1.status, 401);
  assert.equal(l2.status, 400);
});

/* ---- endpoints ------------------------------------------------------------------------- */

test('/healthz 200; /v1/models lists the routes (OpenAI list format)', async () => {
  const h = await request(base + '/healthz');
  assert.equal(h.status, 200);
  const m = await request(base + '/v1/models', { headers: AUTH });
  assert.equal(m.status, 200);
  const b = JSON.parse(m.body);
  assert.equal(b.object, 'list');
  assert.deepEqual(b.data.map((x) => x.id), ['alpha', 'beta', 'metered']);
  for (const x of b.data) assert.equal(x.object, 'model');
  const oa = new OpenAI({ baseURL: base + '/v1', apiKey: KEYS[0], maxRetries: 0 });
  const ids = [];
  for await (const x of oa.models.list()) ids.push(x.id);
  assert.deepEqual(ids, ['alpha', 'beta', 'metered']);
});

test('/metrics counts requests by route/outcome and attempts by target/reason', async () => {
  const oa = new OpenAI({ baseURL: base + '/v1', apiKey: KEYS[0], maxRetries: 0 });
  for (let i = 0; i < 3; i++) {
    const c = await oa.chat.completions.create({ model: 'metered', messages: [{ role: 'user', content: 'm' }] });
    assert.equal(c.choices[0].message.content, canonical('h-met@529@k=1'));
  }
  await thrown(() => oa.chat.completions.create({ model: 'mo/h-met-bad@400', messages: [{ role: 'user', content: 'm' }] }));
  const r = await request(base + '/metrics', { headers: AUTH });
  assert.equal(r.status, 200);
  assert.match(r.headers['content-type'], /^text\/plain/);
  const lines = r.body.split('\n');
  const val = (prefix) => {
    const l = lines.find((x) => x.startsWith(prefix + ' '));
    return l === undefined ? undefined : Number(l.slice(prefix.length + 1));
  };
  assert.equal(val('airetry_requests_total{route="metered",outcome="ok"}'), 3, r.body);
  /* A provider/model no route lists is labelled "other" (bounded series). */
  assert.equal(val('airetry_requests_total{route="other",outcome="error"}'), 1, r.body);
  assert.ok(!r.body.includes('h-met-bad'), r.body);
  assert.equal(val('airetry_attempts_total{target="mo/h-met@529@k=1",reason="overloaded"}'), 1, r.body);
  assert.equal(val('airetry_attempts_total{target="mo/h-met@529@k=1",reason="ok"}'), 3, r.body);
  assert.equal(val('airetry_attempts_total{target="other",reason="bad_request"}'), 1, r.body);
  assert.ok(val('airetry_retries_total') >= 1);
  assert.ok(r.body.includes('# TYPE airetry_request_seconds histogram'));
  assert.ok(val('airetry_request_seconds_count') >= 4);
  assert.equal(val('airetry_breaker_state{target="mo/h-met@529@k=1"}'), 0);
});

/* ---- HTTP/1.1 details ----------------------------------------------------------------- */

test('a chunked request body is accepted', async () => {
  const body = JSON.stringify(GOOD_OAI);
  const half = Math.floor(body.length / 2);
  const raw = `POST ${OAI} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${KEYS[0]}\r\n` +
    'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n' +
    `${half.toString(16)}\r\n${body.slice(0, half)}\r\n${(body.length - half).toString(16)}\r\n${body.slice(half)}\r\n0\r\n\r\n`;
  const r = await rawExchange(gw.port, raw);
  const p = parseRaw(r.data);
  assert.equal(p.status, 200, r.data.slice(0, 300));
  assert.equal(p.body.choices[0].message.content, canonical('h-alpha'));
});

test('Expect: 100-continue gets 100 Continue, then the answer', async () => {
  const body = JSON.stringify(GOOD_OAI);
  const head = `POST ${OAI} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${KEYS[0]}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`;
  const net = await import('node:net');
  const data = await new Promise((resolve, reject) => {
    const s = net.connect(gw.port, '127.0.0.1');
    let got = '';
    let sent = false;
    const timer = setTimeout(() => { s.destroy(); reject(new Error(`no answer: ${got}`)); }, 5000);
    s.setEncoding('latin1');
    s.on('connect', () => s.write(head));
    s.on('data', (d) => {
      got += d;
      if (!sent && got.startsWith('HTTP/1.1 100')) {
        sent = true;
        s.write(body);
      }
    });
    s.on('close', () => { clearTimeout(timer); resolve(got); });
    s.on('error', (e) => { clearTimeout(timer); reject(e); });
  });
  assert.match(data, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
  assert.ok(data.includes(canonical('h-alpha')));
});

test('pipelined requests are answered in order', async () => {
  const req = (model) => {
    const b = JSON.stringify({ model, messages: [{ role: 'user', content: 'p' }] });
    return `POST ${OAI} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${KEYS[0]}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${b.length}\r\n\r\n${b}`;
  };
  const raw = req('mo/pipe-1@slow=150') + req('mo/pipe-2') + 'GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n';
  const r = await rawExchange(gw.port, raw, { ms: 8000 });
  const i1 = r.data.indexOf(canonical('pipe-1@slow=150'));
  const i2 = r.data.indexOf(canonical('pipe-2'));
  assert.ok(i1 > 0 && i2 > i1, `in order: ${r.data.slice(0, 400)}`);
  assert.equal((r.data.match(/HTTP\/1\.1 200 /g) || []).length, 3);
});

test('an idle connection is closed after limits.idle_timeout_ms', { timeout: 15000 }, async () => {
  const r = await rawExchange(gw.port, '', { ms: IDLE_MS * 5 });
  assert.ok(r.closed, 'closed by the gateway');
  assert.ok(r.ms >= IDLE_MS * 0.8 && r.ms < IDLE_MS * 4, `after ${r.ms.toFixed(0)} ms`);
});

test('a slow request head (slowloris) gets 408 and is closed after request_timeout_ms', { timeout: 15000 }, async () => {
  const r = await rawExchange(gw.port, `POST ${OAI} HTTP/1.1\r\nHost: a\r\nX-Slow: 1`, { ms: REQUEST_MS * 5 });
  assert.ok(r.closed, 'closed by the gateway');
  assert.ok(r.ms < REQUEST_MS * 4, `after ${r.ms.toFixed(0)} ms`);
  if (r.data) assert.equal(parseRaw(r.data).status, 408, r.data);
});

test('after all of it the gateway still serves both dialects', async () => {
  await stillServing();
  const r = await postJSON(base + ANT, { model: 'beta', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': KEYS[1] });
  assert.equal(r.status, 200, r.body);
  assert.equal(JSON.parse(r.body).content[0].text, canonical('h-beta'));
});

test('the gateway and the mock exit 0 on SIGTERM', async () => {
  await assertCleanExit(assert, gw, mock);
});
