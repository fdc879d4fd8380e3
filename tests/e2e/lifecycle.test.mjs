// Signals: SIGHUP reloads the config (a broken one is reported and the old
// one kept), SIGTERM stops accepting, lets the stream in flight finish, and
// exits 0 (docs/design.md §5).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';

import {
  SLOW, startMock, startGateway, gatewayConfig, canonical, collectOpenAI, sleep, later, thrown, stopAll, request,
} from './lib.mjs';

let mock;
let gw;
let cfg;

before(async () => {
  mock = await startMock();
  cfg = gatewayConfig(mock.port, { routes: [{ name: 'old', targets: ['mo/lc-old'] }] });
  gw = await startGateway(cfg);
  // Signal handlers are installed just after the listening line is printed
  // (see the last test): one answered request shows they are in place.
  assert.equal((await request(gw.url + '/healthz')).status, 200);
});

after(async () => {
  await stopAll(gw, mock);
});

const USER = [{ role: 'user', content: 'hi' }];

// Polls (bounded) until the gateway's stderr has grown by a line matching re.
async function waitStderr(re, from, ms = 5000 * SLOW) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (re.test(gw.p.stderr.slice(from))) return true;
    await sleep(20);
  }
  return false;
}

async function modelIds() {
  const ids = [];
  for await (const m of gw.openai().models.list()) ids.push(m.id);
  return ids;
}

test('SIGHUP with a broken config keeps the running one', { timeout: 20000 * SLOW }, async () => {
  const from = gw.p.stderr.length;
  gw.writeConfig('providers: [\n  {name: mo, api: openai, base_url: "http://127.0.0.1:1/v1"}\nroutes: [ {name: new\n');
  process.kill(gw.pid, 'SIGHUP');
  assert.ok(await waitStderr(/SIGHUP.*keeping the running config/, from), `reported: ${gw.p.stderr.slice(from)}`);
  const c = await gw.openai().chat.completions.create({ model: 'old', messages: USER });
  assert.equal(c.choices[0].message.content, canonical('lc-old'));
  assert.deepEqual(await modelIds(), ['old']);

  // A config that parses but is invalid (unknown key, unknown provider) is refused too.
  const from2 = gw.p.stderr.length;
  gw.writeConfig({ ...cfg, routes: [{ name: 'x', targets: ['nope/model'] }], bogus_key: 1 });
  process.kill(gw.pid, 'SIGHUP');
  assert.ok(await waitStderr(/keeping the running config/, from2), gw.p.stderr.slice(from2));
  assert.deepEqual(await modelIds(), ['old']);
  assert.ok(gw.alive(), 'still running');
});

test('SIGHUP with a changed config makes a new route available', { timeout: 20000 * SLOW }, async () => {
  const from = gw.p.stderr.length;
  gw.writeConfig({ ...cfg, routes: [...cfg.routes, { name: 'added', targets: ['ma/lc-added', 'mo/lc-added-fb'] }] });
  process.kill(gw.pid, 'SIGHUP');
  assert.ok(await waitStderr(/SIGHUP: reloaded/, from), gw.p.stderr.slice(from));
  const m = await gw.anthropic().messages.create({ model: 'added', max_tokens: 20, messages: USER });
  assert.equal(m.content[0].text, canonical('lc-added'));
  assert.deepEqual(await modelIds(), ['old', 'added']);
  const c = await gw.openai().chat.completions.create({ model: 'old', messages: USER });
  assert.equal(c.choices[0].message.content, canonical('lc-old'));
});

test('a stream in flight across a SIGHUP completes unchanged', { timeout: 20000 * SLOW }, async () => {
  const stream = await gw.openai().chat.completions.create({ model: 'mo/lc-hup@tokens=20@delay=20', messages: USER, stream: true });
  const collected = collectOpenAI(stream);
  await sleep(100);
  const from = gw.p.stderr.length;
  gw.writeConfig({ ...cfg, routes: [{ name: 'only-new', targets: ['mo/lc-new'] }] });
  process.kill(gw.pid, 'SIGHUP');
  assert.ok(await waitStderr(/SIGHUP: reloaded/, from));
  const r = await collected;
  assert.equal(r.text, canonical('lc-hup@tokens=20@delay=20', 20));
  assert.equal(r.finish, 'stop');
  const e = await thrown(() => gw.openai().chat.completions.create({ model: 'old', messages: USER }));
  assert.equal(e.status, 404, 'the removed route is gone');
});

test('SIGTERM with a slow stream in flight: the stream completes, new connections are refused, exit 0', { timeout: 30000 * SLOW }, async () => {
  const model = 'lc-term@tokens=40@delay=25';
  const { data: stream, response } = await gw.anthropic().messages
    .create({ model: `ma/${model}`, max_tokens: 100, messages: USER, stream: true })
    .withResponse();
  assert.equal(response.status, 200);
  let text = '';
  let signalled = false;
  let refused = null;
  const events = [];
  for await (const ev of stream) {
    events.push(ev.type);
    if (ev.type === 'content_block_delta') text += ev.delta.text;
    if (!signalled && text.length > 0) {
      signalled = true;
      process.kill(gw.pid, 'SIGTERM');
      await sleep(100);
      // A new connection after the signal is not served.
      refused = await new Promise((resolve) => {
        const s = net.connect(gw.port, '127.0.0.1');
        const timer = setTimeout(() => { s.destroy(); resolve('no answer in 2 s'); }, 2000);
        s.on('connect', () => s.write('GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n'));
        s.on('data', (d) => { clearTimeout(timer); s.destroy(); resolve(`answered: ${String(d).split('\r\n')[0]}`); });
        s.on('error', (e) => { clearTimeout(timer); resolve(e.code); });
        s.on('close', () => { clearTimeout(timer); resolve('closed'); });
      });
    }
  }
  assert.ok(signalled);
  assert.equal(text, canonical(model, 40), 'the stream in flight completed');
  assert.equal(events.at(-1), 'message_stop');
  assert.ok(['ECONNREFUSED', 'ECONNRESET', 'closed'].includes(refused), `a new connection after SIGTERM: ${refused}`);
  const exit = (await Promise.race([gw.p.exitPromise, later(10000 * SLOW)])) ?? 'timeout';
  assert.deepEqual(exit, { code: 0, signal: null }, `exit: ${JSON.stringify(exit)}\n${gw.diag()}`);
  assert.match(gw.p.stderr, /stopped/);
});

test('a signal right after the listening line is handled, not fatal', {
  timeout: 30000 * SLOW,
}, async () => {
  const deaths = [];
  for (let i = 0; i < 5; i++) {
    const g = await startGateway(cfg);
    process.kill(g.pid, 'SIGHUP');
    await sleep(200);
    if (!g.alive()) deaths.push(i);
    const r = await g.stop();
    if (r.signal === 'SIGHUP' && !deaths.includes(i)) deaths.push(i);
  }
  assert.deepEqual(deaths, [], `gateways killed by an early SIGHUP: ${deaths.length} of 5`);
});
