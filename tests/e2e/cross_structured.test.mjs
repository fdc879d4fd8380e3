// Structured output across dialects (docs/design.md §5): a JSON schema
// (or json_object) asked by an OpenAI caller is kept when the route falls
// over to an Anthropic target (structured_output: tool, the default, or
// native), and an Anthropic caller's output_config.format when it falls over
// to an OpenAI target — with the official openai SDK, the AI SDK and
// LangChain, the primary down (a 503 on every attempt).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { generateObject } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';

import { assertCleanExit, mockAndGateway, attemptsBy } from './lib.mjs';

const SCHEMA = {
  type: 'object',
  properties: { city: { type: 'string' }, temp: { type: 'number' }, tags: { type: 'array', items: { type: 'string' } } },
  required: ['city', 'temp', 'tags'],
  additionalProperties: false,
};
const ZSCHEMA = z.object({ city: z.string(), temp: z.number(), tags: z.array(z.string()) });
const INSTANCE = { city: 'x', temp: 1, tags: ['x'] }; // the mock's minimal instance

const ROUTES = [
  // OpenAI caller -> Anthropic fallback, in each structured_output mode.
  { name: 'oa-to-an-tool', targets: ['mo/down@503', 'ma/js@json'] },
  {
    name: 'oa-to-an-native',
    targets: ['mo/down@503', { target: 'ma/js@json', structured_output: 'native' }],
  },
  // Anthropic caller -> OpenAI fallback.
  { name: 'an-to-oa', targets: ['ma/down@503', 'mo/js@json'] },
];

describe('structured output across dialects', () => {
  let mock;
  let gw;

  mockAndGateway(ROUTES, undefined, (m, g) => {
    mock = m;
    gw = g;
  });

  const attempts = () => attemptsBy(mock, (a) => `${a.api}:${a.model}`);

  for (const route of ['oa-to-an-tool', 'oa-to-an-native']) {
    test(`openai SDK json_schema, streamed and not (${route})`, async () => {
      const oa = gw.openai();
      const rf = { type: 'json_schema', json_schema: { name: 'city', strict: true, schema: SCHEMA } };
      const r = await oa.chat.completions.create({
        model: route,
        messages: [{ role: 'user', content: 'A city.' }],
        response_format: rf,
      });
      assert.deepEqual(JSON.parse(r.choices[0].message.content), INSTANCE);
      assert.equal(r.choices[0].finish_reason, 'stop');
      const s = await oa.chat.completions.create({
        model: route,
        messages: [{ role: 'user', content: 'A city.' }],
        response_format: rf,
        stream: true,
      });
      let text = '';
      for await (const c of s) text += c.choices[0]?.delta?.content || '';
      assert.deepEqual(JSON.parse(text), INSTANCE);
      assert.deepEqual(await attempts(), { 'openai:down@503': 2, 'anthropic:js@json': 2 });
    });

    test(`openai SDK json_object (${route})`, async () => {
      const r = await gw.openai().chat.completions.create({
        model: route,
        messages: [{ role: 'user', content: 'Answer in JSON.' }],
        response_format: { type: 'json_object' },
      });
      const v = JSON.parse(r.choices[0].message.content);
      assert.equal(typeof v, 'object');
      assert.deepEqual(await attempts(), { 'openai:down@503': 1, 'anthropic:js@json': 1 });
    });

    test(`AI SDK generateObject (${route})`, async () => {
      const openai = createOpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'test' });
      const r = await generateObject({ model: openai.chat(route), schema: ZSCHEMA, prompt: 'A city.', maxRetries: 0 });
      assert.deepEqual(r.object, INSTANCE);
      assert.deepEqual(await attempts(), { 'openai:down@503': 1, 'anthropic:js@json': 1 });
    });

    test(`LangChain withStructuredOutput (${route})`, async () => {
      const llm = new ChatOpenAI({
        model: route,
        apiKey: 'test',
        maxRetries: 0,
        configuration: { baseURL: `${gw.url}/v1` },
      });
      const r = await llm.withStructuredOutput(ZSCHEMA, { method: 'jsonSchema', name: 'city' }).invoke('A city.');
      assert.deepEqual(r, INSTANCE);
      assert.deepEqual(await attempts(), { 'openai:down@503': 1, 'anthropic:js@json': 1 });
    });
  }

  test('Anthropic SDK output_config.format to an OpenAI fallback', async () => {
    const r = await gw.anthropic().messages.create({
      model: 'an-to-oa',
      max_tokens: 256,
      messages: [{ role: 'user', content: 'A city.' }],
      output_config: { format: { type: 'json_schema', schema: SCHEMA } },
    });
    const text = r.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
    assert.deepEqual(JSON.parse(text), INSTANCE);
    assert.deepEqual(await attempts(), { 'anthropic:down@503': 1, 'openai:js@json': 1 });
  });

  test('gateway and mock exit cleanly', async () => {
    await assertCleanExit(assert, gw, mock);
  });
});
