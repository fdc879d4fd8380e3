// 200 concurrent streams through both SDKs with random faults (healthy,
// overloaded once, 429 once with a short Retry-After, a refusal with a
// fallback, slow tokens): every stream completes with exactly the canonical
// text of the target that answered (nothing lost, nothing sent twice), the
// upstream attempt counts are exact, and the gateway's RSS stays bounded.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import {
  ASAN, startMock, startGateway, gatewayConfig, canonical, collectOpenAI, collectAnthropic,
  assertCleanExit, stopAll, sleep,
} from './lib.mjs';

// 200 streams in both builds (the ASan+UBSan one takes about a second too);
// ASan's shadow memory and quarantine of freed blocks raise the RSS bound.
const N = Number(process.env.AIRETRY_E2E_STREAMS || 200);
const RSS_LIMIT_KB = (ASAN ? 400 : 200) * 1024;

// A small deterministic PRNG (mulberry32), seeded from the environment or
// the clock; the seed is printed so a failure can be replayed.
const SEED = Number(process.env.AIRETRY_E2E_SEED || Date.now() % 100000);
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// kind → mock tokens, upstream attempts on the primary / fallback, who answers.
const KINDS = {
  healthy: { f: '', nP: 1, nB: 0, by: 'P' },
  overloaded_once: { f: '@529@k=1', nP: 2, nB: 0, by: 'P' },
  rate_limited_once: { f: '@429@ram=20@k=1', nP: 2, nB: 0, by: 'P' },
  refusal: { f: '@refuse', nP: 1, nB: 1, by: 'B' },
  slow_tokens: { f: '@tokens=30@delay=10', nP: 1, nB: 0, by: 'P', n: 30 },
};

const rand = rng(SEED);
const reqs = [];
for (let i = 0; i < N; i++) {
  const names = Object.keys(KINDS);
  const kind = names[Math.floor(rand() * names.length)];
  const sdk = rand() < 0.5 ? 'openai' : 'anthropic';
  const [papi, bapi] = rand() < 0.5 ? ['mo', 'ma'] : ['ma', 'mo'];
  const k = KINDS[kind];
  const P = `L${i}${k.f}`;
  const B = `L${i}-fb`;
  reqs.push({ i, kind, sdk, route: `load${i}`, P, B, targets: [`${papi}/${P}`, `${bapi}/${B}`], ...k });
}

let mock;
let gw;

before(async () => {
  mock = await startMock();
  gw = await startGateway(gatewayConfig(mock.port, {
    routes: reqs.map((r) => ({ name: r.route, targets: r.targets })),
    defaults: { refusal: { phrases: ["I'm sorry, but I cannot assist"] } },
  }));
});

after(async () => {
  await stopAll(gw, mock);
});

const USER = [{ role: 'user', content: 'load' }];

async function run(r, oa, an) {
  if (r.sdk === 'openai') {
    const { data, response } = await oa.chat.completions
      .create({ model: r.route, messages: USER, stream: true })
      .withResponse();
    const out = await collectOpenAI(data);
    return { text: out.text, end: out.finish, headers: response.headers };
  }
  const { data, response } = await an.messages
    .create({ model: r.route, max_tokens: 100, messages: USER, stream: true })
    .withResponse();
  const out = await collectAnthropic(data);
  return { text: out.text, end: out.stop, headers: response.headers };
}

test(`${N} concurrent streams with random faults (seed ${SEED})`, { timeout: 120000 }, async () => {
  await mock.reset();
  const rss0 = gw.rssKb();
  let rssMax = rss0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      rssMax = Math.max(rssMax, gw.rssKb());
      await sleep(25);
    }
  })();
  const oa = gw.openai({ timeout: 60000 });
  const an = gw.anthropic({ timeout: 60000 });
  const t0 = performance.now();
  const results = await Promise.allSettled(reqs.map((r) => run(r, oa, an)));
  const ms = performance.now() - t0;
  sampling = false;
  await sampler;
  const rss1 = gw.rssKb();
  const counts = {};
  for (const r of reqs) counts[r.kind] = (counts[r.kind] || 0) + 1;
  console.log(`${N} streams in ${ms.toFixed(0)} ms, kinds ${JSON.stringify(counts)}; ` +
    `gateway RSS ${(rss0 / 1024).toFixed(1)} MB before, ${(rssMax / 1024).toFixed(1)} MB peak, ` +
    `${(rss1 / 1024).toFixed(1)} MB after`);

  const failed = results.map((x, i) => [x, reqs[i]]).filter(([x]) => x.status === 'rejected');
  assert.equal(failed.length, 0, `all complete; failed: ${failed.slice(0, 5).map(([x, r]) => `${r.route} ${r.kind}: ${x.reason?.message}`).join('; ')}`);
  const log = await mock.log();
  const byModel = new Map();
  for (const a of log) byModel.set(a.model, (byModel.get(a.model) || 0) + 1);
  for (const [i, x] of results.entries()) {
    const r = reqs[i];
    const model = r.by === 'P' ? r.P : r.B;
    const target = r.by === 'P' ? r.targets[0] : r.targets[1];
    const what = `${r.route} (${r.kind}, ${r.sdk} SDK, ${r.targets.join(' → ')})`;
    assert.equal(x.value.text, canonical(model, r.by === 'P' && r.n ? r.n : 8), `${what}: exact text, nothing lost or repeated`);
    assert.ok(['stop', 'end_turn'].includes(x.value.end), `${what}: clean finish ${x.value.end}`);
    assert.equal(x.value.headers.get('x-airetry-target'), target, what);
    assert.equal(x.value.headers.get('x-airetry-attempts'), String(r.nP + r.nB), what);
    assert.equal(byModel.get(r.P) || 0, r.nP, `${what}: primary attempts`);
    assert.equal(byModel.get(r.B) || 0, r.nB, `${what}: fallback attempts`);
  }
  assert.equal(log.length, reqs.reduce((s, r) => s + r.nP + r.nB, 0), 'no stray upstream requests');
  assert.ok(rssMax < RSS_LIMIT_KB, `gateway RSS peak ${(rssMax / 1024).toFixed(1)} MB under ${RSS_LIMIT_KB / 1024} MB`);
});

test('the gateway and the mock exit 0 on SIGTERM', async () => {
  await assertCleanExit(assert, gw, mock);
});
