// Both SDKs, streaming and not, same-dialect and cross-dialect, through the
// gateway to the mock (text answers) and to a capturing fake upstream (tool
// calls, which the mock cannot answer). docs/design.md §5.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import {
  startMock, startGateway, gatewayConfig, canonical, collectOpenAI, collectAnthropic,
  startCapture, assertCleanExit, stopAll,
} from './lib.mjs';

let mock;
let gw;
let cap;
let oa;
let an;

const ROUTES = [
  { name: 'to-openai', targets: ['mo/gpt-up'] },
  { name: 'to-anthropic', targets: ['ma/claude-up'] },
  { name: 'cap-openai', targets: ['co/cap-gpt'] },
  { name: 'cap-anthropic', targets: ['ca/cap-claude'] },
];

/* ---- canned tool-call streams of the capturing upstream ----------------------- */

const sse = (obj) => `data: ${JSON.stringify(obj)}\n\n`;
const ev = (type, obj) => `event: ${type}\ndata: ${JSON.stringify({ type, ...obj })}\n\n`;

// OpenAI chat-completions stream: a tool call in three pieces, then usage.
function openaiToolStream(model) {
  const base = { id: 'chatcmpl-cap1', object: 'chat.completion.chunk', created: 1, model };
  const ch = (delta, finish = null) => sse({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] });
  return [
    ch({ role: 'assistant', content: null }),
    ch({ tool_calls: [{ index: 0, id: 'call_cap1', type: 'function', function: { name: 'get_weather', arguments: '' } }] }),
    ch({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
    ch({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }),
    ch({}, 'tool_calls'),
    sse({ ...base, choices: [], usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } }),
    'data: [DONE]\n\n',
  ];
}

// Anthropic messages stream: a text block, then a tool_use block.
function anthropicToolStream(model) {
  return [
    ev('message_start', {
      message: {
        id: 'msg_cap1', type: 'message', role: 'assistant', model, content: [],
        stop_reason: null, stop_sequence: null, usage: { input_tokens: 11, output_tokens: 1 },
      },
    }),
    ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Let me check.' } }),
    ev('content_block_stop', { index: 0 }),
    ev('content_block_start', {
      index: 1, content_block: { type: 'tool_use', id: 'toolu_cap1', name: 'get_weather', input: {} },
    }),
    ev('content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: '{"city":' } }),
    ev('content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: ' "Paris"}' } }),
    ev('content_block_stop', { index: 1 }),
    ev('message_delta', { delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 7 } }),
    ev('message_stop', {}),
  ];
}

before(async () => {
  mock = await startMock();
  cap = await startCapture((req) => ({
    chunks: req.url.endsWith('/chat/completions') ? openaiToolStream('cap-gpt') : anthropicToolStream('cap-claude'),
  }));
  const cfg = gatewayConfig(mock.port, { routes: ROUTES });
  cfg.providers.push(
    { name: 'co', api: 'openai', base_url: `http://127.0.0.1:${cap.port}/v1` },
    { name: 'ca', api: 'anthropic', base_url: `http://127.0.0.1:${cap.port}` },
  );
  gw = await startGateway(cfg);
  oa = gw.openai();
  an = gw.anthropic();
});

after(async () => {
  await stopAll(gw, mock);
  if (cap) await cap.stop();
});

const USER = [{ role: 'user', content: 'Say the canonical answer.' }];

// Headers every answer carries (docs/design.md §5).
function assertHeaders(h, target, attempts = '1') {
  assert.equal(h.get('x-airetry-attempts'), attempts);
  assert.equal(h.get('x-airetry-target'), target);
  assert.match(h.get('x-request-id') || '', /^[A-Za-z0-9_-]{1,39}$/);
}

// The mock saw exactly one attempt, in the upstream's dialect and streamed
// (the gateway always streams upstream, also for non-streaming callers).
async function assertOneUpstream(model, api) {
  const log = await mock.attempts(model);
  assert.equal(log.length, 1, JSON.stringify(log));
  assert.equal(log[0].api, api);
  assert.equal(log[0].stream, true, 'upstream calls are always streamed');
  assert.equal(log[0].status, 200);
}

/* ---- OpenAI SDK ----------------------------------------------------------------------- */

test('openai SDK, non-streaming, openai upstream: text, model, usage, headers', async () => {
  await mock.reset();
  const { data, response } = await oa.chat.completions
    .create({ model: 'to-openai', messages: USER })
    .withResponse();
  assert.equal(data.choices[0].message.content, canonical('gpt-up'));
  assert.equal(data.choices[0].message.role, 'assistant');
  assert.equal(data.choices[0].finish_reason, 'stop');
  assert.equal(data.model, 'gpt-up');
  assert.equal(data.usage.completion_tokens, 9);
  assert.ok(data.usage.prompt_tokens > 0);
  assert.equal(data.usage.total_tokens, data.usage.prompt_tokens + 9);
  assertHeaders(response.headers, 'mo/gpt-up');
  assert.equal(data._request_id, response.headers.get('x-request-id'));
  await assertOneUpstream('gpt-up', 'openai');
});

test('openai SDK, streaming with include_usage, openai upstream', async () => {
  await mock.reset();
  const { data: stream, response } = await oa.chat.completions
    .create({ model: 'to-openai', messages: USER, stream: true, stream_options: { include_usage: true } })
    .withResponse();
  assertHeaders(response.headers, 'mo/gpt-up');
  assert.match(response.headers.get('content-type'), /^text\/event-stream/);
  const r = await collectOpenAI(stream);
  assert.equal(r.text, canonical('gpt-up'));
  assert.equal(r.finish, 'stop');
  assert.equal(r.model, 'gpt-up');
  assert.ok(r.usage, 'a usage chunk when asked');
  assert.equal(r.usage.completion_tokens, 9);
  assert.ok(r.usage.prompt_tokens > 0);
  // Every chunk is one token: nothing was merged or sent twice.
  const pieces = r.chunks.flatMap((c) => c.choices.map((x) => x.delta?.content).filter(Boolean));
  assert.equal(pieces.length, 9);
  await assertOneUpstream('gpt-up', 'openai');
});

test('openai SDK, streaming without include_usage: no usage chunk reaches the caller', async () => {
  await mock.reset();
  const stream = await oa.chat.completions.create({ model: 'to-openai', messages: USER, stream: true });
  const r = await collectOpenAI(stream);
  assert.equal(r.text, canonical('gpt-up'));
  assert.equal(r.usage, null, 'the gateway asked upstream for usage; the caller did not');
  assert.ok(r.chunks.every((c) => c.choices.length > 0), 'no empty-choices usage chunk');
});

test('openai SDK, non-streaming, anthropic upstream (cross-dialect)', async () => {
  await mock.reset();
  const { data, response } = await oa.chat.completions
    .create({ model: 'to-anthropic', messages: [{ role: 'system', content: 'Be terse.' }, ...USER], max_tokens: 100 })
    .withResponse();
  assert.equal(data.choices[0].message.content, canonical('claude-up'));
  assert.equal(data.choices[0].finish_reason, 'stop');
  assert.equal(data.model, 'claude-up');
  assert.equal(data.object, 'chat.completion');
  assert.equal(data.usage.completion_tokens, 9);
  assert.ok(data.usage.prompt_tokens > 0);
  assertHeaders(response.headers, 'ma/claude-up');
  await assertOneUpstream('claude-up', 'anthropic');
});

test('openai SDK, streaming, anthropic upstream (cross-dialect), usage asked', async () => {
  await mock.reset();
  const { data: stream, response } = await oa.chat.completions
    .create({ model: 'to-anthropic', messages: USER, stream: true, stream_options: { include_usage: true } })
    .withResponse();
  assertHeaders(response.headers, 'ma/claude-up');
  const r = await collectOpenAI(stream);
  assert.equal(r.text, canonical('claude-up'));
  assert.equal(r.finish, 'stop');
  assert.equal(r.model, 'claude-up');
  assert.ok(r.usage && r.usage.completion_tokens === 9, JSON.stringify(r.usage));
  assert.ok(r.chunks.every((c) => c.object === 'chat.completion.chunk'));
  await assertOneUpstream('claude-up', 'anthropic');
});

test('openai SDK, streaming, anthropic upstream, no usage asked: none sent', async () => {
  await mock.reset();
  const r = await collectOpenAI(
    await oa.chat.completions.create({ model: 'to-anthropic', messages: USER, stream: true }),
  );
  assert.equal(r.text, canonical('claude-up'));
  assert.equal(r.usage, null);
});

/* ---- Anthropic SDK --------------------------------------------------------------------- */

test('anthropic SDK, non-streaming, anthropic upstream', async () => {
  await mock.reset();
  const { data, response } = await an.messages
    .create({ model: 'to-anthropic', max_tokens: 100, system: 'Be terse.', messages: USER })
    .withResponse();
  assert.equal(data.type, 'message');
  assert.equal(data.role, 'assistant');
  assert.equal(data.content.length, 1);
  assert.equal(data.content[0].type, 'text');
  assert.equal(data.content[0].text, canonical('claude-up'));
  assert.equal(data.stop_reason, 'end_turn');
  assert.equal(data.model, 'claude-up');
  assert.equal(data.usage.output_tokens, 9);
  assert.ok(data.usage.input_tokens > 0);
  assertHeaders(response.headers, 'ma/claude-up');
  await assertOneUpstream('claude-up', 'anthropic');
});

test('anthropic SDK, streaming (raw events), anthropic upstream', async () => {
  await mock.reset();
  const { data: stream, response } = await an.messages
    .create({ model: 'to-anthropic', max_tokens: 100, messages: USER, stream: true })
    .withResponse();
  assertHeaders(response.headers, 'ma/claude-up');
  const r = await collectAnthropic(stream);
  assert.equal(r.text, canonical('claude-up'));
  assert.equal(r.stop, 'end_turn');
  assert.equal(r.model, 'claude-up');
  assert.equal(r.usage.output_tokens, 9);
  assert.equal(r.events[0].type, 'message_start');
  assert.equal(r.events.at(-1).type, 'message_stop');
  await assertOneUpstream('claude-up', 'anthropic');
});

test('anthropic SDK, messages.stream() helper, openai upstream (cross-dialect)', async () => {
  await mock.reset();
  const stream = an.messages.stream({ model: 'to-openai', max_tokens: 100, messages: USER });
  let deltas = '';
  stream.on('text', (t) => (deltas += t));
  const msg = await stream.finalMessage();
  assert.equal(msg.content[0].text, canonical('gpt-up'));
  assert.equal(deltas, canonical('gpt-up'));
  assert.equal(msg.stop_reason, 'end_turn');
  assert.equal(msg.model, 'gpt-up');
  assert.equal(msg.usage.output_tokens, 9);
  await assertOneUpstream('gpt-up', 'openai');
});

test('anthropic SDK, non-streaming, openai upstream (cross-dialect)', async () => {
  await mock.reset();
  const { data, response } = await an.messages
    .create({ model: 'to-openai', max_tokens: 100, system: 'Be terse.', messages: USER })
    .withResponse();
  assert.equal(data.content[0].text, canonical('gpt-up'));
  assert.equal(data.stop_reason, 'end_turn');
  assert.equal(data.model, 'gpt-up');
  assert.equal(data.usage.output_tokens, 9);
  assert.ok(data.usage.input_tokens > 0);
  assertHeaders(response.headers, 'mo/gpt-up');
  await assertOneUpstream('gpt-up', 'openai');
});

test('a provider/model name goes straight to that target; the caller x-request-id is kept', async () => {
  await mock.reset();
  const { data, response } = await oa.chat.completions
    .create({ model: 'ma/direct-up', messages: USER }, { headers: { 'x-request-id': 'e2e-rid-42' } })
    .withResponse();
  assert.equal(data.choices[0].message.content, canonical('direct-up'));
  assert.equal(response.headers.get('x-request-id'), 'e2e-rid-42');
  assertHeaders(response.headers, 'ma/direct-up');
  const line = await gw.logFor('e2e-rid-42');
  assert.ok(line, 'one JSON log line per request');
  assert.equal(line.route, 'ma/direct-up');
  assert.equal(line.outcome, 'ok');
  assert.equal(line.status, 200);
  assert.equal(line.attempts.length, 1);
  assert.equal(line.attempts[0].target, 'ma/direct-up');
  assert.ok(!JSON.stringify(line).includes('Say the canonical answer'), 'no prompt text in the log');
});

/* ---- tool calls ------------------------------------------------------------------------- */

const TOOLS_OAI = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];
const HISTORY_OAI = [
  { role: 'system', content: 'You are a weather bot.' },
  { role: 'user', content: 'Weather in Paris?' },
  {
    role: 'assistant', content: null,
    tool_calls: [{ id: 'call_h1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
  },
  { role: 'tool', tool_call_id: 'call_h1', content: '18C and sunny' },
];
const TOOLS_ANT = [{
  name: 'get_weather',
  description: 'Weather of a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}];
const HISTORY_ANT = [
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_h1', name: 'get_weather', input: { city: 'Paris' } }] },
  { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_h1', content: '18C and sunny' }] },
];

test('tools and tool results in the history are accepted by the mock in both directions', async () => {
  await mock.reset();
  const a = await oa.chat.completions.create({ model: 'to-anthropic', messages: HISTORY_OAI, tools: TOOLS_OAI });
  assert.equal(a.choices[0].message.content, canonical('claude-up'));
  const b = await an.messages.create({ model: 'to-openai', max_tokens: 50, messages: HISTORY_ANT, tools: TOOLS_ANT });
  assert.equal(b.content[0].text, canonical('gpt-up'));
  const log = await mock.log();
  assert.deepEqual(log.map((x) => [x.model, x.api, x.status]), [['claude-up', 'anthropic', 200], ['gpt-up', 'openai', 200]]);
});

test('openai tools + tool history are translated to Anthropic blocks upstream', async () => {
  cap.seen.length = 0;
  await oa.chat.completions.create({ model: 'cap-anthropic', messages: HISTORY_OAI, tools: TOOLS_OAI, tool_choice: 'auto' });
  assert.equal(cap.seen.length, 1);
  const { url, body, headers } = cap.seen[0];
  assert.equal(url, '/v1/messages');
  assert.ok(headers['anthropic-version'], 'anthropic-version sent upstream');
  assert.equal(headers.authorization, undefined, 'the caller key is never forwarded');
  assert.equal(body.model, 'cap-claude');
  assert.equal(body.stream, true);
  assert.equal(body.max_tokens, 4096, 'default_max_tokens when the caller gave none');
  assert.ok(JSON.stringify(body.system).includes('You are a weather bot.'));
  assert.equal(body.tools.length, 1);
  assert.equal(body.tools[0].name, 'get_weather');
  assert.deepEqual(body.tools[0].input_schema, TOOLS_OAI[0].function.parameters);
  const asst = body.messages.find((m) => m.role === 'assistant');
  const use = asst.content.find((c) => c.type === 'tool_use');
  assert.deepEqual({ id: use.id, name: use.name, input: use.input }, { id: 'call_h1', name: 'get_weather', input: { city: 'Paris' } });
  const res = body.messages.at(-1);
  assert.equal(res.role, 'user');
  const tr = res.content.find((c) => c.type === 'tool_result');
  assert.equal(tr.tool_use_id, 'call_h1');
  assert.ok(JSON.stringify(tr.content).includes('18C and sunny'));
});

test('anthropic tools + tool history are translated to OpenAI messages upstream', async () => {
  cap.seen.length = 0;
  await an.messages.create({ model: 'cap-openai', max_tokens: 64, system: 'You are a weather bot.', messages: HISTORY_ANT, tools: TOOLS_ANT });
  assert.equal(cap.seen.length, 1);
  const { url, body, headers } = cap.seen[0];
  assert.equal(url, '/v1/chat/completions');
  assert.equal(headers['x-api-key'], undefined, 'the caller key is never forwarded');
  assert.equal(body.model, 'cap-gpt');
  assert.equal(body.stream, true);
  assert.equal(body.stream_options?.include_usage, true, 'openai upstream streams always ask for usage');
  assert.equal(body.tools[0].type, 'function');
  assert.equal(body.tools[0].function.name, 'get_weather');
  assert.deepEqual(body.tools[0].function.parameters, TOOLS_ANT[0].input_schema);
  assert.equal(body.messages[0].role, 'system');
  assert.ok(JSON.stringify(body.messages[0].content).includes('You are a weather bot.'));
  const asst = body.messages.find((m) => m.role === 'assistant');
  assert.equal(asst.tool_calls[0].id, 'toolu_h1');
  assert.equal(asst.tool_calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(asst.tool_calls[0].function.arguments), { city: 'Paris' });
  const tool = body.messages.find((m) => m.role === 'tool');
  assert.equal(tool.tool_call_id, 'toolu_h1');
  assert.ok(JSON.stringify(tool.content).includes('18C and sunny'));
});

test('openai SDK receives an Anthropic upstream tool call (streaming and not)', async () => {
  const r = await collectOpenAI(
    await oa.chat.completions.create({ model: 'cap-anthropic', messages: HISTORY_OAI, tools: TOOLS_OAI, stream: true }),
  );
  assert.equal(r.text, 'Let me check.');
  assert.equal(r.finish, 'tool_calls');
  const tools = Object.values(r.tools);
  assert.equal(tools.length, 1);
  assert.equal(tools[0].id, 'toolu_cap1');
  assert.equal(tools[0].name, 'get_weather');
  assert.deepEqual(JSON.parse(tools[0].args), { city: 'Paris' });

  const c = await oa.chat.completions.create({ model: 'cap-anthropic', messages: HISTORY_OAI, tools: TOOLS_OAI });
  const m = c.choices[0].message;
  assert.equal(c.choices[0].finish_reason, 'tool_calls');
  assert.equal(m.content, 'Let me check.');
  assert.equal(m.tool_calls.length, 1);
  assert.equal(m.tool_calls[0].type, 'function');
  assert.equal(m.tool_calls[0].id, 'toolu_cap1');
  assert.equal(m.tool_calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), { city: 'Paris' });
  assert.equal(c.model, 'cap-claude');
});

test('anthropic SDK receives an OpenAI upstream tool call (streaming and not)', async () => {
  const stream = an.messages.stream({ model: 'cap-openai', max_tokens: 64, messages: HISTORY_ANT, tools: TOOLS_ANT });
  const msg = await stream.finalMessage();
  assert.equal(msg.stop_reason, 'tool_use');
  const uses = msg.content.filter((b) => b.type === 'tool_use');
  assert.equal(uses.length, 1);
  assert.equal(uses[0].id, 'call_cap1');
  assert.equal(uses[0].name, 'get_weather');
  assert.deepEqual(uses[0].input, { city: 'Paris' });
  assert.equal(msg.model, 'cap-gpt');

  const whole = await an.messages.create({ model: 'cap-openai', max_tokens: 64, messages: HISTORY_ANT, tools: TOOLS_ANT });
  assert.equal(whole.stop_reason, 'tool_use');
  const u = whole.content.find((b) => b.type === 'tool_use');
  assert.deepEqual({ id: u.id, name: u.name, input: u.input }, { id: 'call_cap1', name: 'get_weather', input: { city: 'Paris' } });
  assert.equal(whole.usage.output_tokens, 7);
});

test('same-dialect tool calls pass through unchanged (both SDKs)', async () => {
  const r = await collectOpenAI(
    await oa.chat.completions.create({ model: 'cap-openai', messages: HISTORY_OAI, tools: TOOLS_OAI, stream: true }),
  );
  assert.equal(r.finish, 'tool_calls');
  assert.deepEqual(Object.values(r.tools), [{ id: 'call_cap1', name: 'get_weather', args: '{"city":"Paris"}' }]);
  const a = await collectAnthropic(
    await an.messages.create({ model: 'cap-anthropic', max_tokens: 64, messages: HISTORY_ANT, tools: TOOLS_ANT, stream: true }),
  );
  assert.equal(a.text, 'Let me check.');
  assert.equal(a.stop, 'tool_use');
  assert.deepEqual(Object.values(a.tools), [{ id: 'toolu_cap1', name: 'get_weather', args: '{"city": "Paris"}' }]);
});

test('the gateway and the mock exit 0 on SIGTERM', async () => {
  await assertCleanExit(assert, gw, mock);
});
