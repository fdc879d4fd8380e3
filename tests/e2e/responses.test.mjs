// The OpenAI Responses API (the openai_responses dialect) through the gateway to the mock: the
// official `openai` SDK's client.responses.create (whole and streamed, a
// function tool, text.format with a JSON schema) and the AI SDK's default
// OpenAI model createOpenAI({baseURL})(route) (generateText, streamText,
// generateObject), in front of chat (mo), Anthropic (ma, and man with
// structured_output: native) and Responses (mr)
// upstreams, each healthy and with the primary down (503 on every attempt)
// falling over to the healthy target. A failure after commit (the stream
// cut after three content events) raises in both SDKs. SDK retries are off.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';

import { generateText, streamText, generateObject } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';

import {
  OpenAI, Anthropic, startMock, startGateway, gatewayConfig, canonical, assertCleanExit, stopAll, thrown,
  SWITCH_DEFAULTS,
  errAttempts, postJSON, request,
} from './lib.mjs';

let mock;
let gw;

const UPSTREAMS = ['mo', 'ma', 'mr'];
const ROUTES = [];
for (const p of UPSTREAMS) {
  for (const [name, model] of [['text', 'text'], ['tools', 'tooly@tools=1'], ['js', 'js@json']]) {
    ROUTES.push({ name: `${p}-${name}-ok`, targets: [`${p}/${model}`] });
    ROUTES.push({ name: `${p}-${name}-down`, targets: [`${p}/down@503`, `${p}/${model}`] });
  }
  ROUTES.push({ name: `${p}-cut`, targets: [`${p}/c@cut=3`] });
}
ROUTES.push({ name: 'chat-only', targets: ['mo/text', 'ma/text'] });
// Stateful requests: only the provider of the route's first Responses
// target (mr2 is another Responses provider on the same mock).
ROUTES.push({ name: 'state-down', targets: ['mr/down@503', 'mr2/text', 'mo/text', 'mr/text'] });
ROUTES.push({ name: 'state-other', targets: ['mr2/down@503', 'mr/text'] });
// Anthropic with structured_output: native (the JSON tool is the default).
ROUTES.push({ name: 'man-js-ok', targets: [{ target: 'ma/js@json', structured_output: 'native' }] });
ROUTES.push({
  name: 'man-js-down',
  targets: ['ma/down@503', { target: 'ma/js@json', structured_output: 'native' }],
});
// Chat and Anthropic callers in front of a Responses upstream that reasons.
ROUTES.push({ name: 'mr-think-ok', targets: ['mr/think@reason=3'] });
ROUTES.push({ name: 'mr-think-down', targets: ['mr/down@503', 'mr/think@reason=3'] });

const SCHEMA = {
  type: 'object',
  properties: { city: { type: 'string' }, temp: { type: 'number' } },
  required: ['city', 'temp'],
  additionalProperties: false,
};

before(async () => {
  mock = await startMock();
  const cfg = gatewayConfig(mock.port, {
    routes: ROUTES,
    defaults: SWITCH_DEFAULTS,
  });
  cfg.providers.push({ name: 'mr', api: 'openai_responses', base_url: `http://127.0.0.1:${mock.port}/v1` });
  cfg.providers.push({ name: 'mr2', api: 'openai_responses', base_url: `http://127.0.0.1:${mock.port}/v1` });
  gw = await startGateway(cfg);
});

after(async () => {
  await assertCleanExit(assert, gw, mock);
  await stopAll(gw, mock);
});

beforeEach(async () => {
  await mock.reset();
});

const sdk = () => new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'test', maxRetries: 0 });
const aisdk = () => createOpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'test' });
const STORE = { openai: { store: false } };

// The mock's attempts per model name since the last reset.
async function seen() {
  const out = {};
  for (const a of await mock.log()) out[a.model] = (out[a.model] || 0) + 1;
  return out;
}
const want = (down, model) => (down ? { 'down@503': 1, [model]: 1 } : { [model]: 1 });

for (const p of UPSTREAMS) {
  for (const down of [false, true]) {
    const state = down ? 'down' : 'ok';
    const route = (m) => `${p}-${m}-${state}`;

    test(`openai SDK responses.create, whole (${p}, ${state})`, async () => {
      const { data: r, response } = await sdk()
        .responses.create({ model: route('text'), input: 'hi', store: false })
        .withResponse();
      assert.equal(r.object, 'response');
      assert.equal(r.status, 'completed');
      assert.equal(r.output_text, canonical('text'));
      assert.match(r.id, /^resp_/);
      assert.equal(r.model, 'text');
      assert.ok(r.usage.output_tokens > 0);
      assert.equal(response.headers.get('x-airetry-target'), `${p}/text`);
      assert.equal(response.headers.get('x-airetry-attempts'), down ? '2' : '1');
      assert.deepEqual(await seen(), want(down, 'text'));
    });

    test(`openai SDK responses.create, streamed (${p}, ${state})`, async () => {
      const stream = await sdk().responses.create({
        model: route('text'), input: [{ role: 'user', content: 'hi' }], stream: true,
      });
      let text = '';
      let last = -1;
      const types = [];
      let completed = null;
      for await (const e of stream) {
        assert.ok(e.sequence_number > last, 'sequence numbers increase');
        last = e.sequence_number;
        types.push(e.type);
        if (e.type === 'response.output_text.delta') text += e.delta;
        if (e.type === 'response.completed') completed = e.response;
      }
      assert.equal(text, canonical('text'));
      assert.deepEqual(types.slice(0, 4), [
        'response.created', 'response.in_progress', 'response.output_item.added',
        'response.content_part.added',
      ]);
      assert.equal(types.at(-1), 'response.completed');
      assert.equal(completed.output[0].content[0].text, canonical('text'));
      assert.ok(completed.usage.output_tokens > 0);
      assert.deepEqual(await seen(), want(down, 'text'));
    });

    test(`openai SDK responses.create with a function tool, streamed (${p}, ${state})`, async () => {
      const stream = sdk().responses.stream({
        model: route('tools'),
        input: 'weather?',
        tools: [{
          type: 'function', name: 'get_weather', strict: false,
          parameters: { type: 'object', properties: { location: { type: 'string' }, days: { type: 'number' } } },
        }],
      });
      let args = '';
      for await (const e of stream) if (e.type === 'response.function_call_arguments.delta') args += e.delta;
      const r = await stream.finalResponse();
      const call = r.output.find((o) => o.type === 'function_call');
      assert.equal(call.name, 'get_weather');
      assert.match(call.call_id, /mock_0$/);
      assert.deepEqual(JSON.parse(call.arguments), { location: 'city-0', days: 1 });
      assert.equal(args, call.arguments);
      assert.deepEqual(await seen(), want(down, 'tooly@tools=1'));
    });

    test(`AI SDK createOpenAI(route): generateText and streamText (${p}, ${state})`, async () => {
      const g = await generateText({
        model: aisdk()(route('text')), prompt: 'hi', maxRetries: 0, providerOptions: STORE,
      });
      assert.equal(g.text, canonical('text'));
      assert.equal(g.finishReason, 'stop');
      assert.ok(g.usage.outputTokens > 0);
      await mock.reset();
      const s = streamText({
        model: aisdk()(route('text')), prompt: 'hi', maxRetries: 0, providerOptions: STORE,
      });
      let text = '';
      let parts = 0;
      for await (const t of s.textStream) {
        text += t;
        parts++;
      }
      assert.equal(text, canonical('text'));
      assert.ok(parts > 1, 'streamed in pieces');
      assert.equal(await s.finishReason, 'stop');
      assert.deepEqual(await seen(), want(down, 'text'));
    });
  }

  test(`a failure after commit raises in both SDKs (${p})`, async () => {
    const stream = await sdk().responses.create({ model: `${p}-cut`, input: 'hi', stream: true });
    let text = '';
    const types = [];
    const e = await thrown(async () => {
      for await (const ev of stream) {
        types.push(ev.type);
        if (ev.type === 'response.output_text.delta') text += ev.delta;
      }
    });
    assert.ok(!e.didNotThrow, 'the openai SDK raises');
    assert.match(String(e.message), /network/);
    assert.ok(types.includes('response.failed'));
    assert.ok(!types.includes('response.completed'));
    assert.ok(text.length > 0 && canonical('c@cut=3').startsWith(text));

    const s = streamText({
      model: aisdk()(`${p}-cut`), prompt: 'hi', maxRetries: 0, providerOptions: STORE, onError: () => {},
    });
    let errored = null;
    for await (const part of s.fullStream) if (part.type === 'error') errored = part.error;
    assert.ok(errored, 'the AI SDK reports the error');
    assert.notEqual(await s.finishReason, 'stop');
  });
}

// text.format with a schema means what chat's response_format means: in
// front of chat, Anthropic (the JSON tool, and native) and Responses
// upstreams, healthy and with the primary down.
for (const p of ['mo', 'ma', 'man', 'mr']) {
  for (const down of [false, true]) {
    const state = down ? 'down' : 'ok';
    test(`text.format json_schema (openai SDK) and generateObject (AI SDK) (${p}, ${state})`, async () => {
      const r = await sdk().responses.create({
        model: `${p}-js-${state}`,
        input: 'weather as JSON',
        text: { format: { type: 'json_schema', name: 'weather', schema: SCHEMA, strict: true } },
      });
      assert.equal(r.status, 'completed');
      const v = JSON.parse(r.output_text);
      assert.equal(typeof v.city, 'string');
      assert.equal(typeof v.temp, 'number');
      assert.deepEqual(await seen(), want(down, 'js@json'));
      await mock.reset();
      const o = await generateObject({
        model: aisdk()(`${p}-js-${state}`),
        schema: z.object({ city: z.string(), temp: z.number() }),
        prompt: 'weather',
        maxRetries: 0,
        providerOptions: STORE,
      });
      assert.equal(typeof o.object.city, 'string');
      assert.equal(typeof o.object.temp, 'number');
      assert.deepEqual(await seen(), want(down, 'js@json'));
    });
  }
}

// The reverse: chat's response_format and an Anthropic caller's thinking in
// front of a Responses upstream (text.format; reasoning.effort with the
// summary streamed back as thinking).
for (const down of [false, true]) {
  const state = down ? 'down' : 'ok';
  test(`chat response_format and Anthropic thinking on a Responses upstream (${state})`, async () => {
    const c = await sdk().chat.completions.create({
      model: `mr-js-${state}`,
      messages: [{ role: 'user', content: 'weather as JSON' }],
      response_format: { type: 'json_schema', json_schema: { name: 'weather', schema: SCHEMA, strict: true } },
    });
    const v = JSON.parse(c.choices[0].message.content);
    assert.equal(typeof v.city, 'string');
    assert.equal(typeof v.temp, 'number');
    assert.deepEqual(await seen(), want(down, 'js@json'));
    await mock.reset();
    const a = new Anthropic({ baseURL: gw.url, apiKey: 'test', maxRetries: 0 });
    const stream = a.messages.stream({
      model: `mr-think-${state}`,
      max_tokens: 8000,
      thinking: { type: 'enabled', budget_tokens: 2048 },
      messages: [{ role: 'user', content: 'hi' }],
    });
    let thinking = '';
    stream.on('thinking', (d) => { thinking += d; });
    const m = await stream.finalMessage();
    assert.ok(thinking.length > 0, 'the reasoning summary streams as thinking');
    assert.equal(m.content[0].type, 'thinking');
    assert.equal(m.content.at(-1).type, 'text');
    assert.equal(m.stop_reason, 'end_turn');
    assert.deepEqual(await seen(), want(down, 'think@reason=3'));
  });
}

test('stateful requests and unknown formats skip targets of other dialects (400 naming the field)', async () => {
  for (const [body, field] of [
    [{ previous_response_id: 'resp_x' }, 'previous_response_id'],
    [{ text: { format: { type: 'grammar', grammar: 'x' } } }, 'text.format'],
  ]) {
    const e = await thrown(() => sdk().responses.create({ model: 'chat-only', input: 'hi', ...body }));
    assert.equal(e.status, 400);
    const att = errAttempts(e);
    assert.deepEqual(att.map((a) => [a.target, a.outcome, a.field]), [
      ['mo/text', 'skipped', field], ['ma/text', 'skipped', field],
    ]);
  }
  assert.deepEqual(await seen(), {});
});

test('stateful requests go only to the provider of the route\'s first Responses target, primary down', async () => {
  for (const body of [
    { previous_response_id: 'resp_x' },
    { input: [{ role: 'user', content: 'hi' }, { type: 'item_reference', id: 'msg_x' }] },
    { conversation: 'conv_x' },
  ]) {
    await mock.reset();
    const field = Object.keys(body)[0] === 'input' ? 'input[1].item_reference' : Object.keys(body)[0];
    const { data: r, response } = await sdk()
      .responses.create({ model: 'state-down', input: 'hi', ...body })
      .withResponse();
    assert.equal(r.output_text, canonical('text'));
    assert.equal(response.headers.get('x-airetry-target'), 'mr/text');
    assert.equal(response.headers.get('x-airetry-attempts'), '2');
    assert.deepEqual(await seen(), { 'down@503': 1, text: 1 }, field);
    await mock.reset();
    const e = await thrown(() => sdk().responses.create({ model: 'state-other', input: 'hi', ...body }));
    assert.equal(e.status, 503);
    assert.deepEqual(errAttempts(e).map((a) => [a.target, a.outcome || a.reason, a.field]), [
      ['mr2/down@503', 'overloaded', undefined], ['mr/text', 'skipped', field],
    ]);
  }
  // Without state any Responses provider answers.
  await mock.reset();
  const r = await sdk().responses.create({ model: 'state-other', input: 'hi', store: false });
  assert.equal(r.output_text, canonical('text'));
});

test('Codex-shaped request (developer input, namespace and web_search tools, reasoning, include) in front of chat and Anthropic', async () => {
  for (const route of ['mo-text-ok', 'ma-text-ok']) {
    const r = await postJSON(`${gw.url}/v1/responses`, {
      model: route,
      instructions: 'You are Codex.',
      input: [
        { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'dev' }] },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] },
      ],
      tools: [
        { type: 'function', name: 'shell', parameters: { type: 'object', properties: {} } },
        { type: 'web_search' },
        { type: 'namespace', name: 'ns', tools: [{ type: 'function', name: 'cat', parameters: { type: 'object' } }] },
      ],
      tool_choice: 'auto',
      parallel_tool_calls: false,
      reasoning: { effort: 'low', summary: 'auto' },
      store: false,
      include: ['reasoning.encrypted_content'],
      prompt_cache_key: 'k',
    });
    assert.equal(r.status, 200, r.body);
    assert.equal(JSON.parse(r.body).output[0].content[0].text, canonical('text'));
    assert.equal(r.headers['x-airetry-dropped'], 'web_search');
  }
});

test('GET /v1/responses/{id} is forwarded to the first openai_responses provider (mr)', async () => {
  const { data: r, response } = await sdk().responses.retrieve('resp_abc').withResponse();
  assert.equal(r.id, 'resp_abc');
  assert.equal(r.output_text, '[retrieved resp_abc]');
  assert.equal(response.headers.get('x-airetry-target'), 'mr/retrieve');
  // The query string goes along; the mock answers it back as metadata.q.
  const q = await request(`${gw.url}/v1/responses/resp_q?include[]=x`);
  assert.equal(q.status, 200, q.body);
  assert.equal(JSON.parse(q.body).metadata.q, 'include[]=x');
  // The upstream's 404 is the caller's, in the Responses shape.
  const e = await thrown(() => sdk().responses.retrieve('msg_unknown'));
  assert.equal(e.status, 404);
  assert.equal(errAttempts(e)[0].target, 'mr/retrieve');
  // What the gateway does not forward: the gateway's own 400 / 405.
  for (const [method, path, status, msg] of [
    ['GET', '/v1/responses/resp_x?stream=true', 400, /^stream: /],
    ['GET', '/v1/responses/resp_x%2F..', 400, /^id: /],
    ['POST', '/v1/responses/resp_x', 405, /GET/],
  ]) {
    const res = await request(`${gw.url}${path}`, { method, body: method === 'POST' ? '{}' : undefined });
    assert.equal(res.status, status, `${method} ${path}: ${res.body}`);
    assert.match(JSON.parse(res.body).error.message, msg);
  }
});
