// Every fault kind of `airetry mock` (docs/mock.md), through both SDKs:
// with a fallback target the SDK gets the complete answer; without one a
// clean SDK error with the documented status and the `attempts` array; never
// a truncated success. Upstream attempts are counted exactly in the mock's
// log. docs/design.md §2.1, 3, 5.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import {
  OpenAI, Anthropic, ASAN, SLOW, startMock, startGateway, gatewayConfig, canonical,
  collectOpenAI, collectAnthropic, errAttempts, thrown, assertCleanExit, stopAll, sleep,
} from './lib.mjs';

// Deadlines of this gateway: a silent or stalled upstream is given up after T.
const T = (ASAN ? 1000 : 500) * SLOW;
const PHRASE = "I'm sorry, but I cannot assist";

/*
 * The fault table. f: the mock's model-name tokens. only: the upstream
 * dialect the fault exists in (the mock's `code` is OpenAI's error.code).
 * fb: attempts on the primary (P) and the fallback (B) when the route has a
 * fallback, and who answers ('P', 'B', or an HTTP status: a final error that
 * no fallback may hide). alone: the final status and reason when the
 * primary is the only target, or ok: true when it still answers.
 */
const CASES = [
  { f: '429@ram=10', reason: 'rate_limit', fb: { P: 3, B: 1, by: 'B' }, alone: { status: 429, P: 3, retryAfter: true } },
  { f: '529', reason: 'overloaded', fb: { P: 2, B: 1, by: 'B' }, alone: { status: 529, P: 2 } },
  { f: '503', reason: 'overloaded', fb: { P: 2, B: 1, by: 'B' }, alone: { status: 503, P: 2 } },
  { f: '500', reason: 'server_error', fb: { P: 2, B: 1, by: 'B' }, alone: { status: 500, P: 2 } },
  { f: '401', reason: 'auth', fb: { P: 1, B: 1, by: 'B' }, alone: { status: 401, P: 1 } },
  { f: '403', reason: 'auth', fb: { P: 1, B: 1, by: 'B' }, alone: { status: 403, P: 1 } },
  { f: '404', reason: 'not_found', fb: { P: 1, B: 1, by: 'B' }, alone: { status: 404, P: 1 } },
  { f: '400', reason: 'bad_request', fb: { P: 1, B: 0, by: 400 }, alone: { status: 400, P: 1 } },
  { f: '429@code=insufficient_quota', only: 'openai', reason: 'quota', fb: { P: 1, B: 1, by: 'B' }, alone: { status: 429, P: 1 } },
  { f: '400@code=context_length_exceeded', only: 'openai', reason: 'context_overflow', fb: { P: 1, B: 1, by: 'B' }, alone: { status: 400, P: 1 } },
  { f: '400@code=content_policy_violation', only: 'openai', reason: 'content_filter', fb: { P: 1, B: 0, by: 400 }, alone: { status: 400, P: 1 } },
  { f: 'reset', reason: 'network', fb: { P: 2, B: 1, by: 'B' }, alone: { status: 502, P: 2 } },
  { f: 'hang', reason: 'timeout.first_byte', slow: true, fb: { P: 1, B: 1, by: 'B' }, alone: { status: 504, P: 1 } },
  { f: 'silent=60000', reason: 'timeout.first_byte', slow: true, fb: { P: 1, B: 1, by: 'B' }, alone: { status: 504, P: 1 } },
  { f: 'slow=60000', reason: 'timeout.first_chunk', slow: true, fb: { P: 1, B: 1, by: 'B' }, alone: { status: 504, P: 1 } },
  { f: 'stall=0', reason: 'timeout.first_chunk', slow: true, fb: { P: 1, B: 1, by: 'B' }, alone: { status: 504, P: 1 } },
  { f: 'cut=0', reason: 'network', fb: { P: 2, B: 1, by: 'B' }, alone: { status: 502, P: 2 } },
  { f: 'overload=0', reason: 'overloaded', fb: { P: 2, B: 1, by: 'B' }, alone: { status: [503, 529], P: 2 } },
  { f: 'bad=3', reason: null, fb: { P: 1, B: 0, by: 'P' }, alone: { ok: true, P: 1 } },
  { f: 'nodone', reason: null, fb: { P: 1, B: 0, by: 'P' }, alone: { ok: true, P: 1 } },
  { f: 'refuse', reason: 'refusal', fb: { P: 1, B: 1, by: 'B' }, alone: { status: 'any', P: 1 } },
  { f: '529@k=1', reason: 'overloaded', fb: { P: 2, B: 0, by: 'P' }, alone: { ok: true, P: 2 } },
  { f: '429@ram=10@k=2', reason: 'rate_limit', fb: { P: 3, B: 0, by: 'P' }, alone: { ok: true, P: 3 } },
];

// Variants: who calls, and the primary's / fallback's upstream dialects.
// 'oa': OpenAI SDK streaming, primary openai, fallback anthropic.
// 'an': Anthropic SDK streaming, primary anthropic, fallback openai.
// Alone: 'oa1' OpenAI SDK non-streaming to the primary in the other dialect
// when it exists there; 'an1' Anthropic SDK streaming to an openai primary.
const routes = [];
const plan = [];
CASES.forEach((c, i) => {
  const vs = [];
  if (c.only !== 'anthropic') vs.push({ v: 'oa', sdk: 'openai', papi: 'mo', bapi: 'ma', stream: true });
  if (c.only !== 'openai') vs.push({ v: 'an', sdk: 'anthropic', papi: 'ma', bapi: 'mo', stream: true });
  for (const x of vs) {
    const P = `p${i}${x.v}@${c.f}`;
    const B = `b${i}${x.v}`;
    const route = `f${i}${x.v}`;
    routes.push({ name: route, targets: [`${x.papi}/${P}`, `${x.bapi}/${B}`] });
    plan.push({ c, ...x, P, B, route });
  }
  const alone = [];
  alone.push({ v: 'oa1', sdk: 'openai', papi: c.only === 'openai' ? 'mo' : 'ma', stream: false });
  if (c.only !== 'anthropic') alone.push({ v: 'an1', sdk: 'anthropic', papi: 'mo', stream: true });
  for (const x of alone) plan.push({ c, ...x, alone: true, P: `q${i}${x.v}@${c.f}` });
});

let mock;
let gw;

before(async () => {
  mock = await startMock('faults.yaml');
  routes.push(
    { name: 'refuse-curly', targets: ['mo/refuse-curly', 'ma/rc-fb'] },
    { name: 'near-miss', targets: ['ma/near-miss', 'mo/nm-fb'] },
    { name: 'no-phrases', targets: ['mo/np@refuse', 'ma/np-fb'], refusal: { phrases: [] } },
    { name: 'ctx-long', targets: ['ma/ctx-long', 'mo/ctx-fb'] },
    { name: 'story', targets: ['mo/story', 'ma/story-fb'] },
    { name: 'malfail', targets: ['mo/mf@bad=1', 'ma/mf-fb'], malformed: 'fail' },
  );
  for (const f of ['cut=3', 'overload=3', 'stall=3', 'length', 'filter']) {
    for (const [tag, pa, ba] of [['o', 'mo', 'ma'], ['a', 'ma', 'mo']]) {
      routes.push({ name: `ac-${tag}-${f}`, targets: [`${pa}/ac${tag}@${f}`, `${ba}/ac${tag}-fb`] });
    }
  }
  const cfg = gatewayConfig(mock.port, {
    routes,
    defaults: {
      breaker: { enabled: false },
      timeouts: { first_byte_ms: T, first_chunk_ms: T, chunk_ms: T },
      refusal: { phrases: [PHRASE] },
    },
  });
  gw = await startGateway(cfg);
});

after(async () => {
  await stopAll(gw, mock);
});

const USER = [{ role: 'user', content: 'hello' }];
const hdr = (h, name) => (typeof h?.get === 'function' ? h.get(name) : h?.[name]);
const modelOf = (target) => target.slice(target.indexOf('/') + 1);

// The gateway's log line of a request (by its x-request-id).
async function logLine(rid) {
  const l = await gw.logFor(rid);
  assert.ok(l, `a log line for ${rid}`);
  return l;
}

// Calls the gateway through an SDK: resolves {text, finish, headers} or
// throws the SDK's error.
async function call(sdk, model, stream) {
  if (sdk === 'openai') {
    const oa = gw.openai();
    const { data, response } = await oa.chat.completions.create({ model, messages: USER, stream }).withResponse();
    if (!stream) {
      return { text: data.choices[0].message.content, finish: data.choices[0].finish_reason, headers: response.headers, model: data.model };
    }
    const r = await collectOpenAI(data);
    return { text: r.text, finish: r.finish, headers: response.headers, model: r.model };
  }
  const an = gw.anthropic();
  const { data, response } = await an.messages.create({ model, max_tokens: 100, messages: USER, stream }).withResponse();
  if (!stream) {
    return { text: data.content.map((b) => b.text).join(''), finish: data.stop_reason, headers: response.headers, model: data.model };
  }
  const r = await collectAnthropic(data);
  return { text: r.text, finish: r.stop, headers: response.headers, model: r.model };
}

// Waits (bounded) until every attempt of model has ended in the mock's log.
async function settledAttempts(model, n) {
  let log = [];
  for (let i = 0; i < 100 * SLOW; i++) {
    log = await mock.attempts(model);
    if (log.length >= n && log.every((a) => a.end_ms !== null)) break;
    await sleep(20);
  }
  return log;
}

function assertDialectError(sdk, err, status) {
  const Cls = sdk === 'openai' ? OpenAI.APIError : Anthropic.APIError;
  assert.ok(err instanceof Cls, `an SDK APIError, got ${err?.constructor?.name}: ${err?.message}`);
  if (status === 'any') assert.ok(err.status >= 400 && err.status <= 599, `status ${err.status}`);
  else if (Array.isArray(status)) assert.ok(status.includes(err.status), `status ${err.status} in ${status}`);
  else assert.equal(err.status, status);
  assert.equal(hdr(err.headers, 'x-should-retry'), 'false', 'final errors carry x-should-retry: false');
  if (sdk === 'openai') {
    assert.equal(typeof err.error.message, 'string');
    assert.equal(typeof err.error.type, 'string');
  } else {
    assert.equal(err.error.type, 'error');
    assert.equal(typeof err.error.error.type, 'string');
    assert.equal(typeof err.error.error.message, 'string');
  }
}

// The mock's count of a model's requests: exactly one per engine attempt
// (a reset on a reused upstream connection is not re-sent behind the
// engine's back: see the test below).
function assertUpstream(log, n, c, what) {
  assert.equal(log.length, n, `${what}: ${JSON.stringify(log)}`);
}

for (const p of plan) {
  const { c } = p;
  const title = p.alone
    ? `${c.f}: no fallback, ${p.sdk} SDK ${p.stream ? 'streaming' : 'non-streaming'} → ${p.papi === 'mo' ? 'openai' : 'anthropic'} upstream`
    : `${c.f}: with fallback, ${p.sdk} SDK streaming, ${p.papi === 'mo' ? 'openai' : 'anthropic'} primary`;
  test(title, { timeout: 30000 * SLOW }, async () => {
    await mock.reset();
    if (p.alone) {
      const target = `${p.papi}/${p.P}`;
      const r = await thrown(() => call(p.sdk, target, p.stream));
      if (c.alone.ok) {
        assert.ok(r.didNotThrow, `answered: ${r.message}`);
        assert.equal(r.value.text, canonical(p.P));
        assert.equal(hdr(r.value.headers, 'x-airetry-attempts'), String(c.alone.P));
      } else {
        assert.ok(!r.didNotThrow, `must fail, got ${JSON.stringify(r.value?.text)}`);
        assertDialectError(p.sdk, r, c.alone.status);
        const att = errAttempts(r);
        assert.ok(Array.isArray(att), 'the body has the attempts array');
        assert.equal(att.length, c.alone.P, JSON.stringify(att));
        for (const a of att) {
          assert.equal(a.target, target);
          assert.equal(typeof a.ms, 'number');
          assert.equal(typeof a.status, 'number');
          assert.ok('request_id' in a);
        }
        assert.equal(att.at(-1).reason, c.reason);
        assert.equal(hdr(r.headers, 'x-airetry-attempts'), String(c.alone.P));
        if (c.alone.retryAfter) assert.match(hdr(r.headers, 'retry-after') || '', /^\d+$/, 'a 429 final carries retry-after');
      }
      const log = await settledAttempts(p.P, c.alone.P);
      assertUpstream(log, c.alone.P, c, 'upstream attempts');
      if (c.slow) assert.ok(log.every((a) => a.hung_up), 'a timed-out attempt is closed upstream');
      return;
    }
    const r = await thrown(() => call(p.sdk, p.route, p.stream));
    if (typeof c.fb.by === 'number') {
      assert.ok(!r.didNotThrow, `must fail, got ${JSON.stringify(r.value?.text)}`);
      assertDialectError(p.sdk, r, c.fb.by);
      assert.equal(errAttempts(r).at(-1).reason, c.reason);
    } else {
      assert.ok(r.didNotThrow, `the SDK gets the answer, got ${r.constructor?.name}: ${r.message}`);
      const by = c.fb.by === 'P' ? `${p.papi}/${p.P}` : `${p.bapi}/${p.B}`;
      assert.equal(r.value.text, canonical(modelOf(by)), 'the complete canonical answer, once');
      assert.equal(r.value.model, modelOf(by), 'the model is the answering upstream\'s');
      assert.equal(hdr(r.value.headers, 'x-airetry-target'), by);
      assert.equal(hdr(r.value.headers, 'x-airetry-attempts'), String(c.fb.P + c.fb.B));
      const line = await logLine(hdr(r.value.headers, 'x-request-id'));
      assert.equal(line.outcome, 'ok');
      assert.equal(line.attempts.length, c.fb.P + c.fb.B);
      const failed = line.attempts.slice(0, -1);
      for (const a of failed) assert.equal(a.reason, c.reason, JSON.stringify(line.attempts));
      assert.equal(line.attempts.at(-1).reason, 'ok');
      if (c.f.startsWith('bad=')) assert.equal(line.malformed, 1, 'the malformed event is counted');
    }
    const logP = await settledAttempts(p.P, c.fb.P);
    const logB = await mock.attempts(p.B);
    assertUpstream(logP, c.fb.P, c, 'primary attempts');
    assert.equal(logB.length, c.fb.B, `fallback attempts: ${JSON.stringify(logB)}`);
    if (c.slow) assert.ok(logP.every((a) => a.hung_up), 'a timed-out attempt is closed upstream');
  });
}

/* ---- refusals ---------------------------------------------------------------------------- */

test('a refusal phrase fails over and nothing of the refusal reaches the client (streamed chunks)', async () => {
  await mock.reset();
  const oa = gw.openai();
  const { data, response } = await oa.chat.completions
    .create({ model: 'refuse-curly', messages: USER, stream: true })
    .withResponse();
  const r = await collectOpenAI(data);
  assert.equal(r.text, canonical('rc-fb'));
  const all = JSON.stringify(r.chunks).toLowerCase();
  assert.ok(!all.includes('sorry') && !all.includes('cannot'), 'no refusal text in any chunk');
  assert.equal(response.headers.get('x-airetry-target'), 'ma/rc-fb');
  assert.equal((await mock.attempts('refuse-curly')).length, 1);
  assert.equal((await mock.attempts('rc-fb')).length, 1);
  const line = await logLine(response.headers.get('x-request-id'));
  assert.deepEqual(line.attempts.map((a) => a.reason), ['refusal', 'ok']);
});

test('text that starts like a refusal phrase but diverges is released whole, once', async () => {
  await mock.reset();
  const an = gw.anthropic();
  const r = await collectAnthropic(await an.messages.create({ model: 'near-miss', max_tokens: 50, messages: USER, stream: true }));
  assert.equal(r.text, "I'm sorry, but I can help: here it is");
  assert.equal(r.stop, 'end_turn');
  assert.equal((await mock.attempts('nm-fb')).length, 0);
});

test('without phrases a canned refusal is an ordinary answer', async () => {
  await mock.reset();
  const c = await gw.openai().chat.completions.create({ model: 'no-phrases', messages: USER });
  assert.equal(c.choices[0].message.content, "I'm sorry, but I cannot assist with that request.");
  assert.equal((await mock.attempts('np-fb')).length, 0);
});

test('anthropic "prompt is too long" is context_overflow: switch', async () => {
  await mock.reset();
  const { data, response } = await gw.anthropic().messages
    .create({ model: 'ctx-long', max_tokens: 50, messages: USER })
    .withResponse();
  assert.equal(data.content[0].text, canonical('ctx-fb'));
  const line = await logLine(response.headers.get('x-request-id'));
  assert.deepEqual(line.attempts.map((a) => a.reason), ['context_overflow', 'ok']);
});

test('scripted attempts: 429 (hint 20 ms), 529, silent, then the fallback', { timeout: 30000 * SLOW }, async () => {
  await mock.reset();
  const { data, response } = await gw.openai().chat.completions
    .create({ model: 'story', messages: USER, stream: true })
    .withResponse();
  const r = await collectOpenAI(data);
  assert.equal(r.text, canonical('story-fb'));
  assert.equal(response.headers.get('x-airetry-attempts'), '4');
  const line = await logLine(response.headers.get('x-request-id'));
  assert.deepEqual(line.attempts.map((a) => [a.target, a.reason]), [
    ['mo/story', 'rate_limit'], ['mo/story', 'overloaded'], ['mo/story', 'timeout.first_chunk'], ['ma/story-fb', 'ok'],
  ]);
  const log = await mock.attempts('story');
  assert.deepEqual(log.map((a) => a.attempt), [1, 2, 3]);
  assert.ok(log[1].t_ms - log[0].t_ms >= 15, `the 20 ms Retry-After was honoured (${log[1].t_ms - log[0].t_ms} ms)`);
});

test('Retry-After hints longer than any backoff are honoured: retry-after seconds, x-ratelimit-reset', { timeout: 30000 * SLOW }, async () => {
  // The first rate_limit backoff is at most 500 ms (full jitter); a gap of
  // at least 650 ms between the two attempts can only come from the hint.
  for (const [target, model] of [['mo/rh@429@ra=0.7@k=1', 'rh@429@ra=0.7@k=1'], ['ma/rh2@429@ra=0.7@k=1', 'rh2@429@ra=0.7@k=1'], ['mo/rl-headers', 'rl-headers']]) {
    await mock.reset();
    const c = await gw.openai().chat.completions.create({ model: target, messages: USER });
    assert.equal(c.choices[0].message.content, canonical(model));
    const log = await mock.attempts(model);
    assert.deepEqual(log.map((a) => a.status), [429, 200], model);
    const gap = log[1].t_ms - log[0].t_ms;
    assert.ok(gap >= 650 && gap < 2000, `${model}: waited ${gap} ms for a 700 ms hint`);
  }
});

test('malformed: fail makes one bad event before content a malformed failure (retry, then switch)', async () => {
  await mock.reset();
  const { data, response } = await gw.openai().chat.completions
    .create({ model: 'malfail', messages: USER, stream: true })
    .withResponse();
  const r = await collectOpenAI(data);
  assert.equal(r.text, canonical('mf-fb'));
  assert.equal((await mock.attempts('mf@bad=1')).length, 2);
  const line = await logLine(response.headers.get('x-request-id'));
  assert.deepEqual(line.attempts.map((a) => a.reason), ['malformed', 'malformed', 'ok']);
});

test('a flapping upstream: failing inside its window, healthy after it', { timeout: 30000 * SLOW }, async () => {
  const model = 'mo/flp@503@flap=0-700';
  const t0 = await mock.reset();
  const e = await thrown(() => gw.openai().chat.completions.create({ model, messages: USER }));
  assert.equal(e.status, 503);
  // Mock time 700 is at most t0.received + 700 locally.
  const wait = t0.received + 800 - performance.now();
  if (wait > 0) await sleep(wait);
  const c = await gw.openai().chat.completions.create({ model, messages: USER });
  assert.equal(c.choices[0].message.content, canonical('flp@503@flap=0-700'));
  const log = await mock.attempts('flp@503@flap=0-700');
  assert.deepEqual(log.map((a) => a.status), [503, 503, 200]);
});

/* ---- failures after commit --------------------------------------------------------------- */

// The raw bytes of a streamed response (node's fetch, no SDK).
async function rawStream(path, body) {
  const res = await fetch(gw.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'test', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify(body),
  });
  let text = '';
  let failed = null;
  try {
    const dec = new TextDecoder();
    for await (const chunk of res.body) text += dec.decode(chunk, { stream: true });
  } catch (e) {
    failed = e;
  }
  return { status: res.status, headers: res.headers, text, failed };
}

for (const f of ['cut=3', 'overload=3', 'stall=3']) {
  for (const [tag, pname] of [['o', 'openai'], ['a', 'anthropic']]) {
    for (const sdk of ['openai', 'anthropic']) {
      test(`${f} after commit (${pname} upstream): the ${sdk} SDK stream raises, no fallback`, { timeout: 30000 * SLOW }, async () => {
        await mock.reset();
        const route = `ac-${tag}-${f}`;
        let got = '';
        const e = await thrown(async () => {
          if (sdk === 'openai') {
            const s = await gw.openai().chat.completions.create({ model: route, messages: USER, stream: true });
            for await (const ch of s) got += ch.choices[0]?.delta?.content ?? '';
          } else {
            const s = await gw.anthropic().messages.create({ model: route, max_tokens: 50, messages: USER, stream: true });
            for await (const ev of s) if (ev.type === 'content_block_delta') got += ev.delta.text ?? '';
          }
        });
        assert.ok(!e.didNotThrow, `the stream must not end cleanly (got ${JSON.stringify(got)})`);
        const Cls = sdk === 'openai' ? OpenAI.APIError : Anthropic.APIError;
        assert.ok(e instanceof Cls, `an error event in the dialect, got ${e?.constructor?.name}: ${e?.message}`);
        const full = canonical(`ac${tag}@${f}`);
        assert.equal(got, full.split(' ').slice(0, 3).join(' '), 'exactly the 3 tokens sent before the fault');
        assert.equal((await mock.attempts(`ac${tag}@${f}`)).length, 1, 'no attempt after commit');
        assert.equal((await mock.attempts(`ac${tag}-fb`)).length, 0);
      });
    }
  }
}

test('after commit the raw streams end with an error event and no terminator', { timeout: 30000 * SLOW }, async () => {
  await mock.reset();
  const o = await rawStream('/v1/chat/completions', { model: 'ac-a-overload=3', messages: USER, stream: true });
  assert.equal(o.status, 200);
  assert.equal(o.failed, null, 'the response itself ends properly (chunked terminator)');
  const events = o.text.split('\n\n').filter(Boolean);
  assert.match(events.at(-1), /^data: \{"error":/, `last event: ${events.at(-1)}`);
  assert.ok(!o.text.includes('[DONE]'));
  assert.ok(!o.text.includes('"finish_reason":"stop"'));
  const a = await rawStream('/v1/messages', { model: 'ac-o-cut=3', max_tokens: 50, messages: USER, stream: true });
  assert.equal(a.status, 200);
  assert.match(a.text, /event: error\ndata: \{[^\n]*"type":"error"/);
  assert.ok(!a.text.includes('message_stop'));
  assert.ok(!a.text.includes('"stop_reason":"end_turn"'));
});

test('non-streaming callers: cut/overload/stall mid-answer are still before commit → fallback', { timeout: 30000 * SLOW }, async () => {
  for (const [f, P, reason] of [['cut=3', 2, 'network'], ['overload=3', 2, 'overloaded'], ['stall=3', 1, 'timeout.chunk']]) {
    for (const [tag, sdk] of [['o', 'anthropic'], ['a', 'openai']]) {
      await mock.reset();
      const r = await call(sdk, `ac-${tag}-${f}`, false);
      assert.equal(r.text, canonical(`ac${tag}-fb`), `${f} ${tag}`);
      assert.equal(hdr(r.headers, 'x-airetry-attempts'), String(P + 1), `${f} ${tag}`);
      const line = await logLine(hdr(r.headers, 'x-request-id'));
      assert.deepEqual(line.attempts.map((a) => a.reason), [...Array(P).fill(reason), 'ok'], `${f} ${tag}`);
    }
  }
});

test('length / content_filter finishes: a streamed answer keeps its finish; a whole one is returned as judged', async () => {
  await mock.reset();
  const full = canonical('aco@length').split(' ');
  // Streaming: committed at the first token; the finish reaches the caller.
  const s = await call('openai', 'ac-o-length', true);
  assert.equal(s.finish, 'length');
  assert.ok(full.join(' ').startsWith(s.text) && s.text.length < full.join(' ').length && s.text.length > 0, s.text);
  const as = await call('anthropic', 'ac-a-length', true);
  assert.equal(as.finish, 'max_tokens');
  // Non-streaming: judged `length`, rule `fail`, the answer is returned unchanged (docs/design.md §3.3).
  const w = await call('openai', 'ac-o-length', false);
  assert.equal(w.finish, 'length');
  assert.equal(w.text, s.text);
  const wa = await call('anthropic', 'ac-a-length', false);
  assert.equal(wa.finish, 'max_tokens');
  const fi = await call('openai', 'ac-o-filter', false);
  assert.equal(fi.finish, 'content_filter');
  const fs = await call('openai', 'ac-o-filter', true);
  assert.equal(fs.finish, 'content_filter');
  assert.equal((await mock.attempts('aco-fb')).length, 0, 'no fallback for a judged length / filter');
});

/* ---- the SDKs' own retries ---------------------------------------------------------------- */

test('x-should-retry: false stops the SDKs\' default retries (attempts counted upstream)', { timeout: 30000 * SLOW }, async () => {
  await mock.reset();
  const oa = new OpenAI({ baseURL: gw.url + '/v1', apiKey: 'test' }); // default maxRetries (2)
  const an = new Anthropic({ baseURL: gw.url, apiKey: 'test' });
  assert.equal(oa.maxRetries, 2);
  assert.equal(an.maxRetries, 2);
  const e1 = await thrown(() => oa.chat.completions.create({ model: 'mo/sr1@503', messages: USER }));
  assert.equal(e1.status, 503);
  const e2 = await thrown(() => an.messages.create({ model: 'ma/sr2@429@ram=5', max_tokens: 10, messages: USER }));
  assert.equal(e2.status, 429);
  const e3 = await thrown(() => oa.chat.completions.create({ model: 'ma/sr3@hang', messages: USER, stream: true }));
  assert.equal(e3.status, 504);
  await sleep(300); // an SDK retry would have arrived by now
  assert.equal((await mock.attempts('sr1@503')).length, 2, 'the gateway\'s 2 attempts, not 2 × 3');
  assert.equal((await mock.attempts('sr2@429@ram=5')).length, 3, 'the gateway\'s 3 attempts, not 3 × 3');
  assert.equal((await mock.attempts('sr3@hang')).length, 1);
});

test('a reset on a reused upstream connection is one upstream request per attempt', { timeout: 30000 * SLOW }, async () => {
  // One worker, so that the warm-up request leaves an idle upstream
  // connection in the very transport that handles the next requests.
  const g1 = await startGateway(gatewayConfig(mock.port, { defaults: { breaker: { enabled: false } } }), { workers: 1 });
  try {
    await mock.reset();
    const oa = g1.openai();
    await oa.chat.completions.create({ model: 'mo/warm', messages: USER });
    const { data, response } = await oa.chat.completions
      .create({ model: 'mo/rs1@reset@k=1', messages: USER })
      .withResponse();
    assert.equal(data.choices[0].message.content, canonical('rs1@reset@k=1'));
    const log1 = await mock.attempts('rs1@reset@k=1');
    assert.equal(log1.length, 2);
    // Attempt 1 was reset: the gateway must have counted and logged it.
    assert.equal(response.headers.get('x-airetry-attempts'), '2', `mock saw ${JSON.stringify(log1)}`);
    await oa.chat.completions.create({ model: 'mo/warm', messages: USER });
    const e = await thrown(() => oa.chat.completions.create({ model: 'mo/rs2@reset', messages: USER }));
    assert.equal(e.status, 502);
    assert.equal(errAttempts(e).length, 2);
    assert.equal((await mock.attempts('rs2@reset')).length, 2, 'two attempts, two upstream requests');
  } finally {
    await g1.stop();
  }
});

test('the gateway and the mock exit 0 on SIGTERM', async () => {
  await assertCleanExit(assert, gw, mock);
});
