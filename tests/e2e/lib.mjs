// Helpers of the end-to-end suite: start `airetry mock` and `airetry serve`
// on 127.0.0.1 ephemeral ports, write gateway configs, read the mock's log,
// build the official SDK clients, and stop everything. Every wait is bounded.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { before, after, beforeEach } from 'node:test';

import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

export { OpenAI, Anthropic, sleep };

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const BIN = process.env.AIRETRY_BIN;
if (!BIN) throw new Error('AIRETRY_BIN is not set (tests/e2e/run.sh sets it)');
// The ASan+UBSan build is several times slower: tests give it more time.
export const ASAN = /build-asan/.test(path.resolve(BIN));
// AIRETRY_E2E_SLOW=N (tests/valgrind/run.sh: the gateway under memcheck)
// multiplies every wait here; the tests scale their own timeouts by SLOW.
export const SLOW = Math.max(1, Number(process.env.AIRETRY_E2E_SLOW) || 1);

// A promise resolving to null after ms, on a timer that does not keep the
// process alive.
export function later(ms) {
  return new Promise((resolve) => setTimeout(() => resolve(null), ms).unref());
}

const START_MS = (ASAN ? 20000 : 10000) * SLOW; // a process prints its listening line
const STOP_MS = 10000 * SLOW;                   // SIGTERM to exit, before SIGKILL

/* ---- the canonical answer (docs/mock.md "The answer") --------------------- */

// The mock's answer for model m with n tokens: "[m] w1 w2 ... wn".
export function canonical(m, n = 8) {
  let s = `[${m}]`;
  for (let i = 1; i <= n; i++) s += ` w${i}`;
  return s;
}

/* ---- processes -------------------------------------------------------------- */

// Every process started here is killed when this test process exits, even
// after a failure that skipped the after() hooks.
const live = new Set();
process.on('exit', () => {
  for (const p of live) {
    try {
      p.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
});

// Spawns BIN with args and waits (bounded) for `listening on http://H:P` on
// stdout. stderr is kept (the gateway's JSON log lines, ASan reports).
async function startProcess(name, args, env) {
  const proc = spawn(BIN, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  const p = {
    name,
    proc,
    pid: proc.pid,
    stdout: '',
    stderr: '',
    exited: null,
    exitPromise: null,
  };
  live.add(proc);
  p.exitPromise = new Promise((resolve) => {
    proc.on('exit', (code, signal) => {
      live.delete(proc);
      p.exited = { code, signal };
      resolve(p.exited);
    });
  });
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (d) => {
    p.stderr += d;
    if (p.stderr.length > 8 << 20) p.stderr = p.stderr.slice(-(4 << 20));
  });
  proc.stdout.setEncoding('utf8');
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`${name}: no listening line within ${START_MS} ms\n${p.stderr}`));
    }, START_MS);
    proc.stdout.on('data', (d) => {
      p.stdout += d;
      const m = /listening on (http:\/\/[^\s]+)/.exec(p.stdout);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code ?? signal}) before listening\n${p.stderr}`));
    });
  });
  p.url = url;
  p.port = Number(new URL(url).port);
  return p;
}

// SIGTERM, then wait up to ms; SIGKILL after that. Resolves {code, signal,
// killed}. Never throws.
async function stopProcess(p, ms = STOP_MS) {
  if (p.exited) return { ...p.exited, killed: false };
  try {
    p.proc.kill('SIGTERM');
  } catch {
    /* already gone */
  }
  const res = await Promise.race([p.exitPromise, later(ms)]);
  if (res) return { ...res, killed: false };
  try {
    p.proc.kill('SIGKILL');
  } catch {
    /* already gone */
  }
  const r2 = await Promise.race([p.exitPromise, later(2000)]);
  return { ...(r2 || { code: null, signal: 'SIGKILL' }), killed: true };
}

/* ---- the mock ---------------------------------------------------------------- */

export async function startMock(scriptName) {
  const args = ['mock', '--listen', '127.0.0.1:0'];
  if (scriptName) args.push('--script', path.join(HERE, 'scripts', scriptName));
  const p = await startProcess('mock', args, {});
  const m = {
    p,
    url: p.url,
    port: p.port,
    pid: p.pid,
    get exited() {
      return p.exited;
    },
    // The log of every attempt since the last reset (docs/mock.md "The log").
    async log() {
      const r = await request(p.url + '/__mock/log', { method: 'GET' });
      if (r.status !== 200) throw new Error(`/__mock/log: ${r.status}`);
      return JSON.parse(r.body).attempts;
    },
    // The attempts of one model name.
    async attempts(model) {
      return (await m.log()).filter((a) => a.model === model);
    },
    // Resets and returns the local times around the reset: the mock's clock
    // 0 lies in [sent, received] (performance.now() values).
    async reset() {
      const sent = performance.now();
      const r = await request(p.url + '/__mock/reset', { method: 'POST' });
      const received = performance.now();
      if (r.status !== 204 && r.status !== 200) throw new Error(`/__mock/reset: ${r.status}`);
      return { sent, received };
    },
    stop: (ms) => stopProcess(p, ms),
  };
  return m;
}

/* ---- the gateway --------------------------------------------------------------- */

// A gateway config (an object written as JSON, which is YAML) with the mock
// as both providers: `mo` speaks OpenAI, `ma` Anthropic.
export function gatewayConfig(mockPort, extra = {}) {
  return {
    providers: [
      { name: 'mo', api: 'openai', base_url: `http://127.0.0.1:${mockPort}/v1` },
      { name: 'ma', api: 'anthropic', base_url: `http://127.0.0.1:${mockPort}` },
    ],
    routes: [],
    ...extra,
  };
}

// Config files live in one temporary folder per test process, removed at exit.
let tmpDir = null;
let cfgSeq = 0;
export function tempFile(name, text) {
  if (!tmpDir) {
    tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'airetry-e2e-'));
    process.on('exit', () => fs.rmSync(tmpDir, { recursive: true, force: true }));
  }
  const f = path.join(tmpDir, `${++cfgSeq}-${name}`);
  fs.writeFileSync(f, text);
  return f;
}

export async function startGateway(config, { env = {}, workers = 2 } = {}) {
  const file = tempFile('gateway.yaml', JSON.stringify(config, null, 1));
  const p = await startProcess(
    'gateway',
    ['serve', '--config', file, '--listen', '127.0.0.1:0', '--workers', String(workers)],
    env,
  );
  const g = {
    p,
    url: p.url,
    port: p.port,
    pid: p.pid,
    get exited() {
      return p.exited;
    },
    file,
    // Rewrites the config file (for SIGHUP).
    writeConfig(obj) {
      fs.writeFileSync(file, typeof obj === 'string' ? obj : JSON.stringify(obj, null, 1));
    },
    // The JSON log lines on stderr so far.
    logLines() {
      const out = [];
      for (const line of p.stderr.split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          out.push(JSON.parse(line));
        } catch {
          /* a partial line */
        }
      }
      return out;
    },
    // Waits (bounded) for a log line with this request id.
    async logFor(rid, ms = 3000 * SLOW) {
      const end = Date.now() + ms;
      for (;;) {
        const l = g.logLines().find((x) => x.request_id === rid);
        if (l || Date.now() > end) return l;
        await sleep(20);
      }
    },
    // Resident memory of the gateway in kB (/proc/PID/status VmRSS).
    rssKb() {
      const s = fs.readFileSync(`/proc/${p.pid}/status`, 'utf8');
      const m = /VmRSS:\s+(\d+)\s+kB/.exec(s);
      return m ? Number(m[1]) : NaN;
    },
    // True while the process exists and is not a zombie.
    alive() {
      try {
        return !/State:\s+Z/.test(fs.readFileSync(`/proc/${p.pid}/status`, 'utf8'));
      } catch {
        return false;
      }
    },
    // The last stderr lines that are not request log lines (diagnostics).
    diag(n = 40) {
      return p.stderr
        .split('\n')
        .filter((l) => l && !l.startsWith('{'))
        .slice(-n)
        .join('\n');
    },
    stop: (ms) => stopProcess(p, ms),
    openai: (opts = {}) =>
      new OpenAI({ baseURL: p.url + '/v1', apiKey: 'test', maxRetries: 0, timeout: 30000 * SLOW, ...opts }),
    anthropic: (opts = {}) =>
      new Anthropic({ baseURL: p.url, apiKey: 'test', maxRetries: 0, timeout: 30000 * SLOW, ...opts }),
  };
  return g;
}

// The defaults of the suites that count attempts: no breaker, and a switch
// to the next target (never a retry of the same one) on the failures the
// mock injects, so a call makes one attempt per target it reaches.
export const SWITCH_DEFAULTS = {
  breaker: { enabled: false },
  rules: [{ on: ['overloaded', 'server_error', 'network'], action: 'switch' }],
};

// For each provider (mo, ma) and answer model m of models ("js@json": the
// model js answering JSON): a route P-BASE-ok to P/m, and a route
// P-BASE-down whose primary P/down answers 503 on every attempt.
export function okAndDownRoutes(models) {
  const routes = [];
  for (const p of ['mo', 'ma']) {
    for (const m of models) {
      const base = m.split('@')[0];
      routes.push({ name: `${p}-${base}-ok`, targets: [`${p}/${m}`] });
      routes.push({ name: `${p}-${base}-down`, targets: [`${p}/down@503`, `${p}/${m}`] });
    }
  }
  return routes;
}

// The hooks of a suite on a mock (scriptName, or its default script) and a
// gateway in front of it (routes, SWITCH_DEFAULTS): both start before the
// first test, set(mock, gw) hands them to the suite, both stop after the
// last test; the mock is reset before each test. Call it at the top of a
// file or inside a describe().
export function mockAndGateway(routes, scriptName, set) {
  let mock;
  let gw;
  before(async () => {
    mock = await startMock(scriptName);
    gw = await startGateway(gatewayConfig(mock.port, { routes, defaults: SWITCH_DEFAULTS }));
    set(mock, gw);
  });
  after(async () => {
    await stopAll(gw, mock);
  });
  beforeEach(async () => {
    await mock.reset();
  });
}

// The mock's attempts since its last reset, counted by key(attempt).
export async function attemptsBy(mock, key) {
  const out = {};
  for (const a of await mock.log()) out[key(a)] = (out[key(a)] || 0) + 1;
  return out;
}

// Runs fn (which makes `calls` SDK calls on route) and checks the gateway's
// log lines for the route grew by exactly `calls` and the mock saw exactly
// `want` attempts per model (every other model: none). Returns fn's value.
export async function exactly(gw, mock, route, calls, want, fn) {
  const before = gw.logLines().filter((l) => l.route === route).length;
  const out = await fn();
  const end = Date.now() + 3000;
  let lines;
  for (;;) {
    lines = gw.logLines().filter((l) => l.route === route).length - before;
    if (lines >= calls || Date.now() > end) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(lines, calls, `gateway requests for ${route}`);
  assert.deepEqual(await attemptsBy(mock, (a) => a.model), want, `mock attempts for ${route}`);
  return out;
}

// Stops the gateway and the mock; returns their exits. For after() hooks.
export async function stopAll(...procs) {
  const res = [];
  for (const p of procs) if (p) res.push(await p.stop());
  return res;
}

// The test that ends every file: both processes exit 0 on SIGTERM (under
// ASan a leak or a sanitizer report makes the exit non-zero).
export async function assertCleanExit(assert, gw, mock) {
  const g = await gw.stop();
  const m = await mock.stop();
  assert.deepEqual(
    { code: g.code, signal: g.signal, killed: g.killed },
    { code: 0, signal: null, killed: false },
    `gateway exit ${JSON.stringify(g)}\n${gw.diag(80)}`,
  );
  assert.deepEqual(
    { code: m.code, signal: m.signal, killed: m.killed },
    { code: 0, signal: null, killed: false },
    `mock exit ${JSON.stringify(m)}\n${mock.p.stderr.slice(-4000)}`,
  );
}

/* ---- raw HTTP -------------------------------------------------------------------- */

// A plain HTTP/1.1 request with node:http (no keep-alive). Resolves
// {status, headers, body}. Bounded by ms.
export function request(url, { method = 'GET', headers = {}, body, ms = 15000 * SLOW } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers, agent: false }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (data += d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: data }));
      res.on('error', reject);
    });
    req.setTimeout(ms, () => req.destroy(new Error(`${method} ${url}: no answer in ${ms} ms`)));
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

// JSON POST; body may be an object or a raw string.
export function postJSON(url, body, headers = {}) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: text,
  });
}

// Writes raw bytes to host:port and collects what comes back until the
// server closes (or ms passes). Resolves {data, closed, ms}.
export function rawExchange(port, bytes, { ms = 5000 * SLOW } = {}) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const sock = net.connect(port, '127.0.0.1');
    let data = '';
    let done = false;
    const finish = (closed) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ data, closed, ms: performance.now() - t0 });
    };
    const timer = setTimeout(() => finish(false), ms);
    sock.setEncoding('latin1');
    sock.on('connect', () => {
      if (bytes) sock.write(bytes);
    });
    sock.on('data', (d) => (data += d));
    sock.on('end', () => finish(true));
    sock.on('close', () => finish(true));
    sock.on('error', () => finish(true));
  });
}

// Status and JSON body of the first response in raw bytes.
export function parseRaw(data) {
  const m = /^HTTP\/1\.1 (\d{3})/.exec(data);
  const i = data.indexOf('\r\n\r\n');
  let body = null;
  if (i >= 0) {
    const rest = data.slice(i + 4);
    try {
      body = JSON.parse(rest);
    } catch {
      body = rest;
    }
  }
  return { status: m ? Number(m[1]) : 0, head: i >= 0 ? data.slice(0, i) : data, body };
}

/* ---- SDK helpers ------------------------------------------------------------------- */

// Collects an OpenAI SDK stream: text, chunks, usage chunk, finish reason.
export async function collectOpenAI(stream) {
  const out = { text: '', chunks: [], usage: null, finish: null, model: null, tools: {} };
  for await (const c of stream) {
    out.chunks.push(c);
    if (c.model) out.model = c.model;
    if (c.usage) out.usage = c.usage;
    for (const ch of c.choices || []) {
      if (ch.delta?.content) out.text += ch.delta.content;
      if (ch.finish_reason) out.finish = ch.finish_reason;
      for (const tc of ch.delta?.tool_calls || []) {
        const t = (out.tools[tc.index] ||= { id: '', name: '', args: '' });
        if (tc.id) t.id = tc.id;
        if (tc.function?.name) t.name += tc.function.name;
        if (tc.function?.arguments) t.args += tc.function.arguments;
      }
    }
  }
  return out;
}

// Collects an Anthropic SDK raw event stream.
export async function collectAnthropic(stream) {
  const out = { text: '', events: [], usage: {}, stop: null, model: null, tools: {} };
  for await (const e of stream) {
    out.events.push(e);
    if (e.type === 'message_start') {
      out.model = e.message.model;
      Object.assign(out.usage, e.message.usage || {});
    } else if (e.type === 'content_block_start' && e.content_block.type === 'tool_use') {
      out.tools[e.index] = { id: e.content_block.id, name: e.content_block.name, args: '' };
    } else if (e.type === 'content_block_delta') {
      if (e.delta.type === 'text_delta') out.text += e.delta.text;
      if (e.delta.type === 'input_json_delta') out.tools[e.index].args += e.delta.partial_json;
    } else if (e.type === 'message_delta') {
      out.stop = e.delta.stop_reason;
      Object.assign(out.usage, e.usage || {});
    }
  }
  return out;
}

// The `attempts` array of an SDK error (OpenAI: inside `error`; Anthropic:
// at the top level of the body).
export function errAttempts(err) {
  const e = err?.error;
  return e?.attempts ?? e?.error?.attempts ?? null;
}

// Runs fn and returns what it threw (fails when it did not throw).
export async function thrown(fn) {
  try {
    const v = await fn();
    return { didNotThrow: true, value: v };
  } catch (e) {
    return e;
  }
}

/* ---- a capturing fake upstream (for tool calls the mock cannot answer) --------------- */

// A tiny upstream on 127.0.0.1 that records each request body and answers
// with the bytes handler(req, body) returns: {status, headers, chunks[]}.
export async function startCapture(handler) {
  const seen = [];
  const server = http.createServer((req, res) => {
    let data = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (data += d));
    req.on('end', async () => {
      let body = null;
      try {
        body = JSON.parse(data);
      } catch {
        body = data;
      }
      seen.push({ url: req.url, headers: req.headers, body });
      const a = handler(req, body);
      res.writeHead(a.status || 200, a.headers || { 'content-type': 'text/event-stream' });
      for (const c of a.chunks) res.write(c);
      res.end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    seen,
    stop: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
