// The Vercel AI SDK (`ai` with @ai-sdk/openai, @ai-sdk/anthropic and
// @ai-sdk/openai-compatible) through the gateway to the mock, on same-dialect
// routes: generateText, streamText, a tool round trip, generateObject,
// streamObject, embed and embedMany — each healthy and with the primary
// down (a 503 on every attempt) falling over to a same-dialect fallback.
// The SDK's own retries are off (maxRetries: 0, README), and each test
// checks that the gateway saw exactly one request per SDK call and the mock
// exactly the attempts the route's rules make (its /__mock/log).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  generateText, streamText, generateObject, streamObject, embed, embedMany, tool, stepCountIs,
} from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { z } from 'zod';

import { canonical, assertCleanExit, okAndDownRoutes, mockAndGateway, exactly as exactlyOn } from './lib.mjs';

let mock;
let gw;

// Per provider (mo: OpenAI, ma: Anthropic) and answer model: a healthy
// route, and one whose primary always answers 503.
const MODELS = ['text', 'tooly', 'js@json', 'emb'];
const ROUTES = okAndDownRoutes(MODELS);

const SCHEMA = z.object({ city: z.string(), temp: z.number(), tags: z.array(z.string()) });
const INSTANCE = { city: 'x', temp: 1, tags: ['x'] }; // the mock's minimal instance

// No retry of the same target, no breaker: every SDK call makes exactly
// (primary down ? 2 : 1) attempts.
mockAndGateway(ROUTES, 'clients.yaml', (m, g) => {
  mock = m;
  gw = g;
});

const key = 'test';
const clients = () => ({
  openai: createOpenAI({ baseURL: `${gw.url}/v1`, apiKey: key }),
  anthropic: createAnthropic({ baseURL: `${gw.url}/v1`, apiKey: key }),
  // supportsStructuredOutputs: response_format json_schema (else json_object,
  // whose answer the schema cannot check).
  compat: createOpenAICompatible({
    name: 'airetry',
    baseURL: `${gw.url}/v1`,
    apiKey: key,
    supportsStructuredOutputs: true,
  }),
});

// The chat model of a client for a route (OpenAI: the chat-completions API;
// createOpenAI(...)(route) would use the Responses API).
function chatModel(kind, route) {
  const c = clients();
  if (kind === 'openai') return c.openai.chat(route);
  if (kind === 'anthropic') return c.anthropic(route);
  return c.compat.chatModel(route);
}
const provider = (kind) => (kind === 'anthropic' ? 'ma' : 'mo');
// Anthropic: the schema through output_config.format (the mock answers it),
// not a forced tool.
const objectOptions = (kind) =>
  kind === 'anthropic' ? { providerOptions: { anthropic: { structuredOutputMode: 'outputFormat' } } } : {};

// Runs fn (which makes `calls` SDK calls on route) and checks the gateway's
// log lines for the route grew by exactly `calls` and the mock saw exactly
// `want` attempts per model (every other model: none).
const exactly = (route, calls, want, fn) => exactlyOn(gw, mock, route, calls, want, fn);

// The attempts of `calls` SDK calls answered by `model` on a route that is
// healthy or has its primary down.
function attempts(down, model, calls) {
  return down ? { 'down@503': calls, [model]: calls } : { [model]: calls };
}

// Every client in front of every upstream dialect (mo: OpenAI, ma:
// Anthropic): across dialects the gateway translates through its canonical
// request (tools, schemas, reasoning), so the SDK sees the same answers.
for (const kind of ['openai', 'anthropic', 'compat']) {
  for (const up of ['mo', 'ma']) {
    for (const down of [false, true]) {
      const state = `${up === provider(kind) ? '' : `to ${up}, `}${down ? 'down' : 'ok'}`;
      const route = (m) => `${up}-${m}-${down ? 'down' : 'ok'}`;

      test(`${kind} generateText (${state})`, async () => {
        const r = await exactly(route('text'), 1, attempts(down, 'text', 1), () =>
          generateText({ model: chatModel(kind, route('text')), prompt: 'hi', maxRetries: 0 }),
        );
        assert.equal(r.text, canonical('text'));
        assert.equal(r.finishReason, 'stop');
        assert.equal(r.response.modelId, 'text');
        assert.ok(r.usage.outputTokens > 0);
      });

      test(`${kind} streamText (${state})`, async () => {
        const r = await exactly(route('text'), 1, attempts(down, 'text', 1), async () => {
          const s = streamText({ model: chatModel(kind, route('text')), prompt: 'hi', maxRetries: 0 });
          let text = '';
          let parts = 0;
          for await (const t of s.textStream) {
            text += t;
            parts++;
          }
          return { text, parts, finish: await s.finishReason };
        });
        assert.equal(r.text, canonical('text'));
        assert.ok(r.parts > 1, 'streamed in pieces');
        assert.equal(r.finish, 'stop');
      });

      test(`${kind} tools: a tool call round trip (${state})`, async () => {
        const calls = [];
        const r = await exactly(route('tooly'), 2, attempts(down, 'tooly', 2), () =>
          generateText({
            model: chatModel(kind, route('tooly')),
            prompt: 'What is the weather?',
            maxRetries: 0,
            stopWhen: stepCountIs(3),
            tools: {
              get_weather: tool({
                description: 'The weather at a place',
                inputSchema: z.object({ location: z.string(), days: z.number() }),
                execute: async (args) => {
                  calls.push(args);
                  return { forecast: 'sunny' };
                },
              }),
            },
          }),
        );
        assert.deepEqual(calls, [{ location: 'city-0', days: 1 }]);
        assert.equal(r.steps.length, 2);
        assert.equal(r.steps[0].finishReason, 'tool-calls');
        assert.equal(r.text, canonical('tooly'));
      });

      test(`${kind} generateObject (${state})`, async () => {
        const r = await exactly(route('js'), 1, attempts(down, 'js@json', 1), () =>
          generateObject({
            model: chatModel(kind, route('js')),
            schema: SCHEMA,
            prompt: 'A city.',
            maxRetries: 0,
            ...objectOptions(kind),
          }),
        );
        assert.deepEqual(r.object, INSTANCE);
      });

      test(`${kind} streamObject (${state})`, async () => {
        const r = await exactly(route('js'), 1, attempts(down, 'js@json', 1), async () => {
          const s = streamObject({
            model: chatModel(kind, route('js')),
            schema: SCHEMA,
            prompt: 'A city.',
            maxRetries: 0,
            ...objectOptions(kind),
          });
          let partials = 0;
          for await (const _ of s.partialObjectStream) partials++;
          return { object: await s.object, partials };
        });
        assert.deepEqual(r.object, INSTANCE);
        assert.ok(r.partials >= 1);
      });
    }
  }
}

for (const kind of ['openai', 'compat']) {
  for (const down of [false, true]) {
    const state = down ? 'down' : 'ok';
    const route = `mo-emb-${state}`;
    const model = () =>
      kind === 'openai' ? clients().openai.embedding(route) : clients().compat.embeddingModel(route);

    test(`${kind} embed and embedMany through /v1/embeddings (${state})`, async () => {
      const one = await exactly(route, 1, attempts(down, 'emb', 1), () =>
        embed({ model: model(), value: 'sunny day', maxRetries: 0 }),
      );
      assert.equal(one.embedding.length, 16);
      const norm = Math.sqrt(one.embedding.reduce((s, x) => s + x * x, 0));
      assert.ok(Math.abs(norm - 1) < 1e-3, `unit length: ${norm}`);
      await mock.reset();
      const many = await exactly(route, 1, attempts(down, 'emb', 1), () =>
        embedMany({ model: model(), values: ['sunny day', 'rainy day'], maxRetries: 0 }),
      );
      assert.equal(many.embeddings.length, 2);
      // Deterministic: the same text gives the same vector.
      assert.deepEqual(many.embeddings[0], one.embedding);
      assert.notDeepEqual(many.embeddings[1], one.embedding);
    });
  }
}

test('an Anthropic-only route answers embeddings with a 400 naming the reason', async () => {
  const err = await exactly('ma-emb-ok', 1, {}, () =>
    embed({ model: clients().openai.embedding('ma-emb-ok'), value: 'x', maxRetries: 0 }).then(
      () => null,
      (e) => e,
    ),
  );
  assert.ok(err, 'embed failed');
  assert.equal(err.statusCode, 400);
  assert.match(err.responseBody, /needs an openai provider/);
});

test('gateway and mock exit cleanly', async () => {
  await assertCleanExit(assert, gw, mock);
});
