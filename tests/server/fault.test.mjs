// Load and faults together, against a server started with --api-key: many
// concurrent streams with a quarter of the clients leaving mid-stream, body
// and header bombs with and without the key, clients dribbling their heads.
// Two such rounds: after each the pool is idle, and the second adds less than
// 100 MB of resident memory to the first's; a fresh request succeeds; then
// SIGTERM while busy keep-alive clients and streams are connected exits
// within the grace period + 3 s
// (finishing the streams would take far longer; the slack is for a loaded
// 2-core machine under ASan).
// (ctest runs this with a small ASan quarantine, so freed memory is returned.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import { startServer, metrics, sleep, raw, head, status, rssMB } from './harness.mjs';

const KEY = 'sk-fault';
const AUTH = { Authorization: `Bearer ${KEY}` };
const STREAMS = 64;
const RSS_BOUND_MB = 100;

async function stream(base, i, leave) {
  const ctrl = new AbortController();
  const r = await fetch(`${base}/completions`, {
    method: 'POST', signal: ctrl.signal,
    headers: { 'Content-Type': 'application/json', ...AUTH },
    body: JSON.stringify({ prompt: `client ${i} says`, max_tokens: leave ? 400 : 12,
      ignore_eos: true, temperature: 1, seed: i, stream: true }),
  });
  assert.equal(r.status, 200);
  const reader = r.body.getReader();
  let text = '';
  const dec = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
    if (leave && text.includes('\n\n')) {
      ctrl.abort();
      return 'left';
    }
  }
  assert.match(text, /data: \[DONE\]\n\n$/);
  return 'done';
}

async function bombs(url) {
  const gz = zlib.gzipSync(Buffer.alloc(100 << 20, 0x20), { level: 9 });
  const piece = 'a'.repeat(64 << 10);
  const chunked = [head('POST', '/tokenize', { 'Transfer-Encoding': 'chunked' })];
  for (let i = 0; i < 300; ++i) chunked.push(`10000\r\n${piece}\r\n`);
  const hdrs = [];
  for (let i = 0; i < 100000; ++i) hdrs.push(`X-${i}: v\r\n`);
  const cases = [
    // Without the key a /v1/ body is never read: 401 and the connection closes.
    ['gzip, no key', [head('POST', '/v1/completions', { 'Content-Encoding': 'gzip',
      'Content-Length': gz.length }), gz], [401]],
    ['gzip, key', [head('POST', '/v1/completions', { 'Content-Encoding': 'gzip',
      'Content-Length': gz.length, ...AUTH }), gz], [413]],
    ['gzip /tokenize', [head('POST', '/tokenize', { 'Content-Encoding': 'gzip',
      'Content-Length': gz.length }), gz], [413]],
    ['chunked 19 MB', chunked, [413]],
    ['100k headers', ['GET /health HTTP/1.1\r\n', hdrs.join(''), '\r\n'], [431, 0]],
    ['declared 1 TB', [head('POST', '/v1/chat/completions', { 'Content-Length': 1e12, ...AUTH })], [413]],
  ];
  for (const [name, chunks, want] of cases) {
    const r = await raw(url, chunks, { timeoutMs: 15000 });
    assert.ok(want.includes(status(r.text)), `${name}: ${status(r.text)} ${r.text.slice(0, 200)}`);
    assert.ok(r.closed, `${name}: the connection must close`);
  }
  // Four clients dribbling a head byte every 300 ms are cut off at 1 s.
  const slow = [...'POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: yes\r\n\r\n'];
  const cut = await Promise.all([0, 1, 2, 3].map(() => raw(url, slow, { gapMs: 300, timeoutMs: 10000 })));
  for (const c of cut) assert.ok(c.closed && c.ms < 4000, `slow head held ${c.ms} ms`);
}

test('load and faults with --api-key: pool idle, memory bounded, fresh request works, SIGTERM prompt', { timeout: 240000 }, async () => {
  const grace = 1;
  const srv = await startServer({ args: ['--api-key', KEY, '--max-num-seqs', '32',
    '--request-head-timeout', '1', '--shutdown-grace', String(grace)] });
  const pid = srv.proc.pid;

  // One round: STREAMS concurrent streams (a quarter of the clients leave),
  // the bombs, then the pool must drain to idle.
  const round = async () => {
    const results = await Promise.all(Array.from({ length: STREAMS }, (_, i) =>
      stream(srv.base, i, i % 4 === 0)));
    assert.equal(results.filter((r) => r === 'left').length, STREAMS / 4);
    await bombs(srv.url);
    let m;
    for (let i = 0; i < 200; ++i) {
      m = await metrics(srv.url);
      if (m['hayate:num_requests_running'] === 0 && m['hayate:num_requests_waiting'] === 0 &&
          m['hayate:kv_cache_blocks_used'] === 0) break;
      await sleep(50);
    }
    assert.equal(m['hayate:num_requests_running'], 0);
    assert.equal(m['hayate:num_requests_waiting'], 0);
    assert.equal(m['hayate:kv_cache_blocks_used'], 0);
    // The clients' idle keep-alive connections hold server threads (and under
    // ASan each thread's allocator cache and fake stack) until the server ends
    // them after 2 s idle: read the memory after that.
    await sleep(2500);
    return rssMB(pid);
  };
  // The first round is the warm-up: the allocator's high-water mark of 64
  // concurrent streams. What a second, identical round adds is what the
  // server keeps per round.
  const before = await round();
  const after = await round();
  console.log(`fault: RSS ${before.toFixed(0)} MB after a first round, ${after.toFixed(0)} MB ` +
              `after a second (${STREAMS} streams and the bombs each; bound +${RSS_BOUND_MB} MB)`);
  assert.ok(after - before < RSS_BOUND_MB, `RSS ${before.toFixed(0)} -> ${after.toFixed(0)} MB`);

  const fresh = await fetch(`${srv.base}/completions`, { method: 'POST',
    headers: { 'Content-Type': 'application/json', ...AUTH },
    body: JSON.stringify({ prompt: 'fresh', max_tokens: 3 }) });
  assert.equal(fresh.status, 200);
  assert.equal((await fresh.json()).usage.completion_tokens, 3);

  // SIGTERM with four keep-alive clients sending a request every 50 ms and
  // four streams that outlive the grace period.
  const busy = [0, 1, 2, 3].map(() => {
    const chunks = [];
    for (let i = 0; i < 600; ++i) chunks.push(head('GET', '/health'));
    return raw(srv.url, chunks, { gapMs: 50, timeoutMs: 40000 });
  });
  const long = [0, 1, 2, 3].map(async (i) => {
    const r = await fetch(`${srv.base}/completions`, { method: 'POST',
      headers: { 'Content-Type': 'application/json', ...AUTH },
      body: JSON.stringify({ prompt: `long ${i}`, max_tokens: 4000, ignore_eos: true, stream: true }) });
    return r.text();
  });
  await sleep(500);
  const stopped = await srv.stop('SIGTERM');
  console.log(`fault: SIGTERM with 4 busy keep-alive clients and 4 streams: exit after ${stopped.ms} ms (grace ${grace} s)`);
  assert.equal(stopped.code, 0);
  assert.ok(stopped.ms <= grace * 1000 + 3000, `exit took ${stopped.ms} ms`);
  for (const b of await Promise.all(busy)) assert.ok(b.closed);
  for (const t of await Promise.all(long)) assert.match(t, /"finish_reason":"abort"/);
});
