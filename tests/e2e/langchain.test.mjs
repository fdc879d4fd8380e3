// LangChain JS (@langchain/openai ChatOpenAI, @langchain/anthropic
// ChatAnthropic) through the gateway to the mock, on same-dialect routes:
// invoke, stream, a tool round trip (bindTools, then a ToolMessage) and
// withStructuredOutput — each healthy and with the primary down (a 503 on
// every attempt) falling over to a same-dialect fallback. LangChain's own
// retries are off (maxRetries: 0, README); each test checks that the gateway
// saw exactly one request per call and the mock exactly the attempts the
// route's rules make (its /__mock/log).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ChatOpenAI } from '@langchain/openai';
import { ChatAnthropic } from '@langchain/anthropic';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { z } from 'zod';

import { canonical, assertCleanExit, okAndDownRoutes, mockAndGateway, exactly as exactlyOn } from './lib.mjs';

let mock;
let gw;

const MODELS = ['text', 'tooly', 'js@json'];
const ROUTES = okAndDownRoutes(MODELS);

const SCHEMA = z.object({ city: z.string(), temp: z.number(), tags: z.array(z.string()) });
const INSTANCE = { city: 'x', temp: 1, tags: ['x'] }; // the mock's minimal instance

mockAndGateway(ROUTES, 'clients.yaml', (m, g) => {
  mock = m;
  gw = g;
});

function chat(kind, route) {
  if (kind === 'openai') {
    return new ChatOpenAI({
      model: route,
      apiKey: 'test',
      maxRetries: 0,
      configuration: { baseURL: `${gw.url}/v1` },
    });
  }
  return new ChatAnthropic({
    model: route,
    apiKey: 'test',
    maxRetries: 0,
    maxTokens: 256,
    anthropicApiUrl: gw.url,
  });
}

// The gateway's log lines for route grow by exactly `calls`; the mock's
// attempts per model equal `want` (lib.mjs).
const exactly = (route, calls, want, fn) => exactlyOn(gw, mock, route, calls, want, fn);

function attempts(down, model, calls) {
  return down ? { 'down@503': calls, [model]: calls } : { [model]: calls };
}

const text = (content) =>
  typeof content === 'string' ? content : content.map((c) => c.text || '').join('');

// Each client in front of both upstream dialects (mo: OpenAI, ma: Anthropic).
for (const kind of ['openai', 'anthropic']) {
  const own = kind === 'openai' ? 'mo' : 'ma';
  const other = own === 'mo' ? 'ma' : 'mo';
  for (const [p, down] of [[own, false], [own, true], [other, false], [other, true]]) {
    const state = `${p === own ? '' : `to ${p}, `}${down ? 'down' : 'ok'}`;
    const route = (m) => `${p}-${m}-${down ? 'down' : 'ok'}`;

    test(`${kind} invoke (${state})`, async () => {
      const r = await exactly(route('text'), 1, attempts(down, 'text', 1), () =>
        chat(kind, route('text')).invoke('hi'),
      );
      assert.equal(text(r.content), canonical('text'));
      assert.ok(r.usage_metadata?.output_tokens > 0);
    });

    test(`${kind} stream (${state})`, async () => {
      const r = await exactly(route('text'), 1, attempts(down, 'text', 1), async () => {
        let out = '';
        let chunks = 0;
        for await (const c of await chat(kind, route('text')).stream('hi')) {
          out += text(c.content);
          chunks++;
        }
        return { out, chunks };
      });
      assert.equal(r.out, canonical('text'));
      assert.ok(r.chunks > 1, 'streamed in pieces');
    });

    test(`${kind} tools: bindTools and a ToolMessage (${state})`, async () => {
      const weather = tool(async () => 'sunny', {
        name: 'get_weather',
        description: 'The weather at a place',
        schema: z.object({ location: z.string(), days: z.number() }),
      });
      const r = await exactly(route('tooly'), 2, attempts(down, 'tooly', 2), async () => {
        const llm = chat(kind, route('tooly')).bindTools([weather]);
        const q = new HumanMessage('What is the weather?');
        const first = await llm.invoke([q]);
        const calls = first.tool_calls;
        const answers = await Promise.all(calls.map((c) => weather.invoke(c)));
        const second = await llm.invoke([q, first, ...answers]);
        return { calls, answers, second };
      });
      assert.equal(r.calls.length, 1);
      assert.equal(r.calls[0].name, 'get_weather');
      assert.deepEqual(r.calls[0].args, { location: 'city-0', days: 1 });
      assert.ok(r.answers[0] instanceof ToolMessage);
      assert.equal(text(r.second.content), canonical('tooly'));
    });

    test(`${kind} withStructuredOutput (${state})`, async () => {
      const r = await exactly(route('js'), 1, attempts(down, 'js@json', 1), () =>
        chat(kind, route('js'))
          .withStructuredOutput(SCHEMA, { method: 'jsonSchema', name: 'city' })
          .invoke('A city.'),
      );
      assert.deepEqual(r, INSTANCE);
    });
  }
}

test('gateway and mock exit cleanly', async () => {
  await assertCleanExit(assert, gw, mock);
});
