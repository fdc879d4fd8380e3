// What the Anthropic SDK reads besides the answer (docs/design.md §5): the
// request-id header (withResponse().request_id, err.requestID) and
// /v1/models in the caller's dialect (both SDKs' models.list()).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import {
  startMock, startGateway, gatewayConfig, thrown, assertCleanExit, stopAll,
} from './lib.mjs';

let mock;
let gw;

const ROUTES = [
  { name: 'to-openai', targets: ['mo/gpt-up'] },
  { name: 'to-anthropic', targets: ['ma/claude-up'] },
  { name: 'to-bad', targets: ['ma/claude-bad@400'] },
];
const USER = [{ role: 'user', content: 'Say the canonical answer.' }];

before(async () => {
  mock = await startMock();
  gw = await startGateway(gatewayConfig(mock.port, { routes: ROUTES }));
});

after(async () => {
  await stopAll(gw, mock);
});

test('request-id: an Anthropic upstream\'s own, streamed and not', async () => {
  const an = gw.anthropic();
  const a = await an.messages
    .create({ model: 'to-anthropic', max_tokens: 64, messages: USER })
    .withResponse();
  assert.match(a.request_id || '', /^mock-\d+$/);
  assert.notEqual(a.request_id, a.response.headers.get('x-request-id'));
  const s = await an.messages
    .create({ model: 'to-anthropic', max_tokens: 64, messages: USER, stream: true })
    .withResponse();
  for await (const _ of s.data) { /* drain */ }
  assert.match(s.request_id || '', /^mock-\d+$/);
});

test('request-id: the gateway\'s request id in front of an OpenAI upstream', async () => {
  const an = gw.anthropic();
  const a = await an.messages
    .create({ model: 'to-openai', max_tokens: 64, messages: USER })
    .withResponse();
  assert.ok(a.request_id);
  assert.equal(a.request_id, a.response.headers.get('x-request-id'));
  const s = await an.messages
    .create({ model: 'to-openai', max_tokens: 64, messages: USER, stream: true })
    .withResponse();
  for await (const _ of s.data) { /* drain */ }
  assert.equal(s.request_id, s.response.headers.get('x-request-id'));
});

test('request-id on errors: err.requestID (upstream failure and unknown route)', async () => {
  const an = gw.anthropic();
  for (const model of ['to-bad', 'no-such-route']) {
    const e = await thrown(() => an.messages.create({ model, max_tokens: 64, messages: USER }));
    assert.ok(e instanceof Error && !e.didNotThrow, `${model}: an error`);
    assert.ok(e.requestID, `${model}: err.requestID`);
    assert.equal(e.requestID, e.headers.get('x-request-id'));
  }
});

test('models.list() in each SDK\'s dialect', async () => {
  const names = ROUTES.map((r) => r.name);
  const am = [];
  for await (const m of gw.anthropic().models.list()) am.push(m);
  assert.deepEqual(am.map((m) => m.id), names);
  for (const m of am) {
    assert.equal(m.type, 'model');
    assert.equal(m.display_name, m.id);
    assert.ok(!Number.isNaN(Date.parse(m.created_at)));
  }
  const page = await gw.anthropic().models.list();
  assert.equal(page.has_more, false);
  assert.equal(page.first_id, names[0]);
  assert.equal(page.last_id, names[names.length - 1]);
  const om = [];
  for await (const m of gw.openai().models.list()) om.push(m);
  assert.deepEqual(om.map((m) => m.id), names);
  for (const m of om) assert.equal(m.object, 'model');
});

test('messages.stream() in front of an OpenAI upstream: the real input_tokens at the end', async () => {
  const msg = await gw.anthropic()
    .messages.stream({ model: 'to-openai', max_tokens: 64, messages: USER })
    .finalMessage();
  assert.ok(msg.usage.input_tokens > 0, `usage ${JSON.stringify(msg.usage)}`);
  assert.ok(msg.usage.output_tokens > 0);
});

test('the gateway and the mock exit 0 on SIGTERM', async () => {
  await assertCleanExit(assert, gw, mock);
});
