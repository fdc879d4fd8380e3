// Continuing a stream after its first token (docs/design.md §3.5)
// through the official SDKs (`openai` chat.completions and responses,
// `@anthropic-ai/sdk` messages) and the AI SDK (`ai` with @ai-sdk/openai
// chat and responses models and @ai-sdk/anthropic): a stream cut, stalled or
// overloaded after a few tokens on the primary reaches the SDK as ONE answer,
// exactly the mock's uncut deterministic answer (docs/mock.md
// "Continuation"), for a prefill fallback and an instruct fallback and for
// every caller dialect; its last event carries `airetry.continued`. The
// mock's log shows which style each continuation was asked with. A
// diverging restart, a preamble, a route without continuation and a
// released tool call end with the SDK raising. SDK retries are off.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';

import { streamText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';

import {
  OpenAI, Anthropic, startMock, startGateway, gatewayConfig, canonical, assertCleanExit, stopAll, ASAN, SLOW,
} from './lib.mjs';

let mock;
let gw;

const ON = { enabled: true };
const instruct = (t) => ({ target: t, continuation_style: 'instruct' });

// Route name -> [targets, continuation (null: off), extra route keys]. A
// primary and its fallback share the model name (continuation.targets:
// same_model), so `@k=1` makes the fault the primary's only and both answer
// the same text. mo: chat, ma: Anthropic, mr: Responses upstreams.
const ROUTES = {
  // The two fallbacks every caller dialect is checked with.
  pf: [['mo/pf@cut=3@k=1', 'ma/pf@cut=3@k=1'], ON], // prefill (Anthropic)
  in: [['ma/in@cut=3@k=1', instruct('mo/in@cut=3@k=1')], ON], // instruct (chat)
  // The other styles, faults and upstreams.
  vl: [['ma/vl@overload=3@k=1', { target: 'mo/vl@overload=3@k=1', continuation_style: 'vllm' }], ON],
  px: [['mr/px@cut=3@k=1', { target: 'mo/px@cut=3@k=1', continuation_style: 'prefix_flag' }], ON],
  ri: [['mo/ri@cut=3@k=1', instruct('mr/ri@cut=3@k=1')], ON], // instruct to Responses
  st: [['mo/st@stall=3@k=1', 'ma/st@stall=3@k=1'], { enabled: true, max_gap_ms: 10000 * SLOW },
    { timeouts: { chunk_ms: (ASAN ? 1500 : 400) * SLOW } }],
  rs: [['mo/rs@cut=3@k=1@restart', 'ma/rs@cut=3@k=1@restart'], ON], // a restart, trimmed
  rp: [['mo/rp@cut=12@k=1@repeat@tokens=16', 'ma/rp@cut=12@k=1@repeat@tokens=16'], ON], // 40-char overlap
  np: [['mo/np@cut=3@k=1@noprefill', 'ma/np@cut=3@k=1@noprefill'], { enabled: true, instruct: true }],
  // Error cases.
  dv: [['mo/dv@cut=4@k=1@diverge', 'ma/dv@cut=4@k=1@diverge'], ON],
  pa: [['ma/pa@cut=3@k=1@preamble', instruct('mo/pa@cut=3@k=1@preamble')], ON],
  off: [['mo/off@cut=3@k=1', 'ma/off@cut=3@k=1'], null],
  // The text, then a tool call cut in its arguments.
  tl: [['mo/tl@tools=1@tooltext@cut=11@k=1', 'ma/tl@tools=1@tooltext@cut=11@k=1'], ON],
};
// The mock's uncut answer of a model name (its @tokens=N, else 8 tokens).
const answerOf = (model) => canonical(model, Number(/@tokens=(\d+)/.exec(model)?.[1] ?? 8));
const modelOf = (route) => {
  const t = ROUTES[route][0][0];
  return (typeof t === 'string' ? t : t.target).split('/')[1];
};
const targetOf = (route, i) => {
  const t = ROUTES[route][0][i];
  return typeof t === 'string' ? t : t.target;
};

before(async () => {
  mock = await startMock();
  const routes = Object.entries(ROUTES).map(([name, [targets, cont, extra]]) => ({
    name,
    targets,
    ...(cont ? { continuation: cont } : {}),
    ...(extra || {}),
  }));
  const cfg = gatewayConfig(mock.port, {
    routes,
    defaults: {
      breaker: { enabled: false },
      rules: [{ on: ['network', 'overloaded', 'server_error', 'malformed', 'timeout.chunk'], action: 'switch' }],
    },
  });
  cfg.providers.push({ name: 'mr', api: 'openai_responses', base_url: `http://127.0.0.1:${mock.port}/v1` });
  gw = await startGateway(cfg);
});

after(async () => {
  await assertCleanExit(assert, gw, mock);
  await stopAll(gw, mock);
});

beforeEach(async () => {
  await mock.reset();
});

const USER = [{ role: 'user', content: 'hi' }];
const openai = () => new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'test', maxRetries: 0 });
const anthropic = () => new Anthropic({ baseURL: gw.url, apiKey: 'test', maxRetries: 0 });

// The `airetry` object of an event: at its top level, or (Responses) in its
// response object.
function airetryOf(ev) {
  return ev?.airetry ?? ev?.response?.airetry ?? null;
}

// One streamed answer through an official SDK in the caller dialect:
// {text, last (the last event), error (what the iteration threw, or null)}.
async function officialStream(dialect, route) {
  const out = { text: '', last: null, error: null, events: [] };
  try {
    if (dialect === 'chat') {
      const s = await openai().chat.completions.create({
        model: route, messages: USER, stream: true, stream_options: { include_usage: true },
      });
      for await (const c of s) {
        out.events.push(c);
        out.text += c.choices?.[0]?.delta?.content ?? '';
      }
    } else if (dialect === 'messages') {
      const s = await anthropic().messages.create({ model: route, max_tokens: 200, messages: USER, stream: true });
      for await (const e of s) {
        out.events.push(e);
        if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') out.text += e.delta.text;
      }
    } else {
      const s = await openai().responses.create({ model: route, input: 'hi', stream: true, store: false });
      for await (const e of s) {
        out.events.push(e);
        if (e.type === 'response.output_text.delta') out.text += e.delta;
      }
    }
  } catch (e) {
    out.error = e;
  }
  return out;
}

// The event that carries the end: the chat chunk with finish_reason (or the
// usage chunk after it), message_delta, response.completed.
function endEvents(dialect, events) {
  if (dialect === 'chat') return events.filter((c) => c.choices?.[0]?.finish_reason || c.usage);
  if (dialect === 'messages') return events.filter((e) => e.type === 'message_delta');
  return events.filter((e) => e.type === 'response.completed');
}

// The AI SDK model of a caller dialect for a route.
function aiModel(dialect, route) {
  if (dialect === 'chat') return createOpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'test' }).chat(route);
  if (dialect === 'messages') return createAnthropic({ baseURL: `${gw.url}/v1`, apiKey: 'test' })(route);
  return createOpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'test' }).responses(route);
}

async function aiStream(dialect, route) {
  const s = streamText({
    model: aiModel(dialect, route),
    prompt: 'hi',
    maxRetries: 0,
    includeRawChunks: true,
    providerOptions: { openai: { store: false } },
    onError: () => {},
  });
  const out = { text: '', raw: [], error: null, finish: null };
  for await (const part of s.fullStream) {
    if (part.type === 'text-delta') out.text += part.text ?? part.delta ?? '';
    else if (part.type === 'raw') out.raw.push(part.rawValue);
    else if (part.type === 'error') out.error = part.error;
  }
  out.finish = await s.finishReason.catch(() => null);
  return out;
}

// The mock attempts of a route's model, in order.
async function attempts(route) {
  return mock.attempts(modelOf(route));
}

// The released text of a model cut after n content events.
const released = (model, n) => answerOf(model).split(' ').slice(0, n).join(' ');

// The log shows the primary attempt (no continuation) then one
// continuation asked with style, continued exactly at the released text.
async function assertContinued(route, n, style) {
  const model = modelOf(route);
  const log = await attempts(route);
  assert.equal(log.length, 2, `two attempts: ${JSON.stringify(log)}`);
  assert.equal(log[0].continuation, null);
  assert.equal(log[1].continuation, style, JSON.stringify(log[1]));
  assert.equal(log[1].continued_at, released(model, n).length, JSON.stringify(log[1]));
  assert.equal(log[1].status, 200);
  if (style === 'instruct') {
    // A fixed message: it never holds the released text itself.
    assert.ok(log[1].instruct_message, JSON.stringify(log[1]));
    assert.ok(!log[1].instruct_message.includes(released(model, n)), log[1].instruct_message);
  }
  return log;
}

function assertMarker(route, n, air) {
  assert.ok(air, 'the last event carries an airetry object');
  assert.ok(Array.isArray(air.continued) && air.continued.length === 1, JSON.stringify(air));
  assert.equal(air.continued[0].target, targetOf(route, 1));
  assert.equal(air.continued[0].at_char, released(modelOf(route), n).length);
}

/* ---- one seamless answer, per caller dialect and fallback style ----------- */

const DIALECTS = ['chat', 'messages', 'responses'];
const FALLBACKS = [['pf', 'prefill'], ['in', 'instruct']];

for (const dialect of DIALECTS) {
  for (const [route, style] of FALLBACKS) {
    test(`official SDK (${dialect}): cut after 3 tokens, ${style} fallback: one seamless answer`, async () => {
      const r = await officialStream(dialect, route);
      assert.equal(r.error, null, `the stream ends cleanly: ${r.error?.message}`);
      assert.equal(r.text, answerOf(modelOf(route)));
      const ends = endEvents(dialect, r.events);
      assert.ok(ends.length > 0, 'an end event');
      assertMarker(route, 3, ends.map(airetryOf).find(Boolean));
      const log = await assertContinued(route, 3, style);
      // The caller's limit goes on, less what was released.
      if (dialect === 'messages') assert.ok(log[1].max_tokens > 0 && log[1].max_tokens <= 200, JSON.stringify(log[1]));
      if (dialect === 'responses') {
        // The caller's framing goes on across the seam.
        const seq = r.events.map((e) => e.sequence_number);
        for (let i = 1; i < seq.length; i++) assert.ok(seq[i] > seq[i - 1], `sequence numbers increase: ${seq}`);
        const ids = new Set(r.events.filter((e) => e.response?.id).map((e) => e.response.id));
        assert.equal(ids.size, 1, `one response id: ${[...ids]}`);
      } else if (dialect === 'messages') {
        const starts = r.events.filter((e) => e.type === 'message_start');
        assert.equal(starts.length, 1, 'one message_start');
        const idx = new Set(r.events.filter((e) => e.type === 'content_block_delta').map((e) => e.index));
        assert.equal(idx.size, 1, 'the text stays in one block');
      } else {
        const ids = new Set(r.events.map((c) => c.id));
        assert.equal(ids.size, 1, `one chunk id: ${[...ids]}`);
      }
    });

    test(`AI SDK (${dialect}): cut after 3 tokens, ${style} fallback: one seamless answer`, async () => {
      const r = await aiStream(dialect, route);
      assert.equal(r.error, null, `no error part: ${r.error?.message ?? r.error}`);
      assert.equal(r.text, answerOf(modelOf(route)));
      assert.equal(r.finish, 'stop');
      assertMarker(route, 3, r.raw.map(airetryOf).find(Boolean));
      await assertContinued(route, 3, style);
    });
  }
}

/* ---- the other styles, faults and upstreams (chat callers) ---------------- */

for (const [route, n, style, what] of [
  ['vl', 3, 'vllm', 'an overload error event, vllm fallback'],
  ['px', 3, 'prefix_flag', 'a cut Responses upstream, prefix_flag fallback'],
  ['ri', 3, 'instruct', 'instruct fallback on a Responses upstream'],
  ['st', 3, 'prefill', 'a stall (timeout.chunk), prefill fallback'],
  ['rs', 3, 'prefill', 'a continuation that restarts: the repeat is dropped'],
  ['rp', 12, 'prefill', 'a continuation that repeats the last 40 characters: dropped'],
]) {
  test(`official SDK (chat): ${what}`, async () => {
    const r = await officialStream('chat', route);
    assert.equal(r.error, null, `the stream ends cleanly: ${r.error?.message}`);
    assert.equal(r.text, answerOf(modelOf(route)));
    assertMarker(route, n, endEvents('chat', r.events).map(airetryOf).find(Boolean));
    await assertContinued(route, n, style);
  });
}

test('a rejected prefill is asked again with instruct, and the 400 never reaches the caller', async () => {
  for (const dialect of DIALECTS) {
    await mock.reset();
    const r = await officialStream(dialect, 'np');
    assert.equal(r.error, null, `${dialect}: the stream ends cleanly: ${r.error?.message}`);
    assert.equal(r.text, answerOf(modelOf('np')));
    const log = await attempts('np');
    // The primary; the prefill rejected with Anthropic's 400 — asked once
    // in this request at most, since instruct is then remembered; instruct.
    const styles = log.map((a) => [a.continuation, a.status]);
    if (dialect === 'chat') assert.deepEqual(styles, [[null, 200], ['prefill', 400], ['instruct', 200]]);
    else assert.deepEqual(styles, [[null, 200], ['instruct', 200]], 'the learned style is used at once');
    assert.equal(log.at(-1).continued_at, released(modelOf('np'), 3).length);
    assert.ok(!/does not support assistant message prefill/.test(JSON.stringify(r.events)),
      'the 400 never reaches the caller');
  }
});

/* ---- the error cases: the SDK raises --------------------------------------- */

for (const dialect of DIALECTS) {
  for (const [route, what, cont] of [
    ['dv', 'a diverging restart', true],
    ['pa', 'an instruct continuation with a preamble', true],
    ['off', 'a route without continuation', false],
    ['tl', 'a released tool call', false],
  ]) {
    test(`official SDK (${dialect}): ${what} ends with the SDK raising`, async () => {
      const r = await officialStream(dialect, route);
      assert.ok(r.error, `the SDK raises (text ${JSON.stringify(r.text)})`);
      const Cls = dialect === 'messages' ? Anthropic.APIError : OpenAI.APIError;
      assert.ok(r.error instanceof Cls || /error/i.test(String(r.error?.message)), `${r.error?.constructor?.name}: ${r.error?.message}`);
      const full = answerOf(modelOf(route));
      assert.ok(full.startsWith(r.text), `only the released text: ${JSON.stringify(r.text)}`);
      assert.ok(!/diverged|Sure, continuing/.test(r.text), 'never stitched in');
      assert.ok(!r.events.some((e) => airetryOf(e)?.continued?.length), 'no continued marker');
      const log = await attempts(route);
      if (cont) {
        assert.ok(log.length >= 2, 'a continuation was tried');
        assert.ok(log.slice(1).every((a) => a.continuation !== null && a.continued_at !== null), JSON.stringify(log));
      } else {
        assert.equal(log.length, 1, `nothing after commit: ${JSON.stringify(log)}`);
      }
    });
  }
}

for (const dialect of DIALECTS) {
  test(`AI SDK (${dialect}): a diverging restart and a route without continuation report the error`, async () => {
    for (const route of ['dv', 'off']) {
      await mock.reset();
      const r = await aiStream(dialect, route);
      assert.ok(r.error, `${route}: the AI SDK reports the error`);
      assert.notEqual(r.finish, 'stop');
      assert.ok(answerOf(modelOf(route)).startsWith(r.text), JSON.stringify(r.text));
    }
  });
}
