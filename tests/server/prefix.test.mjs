// Prefix caching, batched prompts and prompt logprobs through `hayate serve`
// on dummy:tiny (CPU) with the official openai client and fetch. Expected
// values come from the server's own independent paths: a prompt's
// logprobs (prompt logits) against the logprob the sampler reported when it
// generated that very token, each batched prompt against the same prompt
// sent alone, cached tokens against the block arithmetic of /metrics.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, post, metrics, errorOf } from './harness.mjs';

let srv;
let client;
const MODEL = 'dummy:tiny';
const BLOCK = 16;  // hayate serve's default --block-size

// Token ids from a seeded generator (inside the dummy vocabulary).
function ids(n, seed) {
  let x = seed >>> 0;
  const out = [];
  for (let i = 0; i < n; ++i) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out.push(1000 + (x % 20000));
  }
  return out;
}

before(async () => {
  srv = await startServer();
  client = srv.client();
});

after(async () => {
  const r = await srv.stop();
  assert.equal(r.code, 0, `exit ${r.code} ${r.signal}\n${srv.output()}`);
});

const greedy = (prompt, extra = {}) => client.completions.create({
  model: MODEL, prompt, max_tokens: 5, temperature: 0, ignore_eos: true, ...extra });

test('a repeated prompt reports its cached full blocks in usage and /metrics', async () => {
  const prompt = ids(100, 1);
  const m0 = await metrics(srv.url);
  const first = await greedy(prompt);
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  const second = await greedy(prompt);
  // Full blocks before the last prompt token: floor(99 / 16) * 16.
  assert.equal(second.usage.prompt_tokens_details.cached_tokens, Math.floor(99 / BLOCK) * BLOCK);
  assert.equal(second.choices[0].text, first.choices[0].text);
  const m1 = await metrics(srv.url);
  assert.equal(m1['hayate:prefix_cache_queries_total'] - m0['hayate:prefix_cache_queries_total'], 200);
  assert.equal(m1['hayate:prefix_cache_hits_total'] - m0['hayate:prefix_cache_hits_total'], 96);
  assert.ok(m1['hayate:kv_cache_blocks_cached'] >= 6);
  assert.equal(m1['hayate:kv_cache_blocks_used'], 0);
});

test('batched prompts: one choice per prompt and n, in order, each as if alone', async () => {
  const prompts = ['The quick brown fox', ids(20, 2), 'jumps over'];
  const r = await greedy(prompts, { n: 2, max_tokens: 6 });
  assert.equal(r.choices.length, 6);
  r.choices.forEach((c, i) => assert.equal(c.index, i));
  let promptTokens = 0;
  for (let p = 0; p < prompts.length; ++p) {
    const alone = await greedy(prompts[p], { max_tokens: 6 });
    promptTokens += alone.usage.prompt_tokens;
    for (let j = 0; j < 2; ++j) assert.equal(r.choices[p * 2 + j].text, alone.choices[0].text, `prompt ${p} choice ${j}`);
  }
  assert.equal(r.usage.prompt_tokens, promptTokens);
  assert.equal(r.usage.completion_tokens, 6 * 6);
  // Streaming: the same texts, by index.
  const stream = await greedy(prompts, { n: 2, max_tokens: 6, stream: true });
  const texts = Array(6).fill('');
  for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.text;
  assert.deepEqual(texts, r.choices.map((c) => c.text));
});

test('a batch with one bad prompt, or 10,000 prompts, is refused before any work', async () => {
  const m0 = await metrics(srv.url);
  let res = await post(`${srv.base}/completions`, { model: MODEL, prompt: ['a', [1, 2, 999999999], 'b'], max_tokens: 4 });
  let e = errorOf(res, assert, 400);
  assert.equal(e.param, 'prompt');
  assert.match(e.message, /prompt 1/);
  res = await post(`${srv.base}/completions`, { model: MODEL, prompt: ['a', Array(5000).fill(7)], max_tokens: 4 });
  e = errorOf(res, assert, 400);
  assert.match(e.message, /maximum context length/);
  res = await post(`${srv.base}/completions`, { model: MODEL, prompt: Array(10000).fill('hi'), max_tokens: 4 });
  e = errorOf(res, assert, 400);
  assert.match(e.message, /too many prompts: 10000 \(at most 1024/);
  // 600 prompts fit the list limit but not the server (256 running + 256 queued).
  res = await post(`${srv.base}/completions`, { model: MODEL, prompt: Array(600).fill('hi'), max_tokens: 4 });
  e = errorOf(res, assert, 400);
  assert.match(e.message, /more than the server holds/);
  const m1 = await metrics(srv.url);
  assert.equal(m1['hayate:engine_steps_total'], m0['hayate:engine_steps_total']);
  assert.equal(m1['hayate:prompt_tokens_total'], m0['hayate:prompt_tokens_total']);
});

test('echo with logprobs scores the prompt as the sampler scored the same position', async () => {
  const prompt = ids(30, 3);
  // The sampler's logprob of its greedy (most likely) token after `prompt`.
  const gen = await greedy(prompt, { max_tokens: 1, logprobs: 2 });
  const best = gen.choices[0].logprobs.token_logprobs[0];
  // The prompt with any token appended, echoed and scored, nothing generated:
  // at that token's position the top entry is the greedy token's.
  const withIt = [...prompt, 7];
  const echo = await client.completions.create({ model: MODEL, prompt: withIt, max_tokens: 0, echo: true, logprobs: 2 });
  const lp = echo.choices[0].logprobs;
  assert.equal(lp.tokens.length, withIt.length);
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.top_logprobs[0], null);
  const top = Math.max(...Object.values(lp.top_logprobs[prompt.length]));
  assert.ok(Math.abs(top - best) < 1e-4, `${top} vs ${best}`);
  assert.ok(lp.token_logprobs[prompt.length] <= top);
  for (let i = 1; i < withIt.length; ++i) {
    assert.ok(lp.token_logprobs[i] <= 0);
    const k = Object.keys(lp.top_logprobs[i]).length;
    assert.ok(k >= 2 && k <= 3, `${k} entries at ${i}`);
    assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
  }
  assert.equal(echo.choices[0].text, (await post(`${srv.url}/detokenize`, { tokens: withIt })).json.prompt);
  assert.equal(echo.usage.completion_tokens, 0);
  // With generation: the prompt's entries, then the generated ones.
  const both = await greedy(prompt, { max_tokens: 3, echo: true, logprobs: 1 });
  const b = both.choices[0].logprobs;
  assert.equal(b.tokens.length, prompt.length + 3);
  assert.ok(Math.abs(b.token_logprobs[prompt.length] - best) < 1e-4);

  // vLLM's prompt_logprobs: the same value, at rank 1, beside the prompt token's own rank.
  const body = { model: MODEL, prompt: withIt, max_tokens: 1, temperature: 0, prompt_logprobs: 3 };
  const v = await post(`${srv.base}/completions`, body);
  assert.equal(v.status, 200, v.text);
  const plp = v.json.choices[0].prompt_logprobs;
  assert.equal(plp.length, withIt.length);
  assert.equal(plp[0], null);
  const at = Object.values(plp[prompt.length]);
  const first = at.find((x) => x.rank === 1);
  assert.ok(first && Math.abs(first.logprob - best) < 1e-4, JSON.stringify(at));
  const own = plp[prompt.length]['7'];
  assert.ok(own && own.rank >= 1 && Math.abs(own.logprob - lp.token_logprobs[prompt.length]) < 1e-6);
  for (let i = 1; i < plp.length; ++i) {
    const k = Object.keys(plp[i]).length;
    assert.ok(k >= 3 && k <= 4, `${k} entries at ${i}`);
  }
  // Cached or not (the prompt's blocks are in the cache now), the same prompt logprobs.
  const again = await post(`${srv.base}/completions`, body);
  assert.deepEqual(again.json.choices[0].prompt_logprobs, plp);
});

test('prompt logprobs: bad input is a clear 400', async () => {
  const cases = [
    [{ prompt: Array(4096).fill(7), echo: true, logprobs: 1 }, 'prompt', /maximum context length/],
    [{ prompt: 'a', echo: true, logprobs: 1, stream: true }, 'echo', /stream/],
    [{ prompt: 'a', prompt_logprobs: 21 }, 'prompt_logprobs', /prompt_logprobs/],
    [{ prompt: 'a', max_tokens: 0 }, 'max_tokens', /at least 1/],
  ];
  for (const [body, param, re] of cases) {
    const res = await post(`${srv.base}/completions`, { model: MODEL, max_tokens: 2, ...body });
    const e = errorOf(res, assert, 400);
    assert.equal(e.param, param, res.text);
    assert.match(e.message, re);
  }
});

test('choices that cannot fit the KV pool at once are refused', async () => {
  const small = await startServer({ args: ['--num-kv-blocks', '16'] });
  try {
    const res = await post(`${small.base}/completions`, { model: MODEL, prompt: ids(60, 4), n: 4, max_tokens: 100, ignore_eos: true });
    const e = errorOf(res, assert, 400);
    assert.match(e.message, /at once, more than the whole pool of 16/);
    const ok = await post(`${small.base}/completions`, { model: MODEL, prompt: ids(60, 4), n: 2, max_tokens: 20, temperature: 0, ignore_eos: true });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.choices[0].text, ok.json.choices[1].text);
    assert.equal(ok.json.usage.prompt_tokens_details.cached_tokens, 0);
  } finally {
    const r = await small.stop();
    assert.equal(r.code, 0);
  }
});
