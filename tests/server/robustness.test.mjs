// A client that disconnects mid-stream frees its KV blocks; a full queue
// answers 503 with Retry-After; /health is 503 until the model is ready;
// SIGTERM drains (in-flight streams finish, new connections are refused,
// exit 0) and aborts what outlives the grace period.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer, waitHealthy, post, metrics, errorOf, sleep } from './harness.mjs';

// Opens a stream and resolves once `n` data events have arrived; returns the
// reader so the caller can keep reading or cancel.
async function openStream(url, body, n = 1) {
  const ctrl = new AbortController();
  const r = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }), signal: ctrl.signal });
  assert.equal(r.status, 200);
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let text = '';
  while ((text.match(/\n\n/g) || []).length < n) {
    const { value, done } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
  }
  return { ctrl, reader, text, async rest() {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return text;
      text += dec.decode(value, { stream: true });
    }
  } };
}

async function until(cond, ms = 20000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await cond()) return true;
    await sleep(25);
  }
  return false;
}

test('health is 503 while loading; disconnect frees KV blocks; full queue gives 503', async () => {
  const srv = await startServer({ ready: false, args: ['--max-num-seqs', '2', '--max-queued', '1'] });
  // The listener is up before the model: the first answers are 503 or 200
  // (a fast load), never a refused connection.
  const first = await fetch(`${srv.url}/health`);
  assert.ok([200, 503].includes(first.status));
  if (first.status === 503) errorOf({ status: 503, json: await first.json(), text: '' }, assert, 503);
  await waitHealthy(srv.url);

  const url = `${srv.base}/completions`;
  const long = { prompt: 'Tell me a long story', max_tokens: 3000, ignore_eos: true, temperature: 0 };
  const a = await openStream(url, long, 2);
  let m = await metrics(srv.url);
  assert.equal(m['hayate:num_requests_running'], 1);
  assert.ok(m['hayate:kv_cache_blocks_used'] > 0);

  // Capacity is 2 running + 1 queued: two more fit, the fourth is refused.
  // (c waits in the queue, so only its headers arrive.)
  const b = await openStream(url, long, 1);
  const c = await openStream(url, long, 0);
  const full = await post(url, { ...long, max_tokens: 4 });
  const e = errorOf(full, assert, 503);
  assert.equal(e.code, 'queue_full');
  assert.equal(full.headers.get('retry-after'), '1');

  // Clients vanish mid-stream: the engine aborts them and the blocks return.
  for (const s of [a, b, c]) s.ctrl.abort();
  assert.ok(await until(async () => {
    m = await metrics(srv.url);
    return m['hayate:kv_cache_blocks_used'] === 0 && m['hayate:num_requests_in_flight'] === 0;
  }), JSON.stringify(m));
  assert.equal(m['hayate:num_requests_running'], 0);
  assert.ok(m['hayate:client_disconnects_total'] >= 3);
  assert.equal(m['hayate:request_success_total{finished_reason="abort"}'], 3);
  assert.equal(m['hayate:request_rejected_queue_full_total'], 1);
  // a and b had tokens; c may get one in the step that frees their slots.
  const ttfts = m['hayate:time_to_first_token_seconds_count'];
  assert.ok(ttfts === 2 || ttfts === 3, `ttft count ${ttfts}`);

  // And the server still serves.
  const ok = await post(url, { prompt: 'after', max_tokens: 2 });
  assert.equal(ok.status, 200, ok.text);
  const r = await srv.stop();
  assert.equal(r.code, 0, srv.output());
});

test('SIGTERM: in-flight stream finishes, new connections refused, exit 0', async () => {
  const srv = await startServer({ args: ['--shutdown-grace', '60', '--keep-alive-timeout', '1'] });
  const url = `${srv.base}/completions`;
  const s = await openStream(url, { prompt: 'Count:', max_tokens: 40, ignore_eos: true }, 2);
  srv.proc.kill('SIGTERM');
  await sleep(200);
  // A new connection is refused (fetch would reuse a kept-alive one).
  await assert.rejects(new Promise((resolve, reject) => {
    const sock = net.connect(Number(new URL(srv.url).port), '127.0.0.1', () => {
      sock.destroy();
      resolve();
    });
    sock.on('error', reject);
  }), /ECONNREFUSED/);
  const text = await s.rest();
  assert.ok(text.endsWith('data: [DONE]\n\n'));
  assert.match(text, /"finish_reason":"length"/);
  const r = await srv.stop();
  assert.equal(r.code, 0, srv.output());
});

test('SIGTERM: a request outliving the grace period is aborted, stream still ends cleanly', async () => {
  const srv = await startServer({ args: ['--shutdown-grace', '0.5', '--keep-alive-timeout', '1'] });
  const url = `${srv.base}/completions`;
  const s = await openStream(url, { prompt: 'Forever:', max_tokens: 4000, ignore_eos: true }, 2);
  const t0 = Date.now();
  srv.proc.kill('SIGTERM');
  const text = await s.rest();
  assert.ok(text.endsWith('data: [DONE]\n\n'));
  assert.match(text, /"finish_reason":"abort"/);
  const r = await srv.stop();
  assert.equal(r.code, 0, srv.output());
  // grace (0.5 s) + one engine step + idle keep-alive (1 s): well under 5 s.
  assert.ok(Date.now() - t0 < 5000, `took ${Date.now() - t0} ms`);
});
