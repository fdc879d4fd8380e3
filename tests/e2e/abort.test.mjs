// A client abort closes the upstream transfer within 100 ms, in every phase
// (streaming after commit, held before commit, waiting between attempts),
// and no further attempt starts. docs/design.md §3.4.
//
// Timing: the mock stamps hung_up_ms on its own clock (ms since its last
// reset). The reset is sent at local time `sent` and answered at `received`,
// so mock time 0 lies in [sent, received] locally, and mock time H happened
// locally no later than received + H. The delay measured is therefore
//   (received + hung_up_ms) − abortAt,
// an upper bound of the real delay that over-estimates it by at most the
// reset's round trip (well under 1 ms on loopback; measured and printed).
// The tolerance on top of 100 ms is 5 ms, for the mock's whole-millisecond
// stamps (up to 1 ms each for the reset and the hang-up) and for the time
// between taking abortAt and the SDK actually closing its socket. When this
// test process notices the hang-up does not matter: the mock stamps it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import {
  SLOW, startMock, startGateway, gatewayConfig, sleep, thrown, assertCleanExit, stopAll,
} from './lib.mjs';

// Under AIRETRY_E2E_SLOW (valgrind) the gateway's reaction is slower too.
const LIMIT_MS = 100 * SLOW;
const TOLERANCE_MS = 5;

let mock;
let gw;

before(async () => {
  mock = await startMock();
  gw = await startGateway(gatewayConfig(mock.port, {
    routes: [
      { name: 'slow-o', targets: ['mo/ab-o@tokens=200@delay=20', 'ma/ab-o-fb'] },
      { name: 'slow-a', targets: ['ma/ab-a@tokens=200@delay=20', 'mo/ab-a-fb'] },
      { name: 'held', targets: ['mo/ab-h@slow=20000', 'ma/ab-h-fb'], timeouts: { first_chunk_ms: 30000 } },
      { name: 'waiting', targets: ['mo/ab-w@429@ram=2000', 'ma/ab-w-fb'] },
    ],
  }));
});

after(async () => {
  await stopAll(gw, mock);
});

const USER = [{ role: 'user', content: 'stream slowly' }];

// Polls the mock log (bounded) until the attempt of model is hung up.
async function hungUp(model, ms = 3000 * SLOW) {
  const end = Date.now() + ms;
  for (;;) {
    const log = await mock.attempts(model);
    if (log.length && log.every((a) => a.hung_up || a.end_ms !== null)) return log;
    if (Date.now() > end) return log;
    await sleep(10);
  }
}

// "Nothing more happened", observed rather than waited for: polls (bounded)
// until the gateway wrote the log line of the route's request (a request is
// logged when it ends, after which it starts nothing) and every attempt in
// the mock's log has ended; returns that line and a fresh read of the log.
async function finished(route, ms = 5000 * SLOW) {
  const end = Date.now() + ms;
  for (;;) {
    const line = gw.logLines().find((l) => l.route === route);
    const open = (await mock.log()).filter((a) => a.end_ms === null);
    if ((line && open.length === 0) || Date.now() > end) {
      assert.ok(line, `the request of route ${route} is logged`);
      assert.deepEqual(open, [], 'every upstream attempt ended');
      return { line, log: await mock.log() };
    }
    await sleep(10);
  }
}

function assertClosedInTime(log, clock, abortAt, what) {
  assert.equal(log.length, 1, `exactly one upstream attempt: ${JSON.stringify(log)}`);
  const a = log[0];
  assert.equal(a.hung_up, true, `${what}: the upstream connection was closed by the gateway: ${JSON.stringify(a)}`);
  const delay = clock.received + a.hung_up_ms - abortAt;
  const rtt = clock.received - clock.sent;
  console.log(`${what}: upstream closed ${delay.toFixed(1)} ms after the abort (reset RTT ${rtt.toFixed(2)} ms)`);
  assert.ok(delay <= LIMIT_MS + TOLERANCE_MS, `${what}: upstream closed ${delay.toFixed(1)} ms after the abort`);
}

test('openai SDK: stream.controller.abort() mid-stream closes the upstream within 100 ms', { timeout: 20000 * SLOW }, async () => {
  const clock = await mock.reset();
  const stream = await gw.openai().chat.completions.create({ model: 'slow-o', messages: USER, stream: true });
  let n = 0;
  let abortAt = 0;
  for await (const c of stream) {
    if (c.choices[0]?.delta?.content) n++;
    if (n === 3) {
      abortAt = performance.now();
      stream.controller.abort();
      break;
    }
  }
  assert.equal(n, 3);
  const log = await hungUp('ab-o@tokens=200@delay=20');
  assertClosedInTime(log, clock, abortAt, 'openai mid-stream');
  const { line, log: all } = await finished('slow-o');
  assert.equal(all.length, 1, `no further attempt: ${JSON.stringify(all)}`);
  assert.equal(line.outcome, 'aborted');
});

test('anthropic SDK: AbortController mid-stream closes the upstream within 100 ms', { timeout: 20000 * SLOW }, async () => {
  const clock = await mock.reset();
  const ac = new AbortController();
  const stream = await gw.anthropic().messages.create(
    { model: 'slow-a', max_tokens: 500, messages: USER, stream: true },
    { signal: ac.signal },
  );
  let n = 0;
  let abortAt = 0;
  const e = await thrown(async () => {
    for await (const ev of stream) {
      if (ev.type === 'content_block_delta') n++;
      if (n === 3 && !abortAt) {
        abortAt = performance.now();
        ac.abort();
      }
    }
  });
  assert.equal(n, 3, 'nothing after the abort');
  assert.ok(abortAt > 0, `${e?.message}`);
  const log = await hungUp('ab-a@tokens=200@delay=20');
  assertClosedInTime(log, clock, abortAt, 'anthropic mid-stream');
  const { log: all } = await finished('slow-a');
  assert.equal(all.length, 1, `no further attempt: ${JSON.stringify(all)}`);
});

test('abort while the answer is held before commit closes the upstream within 100 ms', { timeout: 20000 * SLOW }, async () => {
  const clock = await mock.reset();
  const ac = new AbortController();
  const p = thrown(() => gw.openai().chat.completions.create(
    { model: 'held', messages: USER, stream: true },
    { signal: ac.signal },
  ));
  // Wait (bounded) until the upstream attempt is open at the mock.
  const end = Date.now() + 5000 * SLOW;
  while ((await mock.attempts('ab-h@slow=20000')).length === 0 && Date.now() < end) await sleep(10);
  const abortAt = performance.now();
  ac.abort();
  const e = await p;
  assert.ok(!e.didNotThrow, 'the SDK call was aborted');
  const log = await hungUp('ab-h@slow=20000');
  assertClosedInTime(log, clock, abortAt, 'held before commit');
  const { log: all } = await finished('held');
  assert.equal(all.length, 1, `no further attempt: ${JSON.stringify(all)}`);
});

test('abort during a Retry-After wait: no further attempt starts', { timeout: 20000 * SLOW }, async () => {
  await mock.reset();
  const ac = new AbortController();
  const t0 = performance.now();
  const p = thrown(() => gw.anthropic().messages.create(
    { model: 'waiting', max_tokens: 50, messages: USER },
    { signal: ac.signal },
  ));
  // Wait (bounded) until the mock sent its 429 (the attempt ended): the
  // gateway's 2 s Retry-After wait follows.
  const end = Date.now() + 5000 * SLOW;
  const sent429 = async () => (await mock.attempts('ab-w@429@ram=2000')).some((a) => a.end_ms !== null);
  while (!(await sent429()) && Date.now() < end) await sleep(10);
  ac.abort();
  const e = await p;
  assert.ok(!e.didNotThrow);
  assert.ok(performance.now() - t0 < 1500, 'the SDK call ended at the abort, not after the wait');
  const { line, log: all } = await finished('waiting');
  assert.equal(all.filter((a) => a.model === 'ab-w@429@ram=2000').length, 1, 'the retry never started');
  assert.equal(all.filter((a) => a.model === 'ab-w-fb').length, 0, 'no switch either');
  assert.equal(line.outcome, 'aborted');
});

test('the gateway keeps serving after aborts', async () => {
  const c = await gw.openai().chat.completions.create({ model: 'mo/after-abort', messages: USER });
  assert.equal(c.choices[0].message.content, '[after-abort] w1 w2 w3 w4 w5 w6 w7 w8');
});

test('the gateway and the mock exit 0 on SIGTERM', async () => {
  await assertCleanExit(assert, gw, mock);
});
