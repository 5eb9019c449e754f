// Load: LOAD_CLIENTS (default 256) concurrent streaming clients on loopback,
// each on its own connection, all started at once. Every request must end
// either as a complete stream (exactly max_tokens tokens of usage, one
// finish_reason, [DONE]) or as a well-formed 503; none may fail otherwise or
// be lost, and the server must be idle afterwards. Bounded in time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startServer, metrics } from './harness.mjs';

const CLIENTS = Number(process.env.LOAD_CLIENTS || 256);
const MAX_TOKENS = 4;

// One streaming request on a fresh connection (agent: false), read to the end.
function streamOnce(port, i) {
  return new Promise((resolve) => {
    const body = JSON.stringify({ prompt: `client ${i} says`, max_tokens: MAX_TOKENS,
      ignore_eos: true, temperature: 0, stream: true, stream_options: { include_usage: true } });
    const req = http.request({ host: '127.0.0.1', port, path: '/v1/completions', method: 'POST',
      agent: false, headers: { 'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text }));
      res.on('error', (e) => resolve({ status: -1, text: String(e) }));
    });
    req.on('error', (e) => resolve({ status: -1, text: String(e) }));
    req.end(body);
  });
}

test(`${CLIENTS} concurrent streaming clients`, { timeout: 240000 }, async () => {
  const srv = await startServer({ args: ['--max-num-seqs', '64', '--max-queued', '4096'] });
  const port = Number(new URL(srv.url).port);
  const t0 = Date.now();
  const results = await Promise.all(Array.from({ length: CLIENTS }, (_, i) => streamOnce(port, i)));
  const seconds = (Date.now() - t0) / 1000;

  let ok = 0;
  let busy = 0;
  const failures = [];
  for (const r of results) {
    if (r.status === 503) {
      const j = JSON.parse(r.text);
      assert.equal(typeof j.error.message, 'string');
      assert.equal(r.headers['retry-after'], '1');
      busy++;
      continue;
    }
    if (r.status !== 200 || !r.text.endsWith('data: [DONE]\n\n')) {
      failures.push(`${r.status}: ${r.text.slice(-200)}`);
      continue;
    }
    const events = r.text.split('\n\n').filter((e) => e && e !== 'data: [DONE]')
      .map((e) => JSON.parse(e.slice(6)));
    const finishes = events.flatMap((e) => e.choices).filter((c) => c.finish_reason);
    const usage = events.at(-1).usage;
    if (finishes.length !== 1 || finishes[0].finish_reason !== 'length' ||
        !usage || usage.completion_tokens !== MAX_TOKENS) {
      failures.push(`bad stream: ${r.text.slice(-300)}`);
      continue;
    }
    ok++;
  }
  assert.deepEqual(failures, []);
  // With a queue this deep, nothing is refused: every request was served.
  assert.equal(ok + busy, CLIENTS);
  assert.equal(busy, 0);
  const m = await metrics(srv.url);
  assert.equal(m['hayate:num_requests_in_flight'], 0);
  assert.equal(m['hayate:kv_cache_blocks_used'], 0);
  assert.equal(m['hayate:request_success_total{finished_reason="length"}'], CLIENTS);
  assert.equal(m['hayate:time_to_first_token_seconds_count'], CLIENTS);
  console.log(`load: ${CLIENTS} streams in ${seconds.toFixed(1)} s`);
  const r = await srv.stop();
  assert.equal(r.code, 0, srv.output());
});

test('overload: a shallow queue answers the excess with well-formed 503s, loses nothing', { timeout: 240000 }, async () => {
  const srv = await startServer({ args: ['--max-num-seqs', '8', '--max-queued', '8'] });
  const port = Number(new URL(srv.url).port);
  const n = Math.min(CLIENTS, 200);
  const results = await Promise.all(Array.from({ length: n }, (_, i) => streamOnce(port, i)));
  let ok = 0;
  let busy = 0;
  for (const r of results) {
    if (r.status === 503) {
      assert.equal(JSON.parse(r.text).error.code, 'queue_full');
      busy++;
    } else {
      assert.equal(r.status, 200, r.text);
      assert.ok(r.text.endsWith('data: [DONE]\n\n'));
      ok++;
    }
  }
  assert.equal(ok + busy, n);
  assert.ok(ok >= 16, `served ${ok}`);
  const m = await metrics(srv.url);
  // Every accepted request finished; every refusal was counted.
  assert.equal(m['hayate:request_success_total{finished_reason="length"}'], ok);
  assert.equal(m['hayate:request_rejected_queue_full_total'], busy);
  assert.equal(m['hayate:num_requests_in_flight'], 0);
  const r = await srv.stop();
  assert.equal(r.code, 0, srv.output());
});
