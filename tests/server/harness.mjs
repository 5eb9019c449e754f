// Starts the built `hayate serve` (HAYATE_BIN) on a free loopback port
// (--port 0; the server prints the port it bound), waits for /health, and
// stops it with a signal. The official openai client comes from
// tests/oracle/node_modules (ESM ignores NODE_PATH, so it is required from there).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import { createRequire } from 'node:module';
import { after } from 'node:test';

const oracleRequire = createRequire(new URL('../oracle/package.json', import.meta.url));
export const OpenAI = oracleRequire('openai');

const BIN = process.env.HAYATE_BIN;
if (!BIN) throw new Error('HAYATE_BIN must name the hayate binary');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Servers still running 20 s after a file's tests end (a failed assertion
// skipped their stop()) are killed, so a failure reports promptly instead of
// holding the test process open until ctest's timeout. The timer is unref'd:
// it never delays an exit, and the files' own after() hooks stop their
// servers first.
const live = new Set();
after(() => {
  setTimeout(() => { for (const p of live) p.kill('SIGKILL'); }, 20000).unref();
});

// Options: args (extra CLI flags), ready (wait for /health 200; default true),
// timeoutMs (startup bound), argv (replaces the default
// `--model dummy:tiny --backend cpu`), env (added to the environment).
export async function startServer({ args = [], ready = true, timeoutMs = 90000,
  argv = ['--model', 'dummy:tiny', '--backend', 'cpu'], env = {} } = {}) {
  const proc = spawn(BIN, ['serve', ...argv, '--host', '127.0.0.1', '--port', '0', ...args],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const out = [];
  live.add(proc);
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => {
    live.delete(proc);
    resolve({ code, signal });
  }));
  let stdout = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${stdout}`)), timeoutMs);
    proc.stdout.on('data', (d) => {
      stdout += d;
      out.push(String(d));
      const m = /listening on (http:\/\/[0-9.]+:\d+)/.exec(stdout);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    proc.stderr.on('data', (d) => out.push(String(d)));
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}: ${out.join('')}`)); });
  });
  const server = {
    url,
    base: `${url}/v1`,
    proc,
    exited,
    output: () => out.join(''),
    // Sends `signal` and resolves to {code, signal, ms} once the process exits.
    async stop(signal = 'SIGTERM') {
      const t0 = Date.now();
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const r = await exited;
      return { ...r, ms: Date.now() - t0 };
    },
    client(opts = {}) {
      return new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000, ...opts });
    },
  };
  if (ready) await waitHealthy(url, timeoutMs);
  return server;
}

export async function waitHealthy(url, timeoutMs = 90000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const r = await fetch(`${url}/health`);
      if (r.status === 200) return;
    } catch { /* not accepting yet */ }
    await sleep(50);
  }
  throw new Error(`${url}/health did not turn 200`);
}

// POSTs a JSON (or raw string) body; returns {status, headers, json, text}.
export async function post(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, headers: r.headers, json, text };
}

// Reads /metrics into {name{labels} -> value}, and also under the key
// without the model_name label every series carries ({name -> value} for a
// series with no other label, name{rest} otherwise).
export async function metrics(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    const key = line.slice(0, i);
    const value = Number(line.slice(i + 1));
    m[key] = value;
    m[key.replace(/model_name="(?:[^"\\]|\\.)*",?/, '').replace('{}', '')] = value;
  }
  return m;
}

// Asserts the OpenAI error shape and returns the inner error.
export function errorOf(res, assert, status) {
  assert.equal(res.status, status, res.text);
  assert.ok(res.json && typeof res.json.error === 'object', `not an error body: ${res.text}`);
  const e = res.json.error;
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0);
  assert.equal(typeof e.type, 'string');
  assert.ok('param' in e && 'code' in e, `param/code missing: ${res.text}`);
  return e;
}

// ---- raw HTTP over one loopback socket, for what fetch cannot send

export function hostPort(url) {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
}

// Sends `chunks` (strings or Buffers, written in order) on one connection and
// collects what comes back until the server closes, `untilText` appears, or
// timeoutMs. Resolves {text, closed, error, ms}.
export function raw(url, chunks, { timeoutMs = 10000, untilText = null, gapMs = 0 } = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const sock = net.connect(hostPort(url));
    let text = '';
    let error = null;
    let done = false;
    const finish = (closed) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ text, closed, error, ms: Date.now() - t0 });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    sock.on('data', (d) => {
      text += d.toString('latin1');
      if (untilText && text.includes(untilText)) finish(false);
    });
    sock.on('error', (e) => { error = e.code || String(e); });
    sock.on('close', () => finish(true));
    sock.on('connect', async () => {
      for (const c of chunks) {
        if (done || sock.destroyed) return;
        if (!sock.write(c)) await new Promise((r) => sock.once('drain', r).once('close', r));
        if (gapMs) await sleep(gapMs);
      }
    });
  });
}

export function status(text) {
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
  return m ? Number(m[1]) : 0;
}

export function procStatus(pid, field) {
  const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(s);
  return Number(m[1]);
}

export const rssMB = (pid) => procStatus(pid, 'VmRSS') / 1024;

export function head(method, path, headers = {}, version = '1.1') {
  let h = `${method} ${path} HTTP/${version}\r\nHost: 127.0.0.1\r\n`;
  for (const [k, v] of Object.entries(headers)) h += `${k}: ${v}\r\n`;
  return h + '\r\n';
}

export { sleep };
