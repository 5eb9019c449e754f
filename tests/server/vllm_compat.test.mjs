// `hayate serve` as vLLM and llama-server users call it: their flag names
// (each alias with its effect checked), the positional model, the API key from
// VLLM_API_KEY, the access log, X-Request-Id, CORS, /metrics under vllm: with
// model_name labels, and the sampling fields vLLM accepts.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { startServer, post, metrics, sleep } from './harness.mjs';

const BIN = process.env.HAYATE_BIN;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hayate-vllm-'));
const json = async (url, init) => (await fetch(url, init)).json();
const models = async (srv, headers = {}) => json(`${srv.base}/models`, { headers });
// A tokenizer folder (for --tokenizer) whose tokenizer_config.json lists named
// chat templates: the committed fixture's default, tool_use and plain, and one
// that raises on more than one message.
const RAISING = "{% if messages|length > 1 %}{{ raise_exception('only one message, please') }}{% endif %}x";
const namedDir = path.join(tmp, 'named');
fs.mkdirSync(namedDir);
fs.symlinkSync(path.resolve('assets/llama3_1/tokenizer.json'), path.join(namedDir, 'tokenizer.json'));
const namedConfig = JSON.parse(fs.readFileSync('tests/tokenizer/data/named_templates_config.json', 'utf8'));
namedConfig.chat_template.push({ name: 'raising', template: RAISING });
fs.writeFileSync(path.join(namedDir, 'tokenizer_config.json'), JSON.stringify(namedConfig));


// Three servers carry the aliases between them (each server start costs
// seconds under ASan): every name of one option on a different server, its
// effect checked on each.
test('vLLM and llama-server names: each alias with its effect', async () => {
  const auth = (k) => ({ Authorization: `Bearer ${k}` });
  const body = { prompt: 'Once upon', max_tokens: 8, temperature: 1.0 };
  const servers = [
    { argv: ['dummy:tiny', '--backend', 'cpu', '--max-model-len', '300', '--served-model-name', 'tiny-a',
      '--max-num-seqs', '1', '--max-queued', '0', '--api-key', 'k1', '--gpu-memory-utilization', '0.5',
      '--dtype', 'auto', '--seed', '5'], len: 300, name: 'tiny-a', key: 'k1' },
    { argv: ['--model', 'dummy:tiny', '--backend', 'cpu', '-c', '200', '--alias', 'tiny-b',
      '--parallel', '1', '--max-queued', '0', '--seed', '5'], env: { VLLM_API_KEY: 'k2' }, len: 200, name: 'tiny-b', key: 'k2' },
    { argv: ['-m', 'dummy:tiny', '--backend', 'cpu', '--ctx-size', '150', '-a', 'tiny-c'], len: 150, name: 'tiny-c', key: null },
    { argv: ['dummy:tiny', '--backend', 'cpu', '--max-context', '120'], len: 120, name: 'dummy:tiny', key: null },
  ];
  const texts = [];
  for (const [i, c] of servers.entries()) {
    const srv = await startServer({ argv: c.argv, env: c.env || {} });
    const headers = c.key ? auth(c.key) : {};
    if (c.key) assert.equal((await fetch(`${srv.base}/models`)).status, 401, `server ${i}: key required`);
    const m = await models(srv, headers);
    assert.equal(m.data[0].max_model_len, c.len, `server ${i}`);
    assert.equal(m.data[0].id, c.name, `server ${i}`);  // default: the model as given, as vLLM
    if (i < 2) {  // --max-num-seqs / --parallel 1 with no queue: a second request is refused
      const long = post(`${srv.base}/completions`, { prompt: 'a', max_tokens: 150, ignore_eos: true }, headers);
      await sleep(300);
      const r = await post(`${srv.base}/completions`, { prompt: 'b', max_tokens: 2 }, headers);
      assert.equal(r.status, 503, `server ${i}`);
      assert.match(r.json.error.message, /at most 1 running \+ 0 queued/);
      assert.equal((await long).status, 200);
      // --seed: unseeded requests draw the same on both servers.
      texts.push((await post(`${srv.base}/completions`, body, headers)).json.choices[0].text);
    }
    if (i === 0) assert.match(srv.output(), /--gpu-memory-utilization has no effect on the cpu backend/);
    assert.equal((await srv.stop()).code, 0);
  }
  assert.equal(texts[0], texts[1]);
});

test('bad values are refused before the port is bound, unknown flags get a suggestion', () => {
  const run = (args) => spawnSync(BIN, ['serve', ...args], { encoding: 'utf8', timeout: 60000 });
  for (const [args, message] of [
    [['--model', 'dummy:tiny', '--dtype', 'float8'], /--dtype: unknown dtype 'float8'/],
    [['--model', 'dummy:tiny', '--backend', 'tpu'], /--backend: unknown backend 'tpu'/],
    [['--model', 'dummy:tiny', '--gpu-memory-utilization', '1.5'], /--gpu-memory-utilization must be in \(0, 1\]/],
    [['--model', 'dummy:tiny', '--log-level', 'loud'], /--log-level: unknown level 'loud'/],
    [['--model', 'dummy:tiny', '--max-num-seqs', '0'], /--max-num-seqs must be >= 1/],
    [['--model', 'dummy:tiny', '--chat-template', '/nonexistent.jinja'], /--chat-template: .* neither a file nor a Jinja template/],
    [['--model', 'dummy:tiny', '--tokenizer', namedDir, '--chat-template', 'nosuch'],
      /--chat-template: 'nosuch' is neither a file nor a Jinja template nor one of the model's templates \(default, plain, raising, tool_use\)/],
    [['--model', 'dummy:tiny', '--generation-config', '/nonexistent'], /--generation-config: no generation_config.json/],
    [['--model', 'dummy:tiny', '--allowed-origins', '[1]'], /--allowed-origins: not a JSON list/],
    [['--backend', 'cpu'], /serve: no model given/],
    [['org/absent-model', '--backend', 'cpu'], /not in the local Hugging Face cache.*hf download org\/absent-model/]]) {
    const r = spawnSync(BIN, ['serve', ...args, '--port', '0'], {
      encoding: 'utf8', timeout: 60000, env: { ...process.env, HF_HUB_CACHE: tmp } });
    assert.equal(r.status, 1, args.join(' ') + ': ' + r.stdout + r.stderr);
    assert.match(r.stderr, message);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.doesNotMatch(r.stdout, /listening on/, 'validated before binding: ' + args.join(' '));
  }
  const r = run(['--model', 'dummy:tiny', '--max-model-lenn', '5']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /unknown option --max-model-lenn \(did you mean --max-model-len\?\)/);
  assert.match(run(['--gpu-memory-utilisation', '0.5']).stderr, /did you mean --gpu-memory-utilization\?/);
});

test('--chat-template and --generation-config', async () => {
  const tpl = path.join(tmp, 'plain.jinja');
  fs.writeFileSync(tpl, '{% for m in messages %}{{ m.content }}{% endfor %}');
  const gen = path.join(tmp, 'gen');
  fs.mkdirSync(gen, { recursive: true });
  fs.writeFileSync(path.join(gen, 'generation_config.json'), JSON.stringify({ max_new_tokens: 3 }));
  const srv = await startServer({ args: ['--chat-template', tpl, '--generation-config', gen] });
  const r = await post(`${srv.base}/chat/completions`, { messages: [{ role: 'user', content: 'hello there' }], temperature: 0 });
  assert.equal(r.status, 200, r.text);
  const plain = await post(`${srv.url}/tokenize`, { prompt: 'hello there', add_special_tokens: false });
  assert.equal(r.json.usage.prompt_tokens, plain.json.count);  // the template adds nothing
  assert.equal(r.json.usage.completion_tokens, 3);             // max_new_tokens of the folder's config
  await srv.stop();
  // An inline template (vLLM accepts either).
  const inline = await startServer({ args: ['--chat-template', 'X{{ messages[0].content }}'] });
  const q = await post(`${inline.base}/chat/completions`, { messages: [{ role: 'user', content: 'hello there' }], max_tokens: 1 });
  const x = await post(`${inline.url}/tokenize`, { prompt: 'Xhello there', add_special_tokens: false });
  assert.equal(q.json.usage.prompt_tokens, x.json.count);
  await inline.stop();
});

// The chat template's inputs as vLLM hands them over (tools, tool calls with
// parsed arguments, tool results, chat_template_kwargs, continue_final_message),
// the same on /v1/chat/completions and /tokenize's chat form, and
// --reasoning-parser qwen3's fields in answers and stream deltas. A request's
// chat_template under --trust-request-chat-template, refused without it;
// --chat-template naming one of the model's templates.
test('chat template fields, /tokenize chat form, --reasoning-parser', async () => {
  const tpl = path.join(tmp, 'fields.jinja');
  fs.writeFileSync(tpl, '{% for m in messages %}[{{ m.role }}:{{ m.content }}' +
    '{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments | tojson }}{% endif %}' +
    '{% if m.tool_call_id %}#{{ m.tool_call_id }}{% endif %}]{% endfor %}' +
    '{% if tools %}{{ tools | tojson }}{% endif %}{{ flag | default("-") }}' +
    '{% if add_generation_prompt %}>{% endif %}');
  const srv = await startServer({ args: ['--chat-template', tpl, '--reasoning-parser', 'qwen3',
    '--trust-request-chat-template', '--tokenizer', namedDir] });
  const messages = [
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function',
      function: { name: 'f', arguments: '{"b": 1, "a": "x"}' } }] },
    { role: 'tool', tool_call_id: 'c1', content: 'ok' }];
  const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }];
  const body = { messages, tools, chat_template_kwargs: { flag: 'F' } };
  const tok = await post(`${srv.url}/tokenize`, body);
  assert.equal(tok.status, 200, tok.text);
  const text = (await post(`${srv.url}/detokenize`, { tokens: tok.json.tokens })).json.prompt;
  assert.equal(text, '[user:hi][assistant:{"b": 1, "a": "x"}][tool:ok#c1]' +
    '[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]F>');
  const chat = await post(`${srv.base}/chat/completions`, { ...body, max_tokens: 2, temperature: 0 });
  assert.equal(chat.status, 200, chat.text);
  assert.equal(chat.json.usage.prompt_tokens, tok.json.count);
  // A random model's answer does not open with <think>: all content, no reasoning.
  assert.equal(chat.json.choices[0].message.reasoning_content, null);
  assert.equal(typeof chat.json.choices[0].message.content, 'string');
  const cont = await post(`${srv.url}/tokenize`, { messages: [...messages.slice(0, 1),
    { role: 'assistant', content: 'Once' }], add_generation_prompt: false, continue_final_message: true });
  assert.equal((await post(`${srv.url}/detokenize`, { tokens: cont.json.tokens })).json.prompt,
    '[user:hi][assistant:Once');
  const both = await post(`${srv.url}/tokenize`, { messages, continue_final_message: true });
  assert.equal(both.status, 400);
  assert.equal(both.json.error.param, 'continue_final_message');
  const badArgs = await post(`${srv.base}/chat/completions`, { messages: [messages[0],
    { role: 'assistant', tool_calls: [{ type: 'function', function: { name: 'f', arguments: '{' } }] }] });
  assert.equal(badArgs.status, 400);
  assert.match(badArgs.json.error.message, /'arguments' is not valid JSON/);
  // Streamed: the deltas carry content (no reasoning here), then the finish.
  const res = await fetch(`${srv.base}/chat/completions`, { method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [messages[0]], max_tokens: 4, temperature: 0, stream: true }) });
  const sse = await res.text();
  const chunks = sse.split('\n\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
  assert.ok(chunks.every((c) => !('reasoning_content' in (c.choices[0]?.delta ?? {}))));
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
  // Trusted request templates: a template, or the name of one of the model's.
  const detok = async (b) => {
    const t = await post(`${srv.url}/tokenize`, b);
    assert.equal(t.status, 200, t.text);
    return (await post(`${srv.url}/detokenize`, { tokens: t.json.tokens })).json.prompt;
  };
  assert.equal(await detok({ messages, chat_template: 'R{{ messages | length }}{{ tools | length }}', tools }), 'R31');
  assert.equal(await detok({ messages: [messages[0]], chat_template: 'plain' }), 'USER: hi\nASSISTANT:');
  const own = await post(`${srv.base}/chat/completions`, { messages: [messages[0]], chat_template: 'plain', max_tokens: 1 });
  assert.equal(own.status, 200, own.text);
  assert.equal(own.json.usage.prompt_tokens, (await post(`${srv.url}/tokenize`, { prompt: 'USER: hi\nASSISTANT:', add_special_tokens: false })).json.count);
  for (const [b, re] of [[{ chat_template: 5 }, /'chat_template' must be a string/],
    [{ chat_template: '{% for x in y %}' }, /chat template: .*endfor/],
    [{ chat_template: '{% set ns = namespace(x=1) %}{% set ns.x = [ns] %}{{ ns | tojson }}' }, /chat template: .*contains the namespace/]]) {
    const e = await post(`${srv.base}/chat/completions`, { messages, max_tokens: 1, ...b });
    assert.equal(e.status, 400, e.text);
    assert.match(e.json.error.message, re);
  }
  assert.equal((await srv.stop()).code, 0);
  // A template that raises: 400 naming its message.
  const raising = await startServer({ args: ['--chat-template', path.join(tmp, 'raise.jinja')] }).catch((e) => e);
  assert.ok(raising instanceof Error, 'a missing template file is refused');
  // The model's template named by --chat-template; untrusted request templates refused.
  const r2 = await startServer({ args: ['--tokenizer', namedDir, '--chat-template', 'raising'] });
  const bad = await post(`${r2.base}/chat/completions`, { messages: [messages[0], messages[0]], max_tokens: 1 });
  assert.equal(bad.status, 400);
  assert.match(bad.json.error.message, /chat template: .*only one message, please/);
  for (const url of [`${r2.base}/chat/completions`, `${r2.url}/tokenize`]) {
    for (const b of [{ chat_template: 'plain' }, { chat_template_kwargs: { chat_template: 'x' } }]) {
      const e = await post(url, { messages: [messages[0]], max_tokens: 1, ...b });
      assert.equal(e.status, 400, url);
      assert.match(e.json.error.message, /--trust-request-chat-template is not set/);
    }
  }
  assert.equal((await r2.stop()).code, 0);
});

test('access log, X-Request-Id, --enable-log-requests, --log-level', async () => {
  const srv = await startServer({ args: ['--served-model-name', 'tiny-a'] });
  const r = await fetch(`${srv.base}/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Request-Id': 'my-req-1' },
    body: JSON.stringify({ prompt: 'secret prompt text', max_tokens: 5, ignore_eos: true }) });
  assert.equal(r.headers.get('x-request-id'), 'my-req-1');
  const usage = (await r.json()).usage;
  const s = await fetch(`${srv.base}/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, ignore_eos: true, stream: true }) });
  assert.match(s.headers.get('x-request-id'), /^req-[0-9a-f]{32}$/);
  await s.text();
  await sleep(200);
  const log = srv.output();
  const line = log.split('\n').find((l) => l.includes('request_id=my-req-1'));
  assert.ok(line, log);
  assert.match(line, /^INFO \d\d-\d\d \d\d:\d\d:\d\d 127\.0\.0\.1:\d+ "POST \/v1\/completions HTTP\/1\.1" 200 /);
  assert.match(line, new RegExp(`prompt_tokens=${usage.prompt_tokens} completion_tokens=5 ttft_ms=\\d+\\.\\d duration_ms=\\d+\\.\\d`));
  assert.doesNotMatch(log, /secret prompt text/);
  // The stream's line is written when the stream ends, with its tokens.
  assert.match(log, /"POST \/v1\/chat\/completions HTTP\/1\.1" 200 prompt_tokens=\d+ completion_tokens=4 ttft_ms=/);
  await srv.stop();

  const verbose = await startServer({ args: ['--enable-log-requests'] });
  await post(`${verbose.base}/completions`, { prompt: 'secret "prompt"\ntext', max_tokens: 1 });
  await sleep(200);
  assert.match(verbose.output(), /prompt="<\|begin_of_text\|>secret \\"prompt\\"\\ntext"|prompt="secret \\"prompt\\"\\ntext"/);
  await verbose.stop();

  const quiet = await startServer({ args: ['--log-level', 'warning'] });
  await post(`${quiet.base}/completions`, { prompt: 'x', max_tokens: 1 });
  await sleep(200);
  assert.doesNotMatch(quiet.output(), /POST \/v1\/completions/);
  await quiet.stop();
});

test('CORS: preflight answered, origins from --allowed-origins', async () => {
  const srv = await startServer({ args: ['--api-key', 'k'] });
  const pre = await fetch(`${srv.base}/chat/completions`, { method: 'OPTIONS', headers: {
    Origin: 'http://app.example', 'Access-Control-Request-Method': 'POST',
    'Access-Control-Request-Headers': 'authorization,content-type' } });
  assert.equal(pre.status, 200);  // no key needed for a preflight
  assert.equal(pre.headers.get('access-control-allow-origin'), '*');
  assert.match(pre.headers.get('access-control-allow-methods'), /POST/);
  assert.equal(pre.headers.get('access-control-allow-headers'), 'authorization,content-type');
  const get = await fetch(`${srv.base}/models`, { headers: { Origin: 'http://app.example', Authorization: 'Bearer k' } });
  assert.equal(get.headers.get('access-control-allow-origin'), '*');
  const denied = await fetch(`${srv.base}/models`, { headers: { Origin: 'http://app.example' } });
  assert.equal(denied.status, 401);
  assert.equal(denied.headers.get('access-control-allow-origin'), '*');  // the browser may read the 401
  await srv.stop();

  const only = await startServer({ args: ['--allowed-origins', '["http://good.example"]'] });
  const ok = await fetch(`${only.base}/models`, { method: 'OPTIONS', headers: {
    Origin: 'http://good.example', 'Access-Control-Request-Method': 'GET' } });
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get('access-control-allow-origin'), 'http://good.example');
  const bad = await fetch(`${only.base}/models`, { method: 'OPTIONS', headers: {
    Origin: 'http://evil.example', 'Access-Control-Request-Method': 'GET' } });
  assert.equal(bad.status, 400);
  assert.equal(bad.headers.get('access-control-allow-origin'), null);
  const plain = await fetch(`${only.base}/models`, { headers: { Origin: 'http://evil.example' } });
  assert.equal(plain.headers.get('access-control-allow-origin'), null);
  await only.stop();
});

test('logit_bias, min_tokens and include_stop_str_in_output over HTTP; /metrics under vllm: with model_name', async () => {
  const srv = await startServer({ args: ['--served-model-name', 'tiny-a'] });
  const url = `${srv.base}/completions`;
  // +100 on one id: greedy output is that token, repeated.
  const one = (await post(`${srv.url}/detokenize`, { tokens: [1734] })).json.prompt;
  const b = await post(url, { prompt: 'Hi', max_tokens: 4, temperature: 0, logit_bias: { 1734: 100 } });
  assert.equal(b.status, 200, b.text);
  assert.equal(b.json.choices[0].text, one.repeat(4));
  // bad_words naming that token's text bans it, however large its bias.
  const banned = await post(url, { prompt: 'Hi', max_tokens: 4, temperature: 0, logit_bias: { 1734: 100 }, bad_words: [one] });
  assert.equal(banned.status, 200, banned.text);
  assert.equal(banned.json.usage.completion_tokens, 4);
  assert.ok(!banned.json.choices[0].text.startsWith(one), banned.json.choices[0].text);
  const blank = await post(url, { prompt: 'Hi', bad_words: [' '] });
  assert.equal(blank.status, 400);
  assert.equal(blank.json.error.param, 'bad_words');
  // min_tokens with a stop id that greedy picks first.
  const first = await post(url, { prompt: 'Hi', max_tokens: 1, temperature: 0, logit_bias: { 1734: 100 } });
  const stop = await post(url, { prompt: 'Hi', max_tokens: 6, temperature: 0, logit_bias: { 1734: 100 }, stop_token_ids: [1734] });
  assert.equal(stop.json.usage.completion_tokens, 1);
  assert.equal(first.json.choices[0].finish_reason, 'length');
  const min = await post(url, { prompt: 'Hi', max_tokens: 6, temperature: 0, logit_bias: { 1734: 100 }, stop_token_ids: [1734], min_tokens: 3 });
  assert.equal(min.json.usage.completion_tokens, 4);  // 3 without the id (masked), then it stops
  assert.equal(min.json.choices[0].finish_reason, 'stop');
  // include_stop_str_in_output: the matched stop string ends the text.
  const plain = (await post(url, { prompt: 'Once upon a time', max_tokens: 16, temperature: 0, ignore_eos: true })).json.choices[0].text;
  const s = plain.slice(6, 9);
  const cut = plain.slice(0, plain.indexOf(s));
  const without = await post(url, { prompt: 'Once upon a time', max_tokens: 16, temperature: 0, ignore_eos: true, stop: [s] });
  const withStop = await post(url, { prompt: 'Once upon a time', max_tokens: 16, temperature: 0, ignore_eos: true, stop: [s], include_stop_str_in_output: true });
  assert.equal(without.json.choices[0].text, cut);
  assert.equal(withStop.json.choices[0].text, cut + s);
  assert.equal(withStop.json.choices[0].finish_reason, 'stop');

  // /metrics after the 8 completions above (the 400 is not counted).
  const text = await (await fetch(`${srv.url}/metrics`)).text();
  for (const name of ['num_requests_running', 'num_requests_waiting', 'kv_cache_usage_perc',
    'prompt_tokens_total', 'generation_tokens_total', 'num_preemptions_total'])
    for (const prefix of ['vllm:', 'hayate:'])
      assert.match(text, new RegExp(`^${prefix}${name}\\{model_name="tiny-a"\\} `, 'm'), prefix + name);
  const m = await metrics(srv.url);
  assert.equal(m['vllm:generation_tokens_total'], m['hayate:generation_tokens_total']);
  assert.ok(m['vllm:generation_tokens_total'] >= 4 + 4 + 1 + 1 + 4);
  assert.match(text, /^vllm:request_success_total\{model_name="tiny-a",finished_reason="stop"\} \d+$/m);
  assert.match(text, /^vllm:time_to_first_token_seconds_bucket\{model_name="tiny-a",le="\+Inf"\} 8$/m);
  assert.match(text, /^vllm:e2e_request_latency_seconds_count\{model_name="tiny-a"\} 8$/m);
  assert.doesNotMatch(text, /^vllm:engine_steps_total/m);  // hayate's own figures stay under hayate:

  // return_token_ids (vLLM): the generated ids and the prompt's, checked
  // against /tokenize and /detokenize; a stream sends the same ids in pieces
  // and the prompt's ids once per choice; chat puts the prompt's at the top.
  const req = { prompt: 'Once upon a time', max_tokens: 6, temperature: 0, ignore_eos: true, return_token_ids: true };
  const once = (await post(url, req)).json;
  const c0 = once.choices[0];
  assert.equal(c0.token_ids.length, 6);
  assert.equal((await post(`${srv.url}/detokenize`, { tokens: c0.token_ids })).json.prompt, c0.text);
  assert.deepEqual(c0.prompt_token_ids, (await post(`${srv.url}/tokenize`, { prompt: req.prompt })).json.tokens);
  const sse = async (u, body) => (await (await fetch(u, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body) })).text()).split('\n').filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
    .map((l) => JSON.parse(l.slice(6)));
  const chunks = await sse(url, { ...req, stream: true, n: 2 });
  for (const i of [0, 1]) {
    const mine = chunks.flatMap((k) => k.choices).filter((c) => c.index === i);
    assert.deepEqual(mine.flatMap((c) => c.token_ids), c0.token_ids);  // greedy: both choices alike
    assert.deepEqual(mine[0].prompt_token_ids, c0.prompt_token_ids);
    assert.equal(mine.filter((c) => 'prompt_token_ids' in c).length, 1);
  }
  const chat = await post(`${srv.base}/chat/completions`, { messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 3, temperature: 0, ignore_eos: true, return_token_ids: true });
  assert.equal(chat.json.choices[0].token_ids.length, 3);
  assert.equal(chat.json.prompt_token_ids.length, chat.json.usage.prompt_tokens);
  const plainOnce = (await post(url, { ...req, return_token_ids: undefined })).json.choices[0];
  assert.equal(plainOnce.token_ids, undefined);
  assert.equal((await post(url, { ...req, return_token_ids: 1 })).status, 400);
  await srv.stop();
});

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
