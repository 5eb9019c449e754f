// Hostile HTTP clients, over raw loopback sockets: body, header and length
// bombs get 413/431 without the server's memory growing; pipelined requests
// are all answered; HTTP/1.0 streams are not chunked; clients that dribble
// their head are cut off at the head deadline; SIGTERM exits promptly while
// a keep-alive client keeps the connection busy; a non-streaming request
// whose client leaves is aborted; idle connection threads end.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import zlib from 'node:zlib';
import { spawnSync } from 'node:child_process';
import { startServer, metrics, sleep, raw, head, status, procStatus, rssMB, hostPort } from './harness.mjs';

const KEY = 'sk-hardening';

test('body, header and length bombs: 413/431, memory stays put, no key needed to be refused', { timeout: 120000 }, async () => {
  const srv = await startServer({ args: ['--api-key', KEY] });
  const pid = srv.proc.pid;
  const before = rssMB(pid);

  // 200 MB of spaces, gzip'ed to ~200 KB: the decoded body is over 16 MiB.
  const bomb = zlib.gzipSync(Buffer.alloc(200 << 20, 0x20), { level: 9 });
  for (const path of ['/tokenize', '/v1/completions']) {
    const r = await raw(srv.url, [head('POST', path, {
      'Content-Type': 'application/json', 'Content-Encoding': 'gzip',
      'Content-Length': bomb.length, Authorization: `Bearer ${KEY}` }), bomb]);
    assert.equal(status(r.text), 413, `gzip bomb on ${path}: ${r.text.slice(0, 300)}`);
    assert.match(r.text, /request_too_large/);
  }

  // 20 MiB chunked: over the 16 MiB limit without any Content-Length.
  const piece = 'a'.repeat(64 << 10);
  const chunks = [head('POST', '/tokenize', { 'Content-Type': 'application/json',
    'Transfer-Encoding': 'chunked' })];
  for (let i = 0; i < 320; ++i) chunks.push(`${(64 << 10).toString(16)}\r\n${piece}\r\n`);
  chunks.push('0\r\n\r\n');
  const ch = await raw(srv.url, chunks);
  assert.equal(status(ch.text), 413, `chunked: ${ch.text.slice(0, 300)}`);

  // 200,000 headers.
  let many = 'POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\n';
  const hdrs = [];
  for (let i = 0; i < 200000; ++i) hdrs.push(`X-${i}: v\r\n`);
  const hb = await raw(srv.url, [many, hdrs.join(''), 'Content-Length: 2\r\n\r\n{}']);
  // The server answers and closes while the client is still sending; the
  // client may then see a reset instead of the answer.
  if (hb.text) assert.equal(status(hb.text), 431, hb.text.slice(0, 300));
  else assert.ok(hb.closed, 'header bomb: the connection must be closed');

  // One header line of 4 MB without an end.
  const long = await raw(srv.url, ['GET /health HTTP/1.1\r\nX-Long: ', 'y'.repeat(4 << 20)]);
  if (long.text) assert.equal(status(long.text), 431, long.text.slice(0, 300));
  else assert.ok(long.closed);

  // A declared length far over the limit is refused before any body byte,
  // and the connection closes (the body is never read).
  const cl = await raw(srv.url, [head('POST', '/tokenize', { 'Content-Length': 1e12 })],
    { timeoutMs: 5000 });
  assert.equal(status(cl.text), 413, cl.text.slice(0, 300));
  assert.ok(cl.closed && cl.ms < 4000, `closed ${cl.closed} after ${cl.ms} ms`);

  // Unsupported encodings are 415 in OpenAI's error shape.
  const enc = await raw(srv.url, [head('POST', '/tokenize', { 'Content-Encoding': 'zstd',
    'Content-Length': 2 }) + '{}']);
  assert.equal(status(enc.text), 415, enc.text.slice(0, 300));
  assert.match(enc.text, /unsupported Content-Encoding 'zstd'/);

  await sleep(500);
  const after = rssMB(pid);
  assert.ok(after - before < 100, `RSS ${before.toFixed(0)} MB -> ${after.toFixed(0)} MB`);
  console.log(`bombs: RSS ${before.toFixed(0)} MB before, ${after.toFixed(0)} MB after`);

  const ok = await fetch(`${srv.url}/tokenize`, { method: 'POST', body: '{"prompt": "hi"}',
    headers: { 'Content-Type': 'application/json' } });
  assert.equal(ok.status, 200);
  assert.equal((await srv.stop()).code, 0);
});

test('pipelined requests are all answered; HTTP/1.0 streams are not chunked', { timeout: 60000 }, async () => {
  const srv = await startServer();
  const get = head('GET', '/health');
  const post = head('POST', '/tokenize', { 'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(JSON.stringify({ prompt: 'hi' })) }) +
    JSON.stringify({ prompt: 'hi' });
  const r = await raw(srv.url, [get + post + get + get], { timeoutMs: 3000 });
  assert.equal((r.text.match(/HTTP\/1\.1 200/g) || []).length, 4, r.text);

  const s = JSON.stringify({ prompt: 'hi', max_tokens: 3, stream: true });
  const h10 = await raw(srv.url, [head('POST', '/v1/completions', { 'Content-Type': 'application/json',
    'Content-Length': s.length, Connection: 'Keep-Alive' }, '1.0') + s], { timeoutMs: 10000 });
  assert.equal(status(h10.text), 200, h10.text);
  assert.ok(h10.closed, 'an HTTP/1.0 stream ends with the connection');
  assert.doesNotMatch(h10.text, /Transfer-Encoding: chunked/i);
  assert.match(h10.text, /\r\n\r\ndata: \{/);
  assert.match(h10.text, /data: \[DONE\]\n\n$/);
  assert.equal((await srv.stop()).code, 0);
});

test('clients that dribble their head are cut off; the server stays reachable', { timeout: 60000 }, async () => {
  const srv = await startServer({ args: ['--max-connections', '3', '--request-head-timeout', '1'] });
  // Four clients, one head byte every 250 ms, on a server with three
  // connection threads (one may still hold the harness's keep-alive
  // connection): all threads are taken until the head deadline cuts them off.
  const bytes = [...'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: abcdefghijklmnopqrstuvwxyz\r\n\r\n'];
  const slow = [0, 1, 2, 3].map(() => raw(srv.url, bytes, { gapMs: 250, timeoutMs: 8000 }));
  await sleep(300);
  const fresh = await raw(srv.url, [head('GET', '/health', { Connection: 'close' })], { timeoutMs: 6000 });
  assert.equal(status(fresh.text), 200, `a fresh connection was not served: ${fresh.text}`);
  const results = await Promise.all(slow);
  for (const s of results) {
    assert.ok(s.closed && s.ms < 3500, `slow client held ${s.ms} ms`);
    if (s.text) assert.equal(status(s.text), 408, s.text);
  }
  console.log(`slow heads: a fresh connection was answered after ${fresh.ms} ms`);
  assert.equal((await srv.stop()).code, 0);
});

test('SIGTERM with busy keep-alive clients exits within the grace period + 1 s', { timeout: 60000 }, async () => {
  const grace = 1;
  const srv = await startServer({ args: ['--shutdown-grace', String(grace)] });
  // Four clients, each sending a request every 50 ms on one connection.
  const busy = [0, 1, 2, 3].map(() => {
    const chunks = [];
    for (let i = 0; i < 400; ++i) chunks.push(head('GET', '/health'));
    return raw(srv.url, chunks, { gapMs: 50, timeoutMs: 30000 });
  });
  await sleep(500);
  const stopped = await srv.stop('SIGTERM');
  console.log(`SIGTERM with busy keep-alive clients: exit after ${stopped.ms} ms (grace ${grace} s)`);
  assert.equal(stopped.code, 0);
  assert.ok(stopped.ms <= grace * 1000 + 1000, `exit took ${stopped.ms} ms`);
  for (const b of await Promise.all(busy)) assert.ok(b.closed);
});

test('a non-streaming request whose client disconnects is aborted', { timeout: 60000 }, async () => {
  const srv = await startServer();
  const body = JSON.stringify({ prompt: 'hello', max_tokens: 4000, ignore_eos: true, temperature: 0 });
  const sock = net.connect(hostPort(srv.url));
  sock.on('error', () => {});
  await new Promise((r) => sock.on('connect', r));
  sock.write(head('POST', '/v1/completions', { 'Content-Type': 'application/json',
    'Content-Length': body.length }) + body);
  let running = 0;
  for (let i = 0; i < 200 && running === 0; ++i) {
    await sleep(20);
    running = (await metrics(srv.url))['hayate:num_requests_running'];
  }
  assert.equal(running, 1);
  sock.destroy();
  let m;
  for (let i = 0; i < 100; ++i) {
    await sleep(20);
    m = await metrics(srv.url);
    if (m['hayate:num_requests_running'] === 0) break;
  }
  assert.equal(m['hayate:num_requests_running'], 0, 'the request kept generating');
  assert.equal(m['hayate:kv_cache_blocks_used'], 0);
  assert.equal((await srv.stop()).code, 0);
});

test('idle connection threads end', { timeout: 60000 }, async () => {
  const srv = await startServer();
  const pid = srv.proc.pid;
  const base = procStatus(pid, 'Threads');
  const conns = [];
  for (let i = 0; i < 40; ++i) conns.push(raw(srv.url, [head('GET', '/health', { Connection: 'close' })]));
  await Promise.all(conns);
  const peak = procStatus(pid, 'Threads');
  let now = peak;
  for (let i = 0; i < 40 && now > base + 4; ++i) {
    await sleep(100);
    now = procStatus(pid, 'Threads');
  }
  console.log(`threads: ${base} idle, ${peak} after 40 connections, ${now} 4 s later`);
  assert.ok(now <= base + 4, `threads ${base} -> ${peak} -> ${now}`);
  assert.equal((await srv.stop()).code, 0);
});

test('--port and --max-model-len out of range are refused with a one-line error', () => {
  for (const [flags, message] of [[['--port', '70000'], /--port must be in \[0, 65535\], got 70000/],
    [['--port', '-1'], /--port must be in \[0, 65535\]/],
    [['--port', '0', '--max-context', '100000000'], /--max-model-len must be in \[0, 4096\]/],
    [['--port', '0', '--max-model-len', '-1'], /--max-model-len must be in \[0, 4096\]/]]) {
    const r = spawnSync(process.env.HAYATE_BIN, ['serve', '--model', 'dummy:tiny', '--backend',
      'cpu', ...flags], { encoding: 'utf8', timeout: 60000 });
    assert.equal(r.status, 1, flags.join(' ') + ': ' + r.stdout + r.stderr);
    assert.match(r.stderr, message);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  }
});
