// Raw HTTP: SSE framing as curl sees it, every error status of the issue
// (400, 401, 404, 413, 503 + Retry-After), /health, /metrics, and input that
// must neither crash nor wedge the server (garbage bodies, half-sent requests).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import net from 'node:net';
import { promisify } from 'node:util';
import { startServer, post, metrics, errorOf, sleep, raw, head, status } from './harness.mjs';

const run = promisify(execFile);
let srv;

before(async () => {
  // A small body limit so 413 is cheap to provoke; an API key for 401.
  srv = await startServer({ args: ['--api-key', 'sekrit', '--max-body-bytes', '65536'] });
});

after(async () => {
  const r = await srv.stop();
  assert.equal(r.code, 0, `exit ${r.code} ${r.signal}\n${srv.output()}`);
});

const AUTH = { Authorization: 'Bearer sekrit' };

test('401 without or with a wrong key; /health and /metrics stay open', async () => {
  const body = { prompt: 'hi', max_tokens: 2 };
  const a = errorOf(await post(`${srv.base}/completions`, body), assert, 401);
  assert.equal(a.code, 'invalid_api_key');
  errorOf(await post(`${srv.base}/completions`, body, { Authorization: 'Bearer nope' }), assert, 401);
  errorOf(await post(`${srv.base}/completions`, body, { Authorization: 'sekrit' }), assert, 401);
  const ok = await post(`${srv.base}/completions`, body, AUTH);
  assert.equal(ok.status, 200, ok.text);
  assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  assert.equal((await fetch(`${srv.url}/metrics`)).status, 200);
});

// A request refused before its body is read has its connection closed after
// the response, and the response says so; a refused request without a body
// keeps its connection (keep-alive).
test('a refusal with an unread body says Connection: close, then closes', async () => {
  const body = JSON.stringify({ prompt: 'hi', max_tokens: 2 });
  const r = await raw(srv.url, [head('POST', '/v1/completions', {
    'Content-Type': 'application/json', 'Content-Length': body.length }) + body],
  { timeoutMs: 5000 });
  assert.equal(status(r.text), 401, r.text.slice(0, 300));
  const headEnd = r.text.indexOf('\r\n\r\n');
  assert.match(r.text.slice(0, headEnd), /\r\nConnection: close\r\n/i, r.text.slice(0, headEnd));
  assert.ok(r.closed, 'the server closes the connection');
  const g = await raw(srv.url, [head('GET', '/v1/models', {})],
    { timeoutMs: 5000, untilText: 'invalid_api_key' });
  assert.equal(status(g.text), 401, g.text.slice(0, 300));
  assert.doesNotMatch(g.text, /\r\nConnection: close\r\n/i);
  assert.ok(!g.closed, 'a body-less refusal keeps the connection');
});

test('curl: SSE framing, content type, [DONE] last', async () => {
  const { stdout } = await run('curl', ['-sS', '-N', '-i', '--max-time', '60',
    '-H', 'Authorization: Bearer sekrit', '-H', 'Content-Type: application/json',
    '-d', JSON.stringify({ prompt: 'Once upon a time', max_tokens: 6, temperature: 0,
      ignore_eos: true, stream: true, stream_options: { include_usage: true } }),
    `${srv.base}/completions`]);
  const split = stdout.indexOf('\r\n\r\n');
  const head = stdout.slice(0, split);
  const body = stdout.slice(split + 4);
  assert.match(head, /^HTTP\/1\.1 200/);
  assert.match(head, /content-type: text\/event-stream/i);
  assert.ok(body.endsWith('data: [DONE]\n\n'), JSON.stringify(body.slice(-40)));
  const events = body.split('\n\n');
  assert.equal(events.pop(), '');
  assert.equal(events.pop(), 'data: [DONE]');
  let text = 0;
  let finish = 0;
  for (const ev of events) {
    assert.match(ev, /^data: \{.*\}$/s, 'each event is one data line of JSON');
    assert.ok(!ev.includes('\n'), 'single-line events');
    const j = JSON.parse(ev.slice(6));
    assert.equal(j.object, 'text_completion');
    if (j.choices.length === 0) {
      assert.equal(j.usage.completion_tokens, 6);
      continue;
    }
    text += 1;
    if (j.choices[0].finish_reason) finish += 1;
  }
  assert.ok(text >= 2);
  assert.equal(finish, 1);
  // The last JSON event is the usage chunk.
  assert.deepEqual(JSON.parse(events.at(-1).slice(6)).choices, []);
});

test('400 for malformed JSON, wrong types, bad values; 404 for paths', async () => {
  const url = `${srv.base}/completions`;
  errorOf(await post(url, '{"prompt": "x", ', AUTH), assert, 400);
  errorOf(await post(url, '[1, 2, 3]', AUTH), assert, 400);
  errorOf(await post(url, '', AUTH), assert, 400);
  const bad = [
    [{ prompt: 'x', temperature: 'hot' }, 'temperature'],
    [{ prompt: 'x', temperature: -0.5 }, 'temperature'],
    [{ prompt: 'x', top_p: 0 }, 'top_p'],
    [{ prompt: 'x', top_k: -2 }, 'top_k'],
    [{ prompt: 'x', min_p: 2 }, 'min_p'],
    [{ prompt: 'x', max_tokens: -1 }, 'max_tokens'],
    [{ prompt: 'x', max_tokens: 1.5 }, 'max_tokens'],
    [{ prompt: 'x', max_tokens: 100000 }, 'max_tokens'],
    [{ prompt: 'x', n: 0 }, 'n'],
    [{ prompt: 'x', stream: 'yes' }, 'stream'],
    [{ prompt: 'x', stream_options: { include_usage: true } }, 'stream_options'],
    [{ prompt: 'x', stop: 7 }, 'stop'],
    [{ prompt: 'x', stop: [''] }, 'stop'],
    [{ prompt: 'x', stop: Array(100).fill('a') }, 'stop'],
    [{ prompt: 'x', stop_token_ids: [-1] }, 'stop_token_ids'],
    [{ prompt: 'x', seed: 'abc' }, 'seed'],
    [{ prompt: [] }, 'prompt'],
    [{ prompt: [-5] }, 'prompt'],
    [{ prompt: [128256] }, 'prompt'],
    [{ prompt: ['a', 5] }, 'prompt'],
    [{ prompt: ['a', []] }, 'prompt'],
    [{ prompt: { text: 'x' } }, 'prompt'],
    [{ max_tokens: 2 }, 'prompt'],
    [{ prompt: 'x', model: 5 }, 'model'],
    [{ prompt: 'x', logprobs: 100 }, 'logprobs'],
    [{ prompt: 'x', logit_bias: { abc: 1 } }, 'logit_bias'],
    [{ prompt: 'x', logit_bias: { 128256: 1 } }, 'logit_bias'],
    [{ prompt: 'x', logit_bias: { '-1': 1 } }, 'logit_bias'],
    [{ prompt: 'x', logit_bias: { 5: 'NaN' } }, 'logit_bias'],
    [{ prompt: 'x', logit_bias: { 5: 101 } }, 'logit_bias'],
    [{ prompt: 'x', logit_bias: [5] }, 'logit_bias'],
    [{ prompt: 'x', min_tokens: -1 }, 'min_tokens'],
    [{ prompt: 'x', max_tokens: 4, min_tokens: 5 }, 'min_tokens'],
    [{ prompt: 'x', include_stop_str_in_output: 'yes' }, 'include_stop_str_in_output'],
    [{ prompt: 'x', ignore_eos: 1 }, 'ignore_eos'],
  ];
  for (const [body, param] of bad) {
    const e = errorOf(await post(url, body, AUTH), assert, 400);
    assert.equal(e.param, param, JSON.stringify(body));
  }
  // 1e999 overflows a double: rejected whether the parser fails or yields inf.
  errorOf(await post(url, '{"prompt": "x", "temperature": 1e999}', AUTH), assert, 400);
  const chat = `${srv.base}/chat/completions`;
  errorOf(await post(chat, { messages: 'hi' }, AUTH), assert, 400);
  errorOf(await post(chat, { messages: [{ content: 'no role' }] }, AUTH), assert, 400);
  errorOf(await post(chat, { messages: [{ role: 'user', content: 5 }] }, AUTH), assert, 400);
  errorOf(await post(chat, { messages: [{ role: 'user', content: 'x' }], echo: true }, AUTH), assert, 400);
  const nf = errorOf(await post(`${srv.base}/nothing`, {}, AUTH), assert, 404);
  assert.equal(nf.code, 'not_found');
  errorOf(await post(`${srv.url}/v2/completions`, {}, AUTH), assert, 404);
  const model = errorOf(await post(url, { model: 'gpt-4', prompt: 'x' }, AUTH), assert, 404);
  assert.equal(model.code, 'model_not_found');
  errorOf(await post(`${srv.url}/detokenize`, { tokens: [1, 'a'] }), assert, 400);
  errorOf(await post(`${srv.url}/detokenize`, { tokens: [99999999] }), assert, 400);
  errorOf(await post(`${srv.url}/tokenize`, { prompt: 5 }), assert, 400);
});

test('413 for a body over --max-body-bytes, and the server still answers', async () => {
  const big = JSON.stringify({ prompt: 'x'.repeat(70000), max_tokens: 1 });
  const e = errorOf(await post(`${srv.base}/completions`, big, AUTH), assert, 413);
  assert.match(e.message, /65536/);
  assert.equal((await fetch(`${srv.url}/health`)).status, 200);
});

test('garbage never crashes or wedges the server', async () => {
  const url = `${srv.base}/completions`;
  const junk = [
    '\u0000\u0001\u0002', '{"prompt":"\\ud800"}', '{"prompt": "x", "max_tokens": 1e308}',
    '{"prompt": "x", "max_tokens": 18446744073709551616}', '{"prompt": "x", "seed": -1, "max_tokens": 1}',
    '['.repeat(5000), '{"a":'.repeat(3000), '{"prompt": [0.5]}', '{"prompt": [[1,2]], "max_tokens": 1}',
    '{"prompt": "x", "stop": [null]}', '{"messages": null}', 'null', 'true', '"str"',
  ];
  for (const body of junk) {
    const r = await post(url, body, AUTH);
    assert.ok([200, 400].includes(r.status), `${body.slice(0, 40)} -> ${r.status} ${r.text}`);
    assert.ok(r.json && (r.json.error || r.json.choices), r.text);
  }
  // A client that sends half a request and stalls, and one that sends
  // nonsense bytes, must not block the others.
  const stall = net.connect(new URL(srv.url).port, '127.0.0.1');
  stall.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"pro');
  const noise = net.connect(new URL(srv.url).port, '127.0.0.1');
  noise.write('\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http at all\r\n\r\n');
  await sleep(100);
  const ok = await post(url, { prompt: 'still alive', max_tokens: 2 }, AUTH);
  assert.equal(ok.status, 200, ok.text);
  stall.destroy();
  noise.destroy();
  const m = await metrics(srv.url);
  assert.equal(m['hayate:num_requests_in_flight'], 0);
});
