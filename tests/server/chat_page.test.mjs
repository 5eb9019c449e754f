// The chat page at GET / in headless Chromium (Debian's chromium, driven over
// the DevTools protocol): it loads and shows the model's name, sends a
// message with its sampling settings and shows the streamed reply (the same
// text as the API gives for that request), and stops a long reply on request
// (the server sees the client go away and aborts the generation).
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { startServer, post, metrics, sleep } from './harness.mjs';

const WebSocket = createRequire(new URL('../oracle/package.json', import.meta.url))('ws');
const CHROMIUM = process.env.HAYATE_CHROMIUM || 'chromium';

// Starts headless Chromium on `url`; returns {evaluate, close}.
async function browse(url) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'hayate-chromium-'));
  const proc = spawn(CHROMIUM, ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
    '--disable-dev-shm-usage', `--user-data-dir=${profile}`, '--remote-debugging-port=0',
    'about:blank'], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let err = '';
  const browserWs = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`chromium did not start: ${err}`)), 30000);
    proc.stderr.on('data', (d) => {
      err += d;
      const m = /DevTools listening on (ws:\/\/\S+)/.exec(err);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`chromium exited ${code}: ${err}`)); });
  });
  const host = new URL(browserWs).host;
  const target = await (await fetch(`http://${host}/json/new?${url}`, { method: 'PUT' })).json();
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  let next = 0;
  const waiting = new Map();
  ws.on('message', (data) => {
    const msg = JSON.parse(String(data));
    if (msg.id !== undefined && waiting.has(msg.id)) {
      waiting.get(msg.id)(msg);
      waiting.delete(msg.id);
    }
  });
  const call = (method, params = {}) => new Promise((resolve) => {
    const id = ++next;
    waiting.set(id, resolve);
    ws.send(JSON.stringify({ id, method, params }));
  });
  const evaluate = async (expression) => {
    const r = await call('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true });
    if (r.result.exceptionDetails) throw new Error(`${expression}: ${JSON.stringify(r.result.exceptionDetails)}`);
    return r.result.result.value;
  };
  return {
    evaluate,
    async waitFor(expression, timeoutMs = 30000) {
      const deadline = Date.now() + timeoutMs;
      for (let last = null; ; ) {
        try {
          const v = await evaluate(expression);
          if (v) return v;
        } catch (e) {
          last = e;  // the page may still be loading
        }
        if (Date.now() > deadline) throw last || new Error(`timed out waiting for ${expression}`);
        await sleep(50);
      }
    },
    async close() {
      ws.close();
      // Chromium's helper processes share its process group and may still be
      // writing the profile when the browser itself has exited.
      const exited = proc.exitCode !== null ? Promise.resolve() : new Promise((r) => proc.once('exit', r));
      try { process.kill(-proc.pid, 'SIGKILL'); } catch { proc.kill('SIGKILL'); }
      await exited;
      fs.rmSync(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
    },
  };
}

test('chat page: loads, streams a reply, stops on request', { timeout: 120000 }, async () => {
  const srv = await startServer();
  const page = await browse(`${srv.url}/`);
  try {
    const lastReply = 'document.querySelector("#messages .assistant:last-child")?.textContent ?? ""';
    await page.waitFor('document.getElementById("model").textContent === "dummy:tiny"');

    // A short greedy reply: the page shows what the API answers to the same request.
    await page.evaluate(`(() => {
      document.getElementById("temperature").value = "0";
      document.getElementById("max_tokens").value = "6";
      document.getElementById("input").value = "Hello there";
      document.getElementById("send").click();
    })()`);
    await page.waitFor('document.getElementById("status").textContent.startsWith("done")');
    const shown = await page.evaluate(lastReply);
    const api = await post(`${srv.base}/chat/completions`, {
      model: 'dummy:tiny', messages: [{ role: 'user', content: 'Hello there' }], temperature: 0,
      top_p: 1, max_tokens: 6 });
    assert.ok(shown.length > 0);
    assert.equal(shown, api.json.choices[0].message.content);
    assert.equal(await page.evaluate('document.getElementById("status").textContent'), 'done (length)');

    // A long reply, stopped once text has streamed in.
    await page.evaluate(`(() => {
      document.getElementById("max_tokens").value = "3000";
      document.getElementById("input").value = "Tell me a long story";
      document.getElementById("send").click();
    })()`);
    await page.waitFor(`(${lastReply}).length > 10 && document.getElementById("status").textContent === "generating"`);
    await page.evaluate('document.getElementById("stop").click()');
    await page.waitFor('document.getElementById("status").textContent === "stopped"');
    const atStop = await page.evaluate(lastReply);
    await sleep(500);
    assert.equal(await page.evaluate(lastReply), atStop, 'text kept growing after stop');
    assert.equal(await page.evaluate('document.getElementById("send").disabled'), false);
    let m = {};
    for (let i = 0; i < 50; ++i) {
      m = await metrics(srv.url);
      if (m['hayate:num_requests_running'] === 0 && m['hayate:client_disconnects_total'] >= 1) break;
      await sleep(100);
    }
    assert.equal(m['hayate:num_requests_running'], 0, 'the stopped reply kept generating');
    assert.ok(m['hayate:request_success_total{finished_reason="abort"}'] >= 1);
  } finally {
    await page.close();
  }
  assert.equal((await srv.stop()).code, 0);
});
