// The endpoints without a stream (docs/design.md §2.3, 5) with the official SDKs:
// the Anthropic SDK's messages.countTokens and the OpenAI SDK's
// embeddings.create (which asks for base64 and decodes it), healthy, with
// the primary down, and failing — with the exact attempts the gateway and
// the mock saw. The SDKs' retries are left at their defaults in the failing
// cases: x-should-retry: false must stop them.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  mockAndGateway, attemptsBy, thrown, assertCleanExit, OpenAI, Anthropic,
} from './lib.mjs';

let mock;
let gw;

const ROUTES = [
  { name: 'count', targets: ['ma/counter'] },
  { name: 'count-down', targets: ['ma/down@529', 'mo/skipped', 'ma/counter'] },
  { name: 'count-dead', targets: ['ma/dead@503@ra=2'] },
  { name: 'emb', targets: ['mo/emb'] },
  { name: 'emb-down', targets: ['mo/down@503', 'ma/skipped', 'mo/emb'] },
  { name: 'emb-dead', targets: ['mo/dead@500'] },
];
const MESSAGES = [{ role: 'user', content: 'hello world' }];

mockAndGateway(ROUTES, undefined, (m, g) => {
  mock = m;
  gw = g;
});

const seen = () => attemptsBy(mock, (a) => `${a.endpoint}:${a.model}`);

function linesFor(route) {
  return gw.logLines().filter((l) => l.route === route);
}

async function waitLines(route, n) {
  const end = Date.now() + 3000;
  while (linesFor(route).length < n && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  return linesFor(route);
}

test('countTokens: healthy, with request-id', async () => {
  const an = gw.anthropic();
  const r = await an.messages.countTokens({ model: 'count', messages: MESSAGES }).withResponse();
  assert.deepEqual(r.data, { input_tokens: 6 });
  assert.match(r.request_id, /^mock-\d+$/);
  assert.equal(r.response.headers.get('x-airetry-target'), 'ma/counter');
  assert.deepEqual(await seen(), { 'count_tokens:counter': 1 });
});

test('countTokens: the primary down fails over to the next Anthropic target', async () => {
  const an = gw.anthropic();
  const r = await an.messages
    .countTokens({ model: 'count-down', system: 'be brief', messages: MESSAGES })
    .withResponse();
  assert.deepEqual(r.data, { input_tokens: 8 });
  assert.equal(r.response.headers.get('x-airetry-attempts'), '2');
  assert.deepEqual(await seen(), { 'count_tokens:down@529': 1, 'count_tokens:counter': 1 });
  const [line] = await waitLines('count-down', 1);
  assert.equal(line.endpoint, '/v1/messages/count_tokens');
  assert.deepEqual(
    line.attempts.map((a) => a.outcome || a.reason),
    ['overloaded', 'skipped', 'ok'],
  );
});

test('countTokens: a final failure is one request despite the SDK\'s retries', async () => {
  const an = new Anthropic({ baseURL: gw.url, apiKey: 'test' }); // default maxRetries: 2
  const e = await thrown(() => an.messages.countTokens({ model: 'count-dead', messages: MESSAGES }));
  assert.ok(e instanceof Anthropic.APIError, String(e));
  assert.equal(e.status, 503);
  assert.equal(e.error.type, 'error');
  assert.equal(e.error.error.type, 'overloaded_error');
  assert.ok(e.requestID);
  assert.equal(e.headers.get('retry-after'), '2');
  assert.equal((await waitLines('count-dead', 1)).length, 1);
  assert.deepEqual(await seen(), { 'count_tokens:dead@503@ra=2': 1 });
});

test('embeddings.create: healthy and failing over (base64, decoded by the SDK)', async () => {
  const oa = gw.openai();
  const a = await oa.embeddings.create({ model: 'emb', input: ['a', 'b'], dimensions: 8 });
  assert.equal(a.data.length, 2);
  assert.equal(a.data[0].embedding.length, 8);
  assert.equal(a.model, 'emb');
  const b = await oa.embeddings.create({ model: 'emb-down', input: ['a', 'b'], dimensions: 8 });
  assert.deepEqual(b.data.map((d) => d.embedding), a.data.map((d) => d.embedding));
  assert.deepEqual(await seen(), { 'embeddings:emb': 2, 'embeddings:down@503': 1 });
  const [line] = await waitLines('emb-down', 1);
  assert.deepEqual(line.attempts.map((x) => x.outcome || x.reason), ['overloaded', 'skipped', 'ok']);
});

test('embeddings.create: a final failure is one request despite the SDK\'s retries', async () => {
  const oa = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'test' }); // default maxRetries: 2
  const e = await thrown(() => oa.embeddings.create({ model: 'emb-dead', input: 'x' }));
  assert.ok(e instanceof OpenAI.APIError, String(e));
  assert.equal(e.status, 500);
  assert.equal(e.error.code, 'server_error');
  assert.equal(e.error.attempts.length, 1);
  assert.equal((await waitLines('emb-dead', 1)).length, 1);
  assert.deepEqual(await seen(), { 'embeddings:dead@500': 1 });
});

test('gateway and mock exit cleanly', async () => {
  await assertCleanExit(assert, gw, mock);
});
