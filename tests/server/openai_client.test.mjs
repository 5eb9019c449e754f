// The official openai client against `hayate serve` on dummy:tiny (CPU):
// completions and chat, streaming and not, stop strings, n, seeds, echo,
// token-id prompts, models, tokenize, and the errors the client surfaces.
// Expected values come from the server's own independent paths (greedy
// non-streaming vs streaming, /tokenize vs usage, the dummy config's context),
// never from hand-typed text.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, post, metrics, OpenAI } from './harness.mjs';

let srv;
let client;
const MODEL = 'dummy:tiny';
const PROMPT = 'The quick brown fox jumps over the lazy dog because';

before(async () => {
  srv = await startServer();
  client = srv.client();
});

after(async () => {
  const r = await srv.stop();
  assert.equal(r.code, 0, `exit ${r.code} ${r.signal}\n${srv.output()}`);
});

async function greedy(extra = {}) {
  return client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 24, temperature: 0,
    ignore_eos: true, ...extra });
}

test('models lists the served model with max_model_len from the dummy config', async () => {
  const list = await client.models.list();
  const models = list.data;
  assert.equal(models.length, 1);
  assert.equal(models[0].id, MODEL);
  assert.equal(models[0].object, 'model');
  assert.equal(models[0].max_model_len, 4096);  // tiny: max_position_embeddings
});

test('completion: usage, finish_reason length, prompt tokens match /tokenize', async () => {
  const r = await greedy();
  assert.equal(r.object, 'text_completion');
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(r.choices[0].text.length > 0);
  const tok = await post(`${srv.url}/tokenize`, { model: MODEL, prompt: PROMPT });
  assert.equal(tok.status, 200);
  assert.equal(r.usage.prompt_tokens, tok.json.count);
  assert.equal(r.usage.completion_tokens, 24);
  assert.equal(r.usage.total_tokens, tok.json.count + 24);
});

test('greedy is deterministic, streaming matches non-streaming, ids prompt matches text prompt', async () => {
  const a = await greedy();
  const b = await greedy();
  assert.equal(a.choices[0].text, b.choices[0].text);

  const stream = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 24,
    temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
      chunks++;
    }
  }
  assert.equal(text, a.choices[0].text);
  assert.equal(finish, 'length');
  assert.ok(chunks > 1, 'streamed in more than one chunk');
  assert.deepEqual(usage, a.usage);

  const tok = await post(`${srv.url}/tokenize`, { prompt: PROMPT });
  const byIds = await greedy({ prompt: tok.json.tokens });
  assert.equal(byIds.choices[0].text, a.choices[0].text);
  const detok = await post(`${srv.url}/detokenize`, { tokens: tok.json.tokens });
  assert.equal(detok.status, 200);
  assert.ok(detok.json.prompt.endsWith(PROMPT));
});

test('stop string: text ends before its first occurrence, finish_reason stop, also when streamed', async () => {
  const full = (await greedy()).choices[0].text;
  const chars = Array.from(full);
  assert.ok(chars.length >= 12, `need a longer completion: ${JSON.stringify(full)}`);
  const stop = chars.slice(8, 11).join('');
  const expected = full.slice(0, full.indexOf(stop));

  const r = await greedy({ stop: [stop] });
  assert.equal(r.choices[0].text, expected);
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.usage.completion_tokens < 24);

  const stream = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 24,
    temperature: 0, ignore_eos: true, stop, stream: true });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, expected);  // nothing of the stop string leaked
  assert.equal(finish, 'stop');
});

test('echo prepends the prompt', async () => {
  const plain = await greedy({ max_tokens: 6 });
  const echoed = await greedy({ max_tokens: 6, echo: true });
  assert.equal(echoed.choices[0].text, PROMPT + plain.choices[0].text);
});

test('n choices; a seed makes sampling reproducible', async () => {
  const req = { model: MODEL, prompt: PROMPT, max_tokens: 8, temperature: 1.0, top_p: 0.95,
    top_k: 50, min_p: 0.01, n: 3, seed: 1234, ignore_eos: true };
  const a = await client.completions.create(req);
  const b = await client.completions.create(req);
  assert.deepEqual(a.choices.map((c) => c.index), [0, 1, 2]);
  assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
  assert.equal(a.usage.completion_tokens, 24);
});

test('stop_token_ids end the sequence at that id', async () => {
  const tok = await post(`${srv.url}/tokenize`, { prompt: PROMPT });
  const ids = tok.json.tokens;
  // Greedy continuation as ids: feed prompt, read generated ids back by
  // tokenizing is lossy, so use the first generated token's text instead.
  const one = await greedy({ max_tokens: 1 });
  const firstIds = (await post(`${srv.url}/tokenize`, { prompt: one.choices[0].text,
    add_special_tokens: false })).json.tokens;
  assert.ok(firstIds.length >= 1);
  const r = await greedy({ prompt: ids, stop_token_ids: [firstIds[0]] });
  // The model's first id is the stop id whenever its text re-tokenizes to itself.
  if (firstIds.length === 1) {
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.equal(r.usage.completion_tokens, 1);
    assert.equal(r.choices[0].text, '');
  } else {
    assert.equal(r.choices[0].finish_reason, 'length');
  }
});

test('chat completion and chat streaming agree', async () => {
  const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hi.' }];
  const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 12,
    temperature: 0, ignore_eos: true });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 12);
  const tok = await post(`${srv.url}/tokenize`, { messages });
  assert.equal(tok.status, 200, tok.text);
  assert.equal(r.usage.prompt_tokens, tok.json.count);

  const stream = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 12,
    temperature: 0, ignore_eos: true, stream: true });
  let text = '';
  let role = null;
  let finish = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(text, r.choices[0].message.content);
  assert.equal(finish, 'length');
});

test('errors surface as the client error classes with param', async () => {
  const cases = [
    [{ temperature: -1 }, 'temperature'],
    [{ top_p: 0 }, 'top_p'],
    [{ top_p: 1.5 }, 'top_p'],
    [{ max_tokens: 0 }, 'max_tokens'],
    [{ max_tokens: 5000 }, 'max_tokens'],
    [{ prompt: [1, 2, 999999999] }, 'prompt'],
    [{ stop: Array.from({ length: 17 }, (_, i) => `s${i}`) }, 'stop'],
    [{ n: 1000 }, 'n'],
    [{ logprobs: 21 }, 'logprobs'],
    [{ logprobs: 2, echo: true, stream: true }, 'echo'],
    [{ presence_penalty: 2.5 }, 'presence_penalty'],
    [{ frequency_penalty: -3 }, 'frequency_penalty'],
    [{ repetition_penalty: 0 }, 'repetition_penalty'],
    [{ max_tokens: 'ten' }, 'max_tokens'],
  ];
  for (const [extra, param] of cases) {
    await assert.rejects(
      client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 4, ...extra }),
      (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, `${JSON.stringify(extra)}: ${e}`);
        assert.equal(e.status, 400);
        assert.equal(e.param, param, JSON.stringify(extra));
        return true;
      });
  }
  await assert.rejects(
    client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 5000 }),
    (e) => /maximum context length is 4096/.test(e.message));
  await assert.rejects(
    client.completions.create({ model: 'no-such-model', prompt: PROMPT, max_tokens: 4 }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'model_not_found');
  await assert.rejects(
    client.chat.completions.create({ model: MODEL, messages: [], max_tokens: 4 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'messages');
  for (const [extra, param] of [[{ logprobs: true, top_logprobs: 21 }, 'top_logprobs'],
    [{ top_logprobs: 2 }, 'top_logprobs'], [{ logprobs: 3 }, 'logprobs']]) {
    await assert.rejects(
      client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }],
        max_tokens: 4, ...extra }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === param);
  }
  // Everything above was refused before reaching the engine.
  const m = await metrics(srv.url);
  assert.equal(m['hayate:num_requests_in_flight'], 0);
});

// Logprobs and penalties. The logprobs are the model's raw distribution, so
// the penalties can be checked through them: with greedy decoding the chosen
// id must have the best penalised score among the top_logprobs entries
// (log_softmax is a shift of the logits, so the scores compare as logits do).
const CHAT = [{ role: 'user', content: 'Count: one two three' }];
const key = (entry) => JSON.stringify(entry.bytes);  // bytes identify a token

test('completions logprobs: shape, greedy picks the top entry, streamed equals non-streamed', async () => {
  const plain = await greedy({ max_tokens: 12 });
  const r = await greedy({ max_tokens: 12, logprobs: 3 });
  assert.equal(r.choices[0].text, plain.choices[0].text);  // logprobs do not change the pick
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 12);
  assert.equal(lp.token_logprobs.length, 12);
  assert.equal(lp.top_logprobs.length, 12);
  assert.deepEqual(lp.text_offset.slice(0, 1), [0]);
  for (let i = 0; i < 12; i++) {
    const top = Object.values(lp.top_logprobs[i]);
    assert.ok(top.length >= 1 && top.length <= 3, JSON.stringify(lp.top_logprobs[i]));
    assert.ok(lp.token_logprobs[i] <= 0);
    assert.equal(lp.token_logprobs[i], Math.max(...top));  // greedy = most likely
    assert.ok(top.reduce((a, x) => a + Math.exp(x), 0) <= 1 + 1e-5);
    if (i > 0) assert.equal(lp.text_offset[i] - lp.text_offset[i - 1], [...lp.tokens[i - 1]].length);
  }
  if (!lp.tokens.some((t) => t.includes('\uFFFD'))) assert.equal(lp.tokens.join(''), r.choices[0].text);

  const stream = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 12,
    temperature: 0, ignore_eos: true, logprobs: 3, stream: true });
  const got = { tokens: [], token_logprobs: [], text_offset: [] };
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (!c.logprobs) continue;
      for (const k of Object.keys(got)) got[k].push(...c.logprobs[k]);
    }
  }
  assert.deepEqual(got.tokens, lp.tokens);
  assert.deepEqual(got.text_offset, lp.text_offset);
  got.token_logprobs.forEach((x, i) => assert.ok(Math.abs(x - lp.token_logprobs[i]) < 1e-4));
  assert.equal((await greedy({ max_tokens: 2 })).choices[0].logprobs, null);
});

test('chat logprobs: content entries with bytes and top_logprobs, also streamed', async () => {
  const req = { model: MODEL, messages: CHAT, max_tokens: 10, temperature: 0, ignore_eos: true,
    logprobs: true, top_logprobs: 2 };
  const r = await client.chat.completions.create(req);
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const e of content) {
    assert.equal(typeof e.token, 'string');
    assert.ok(Array.isArray(e.bytes) && e.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256));
    if (!e.token.includes('\uFFFD')) assert.equal(Buffer.from(e.bytes).toString('utf8'), e.token);
    assert.equal(e.top_logprobs.length, 2);
    assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob);
    assert.equal(key(e.top_logprobs[0]), key(e));  // greedy took the most likely token
    assert.equal(e.top_logprobs[0].logprob, e.logprob);
  }
  assert.equal(Buffer.concat(content.map((e) => Buffer.from(e.bytes))).toString('utf8'),
    r.choices[0].message.content);

  const stream = await client.chat.completions.create({ ...req, stream: true });
  const streamed = [];
  for await (const chunk of stream)
    for (const c of chunk.choices) if (c.logprobs) streamed.push(...c.logprobs.content);
  assert.deepEqual(streamed.map(key), content.map(key));
  const noLp = await client.chat.completions.create({ ...req, logprobs: false, top_logprobs: 0 });
  assert.equal(noLp.choices[0].logprobs, null);
});

test('frequency and presence penalties: greedy takes the best penalised score', async () => {
  const base = { model: MODEL, messages: CHAT, max_tokens: 24, temperature: 0, ignore_eos: true,
    logprobs: true, top_logprobs: 20 };
  const plain = await client.chat.completions.create(base);
  // Without penalties greedy always takes the raw favourite.
  for (const e of plain.choices[0].logprobs.content) assert.equal(key(e.top_logprobs[0]), key(e));
  // The tiny model rarely repeats a token on its own, so positive penalties
  // may change nothing; negative ones (rewarding repeats) must.
  for (const [freq, pres, mustChange] of [[2, 0.5, false], [-1, -0.5, true]]) {
    const pen = await client.chat.completions.create({ ...base, frequency_penalty: freq,
      presence_penalty: pres });
    const content = pen.choices[0].logprobs.content;
    assert.equal(content.length, 24);
    const count = new Map();
    const score = (e) => {
      const c = count.get(key(e)) || 0;
      return e.logprob - freq * c - pres * (c > 0 ? 1 : 0);
    };
    let passedOver = 0;
    for (const e of content) {
      const chosen = score(e);
      for (const u of e.top_logprobs)
        assert.ok(chosen >= score(u) - 1e-3, `${freq}: ${e.token} vs ${u.token}`);
      if (key(e.top_logprobs[0]) !== key(e)) passedOver++;  // the raw favourite was not taken
      count.set(key(e), (count.get(key(e)) || 0) + 1);
    }
    if (mustChange) {
      assert.ok(passedOver > 0, 'the penalty never changed a pick');
      assert.notEqual(pen.choices[0].message.content, plain.choices[0].message.content);
    }
  }
});

test('repetition_penalty changes greedy output; seeded sampling is unchanged by logprobs', async () => {
  const a = await greedy({ max_tokens: 24 });
  const b = await greedy({ max_tokens: 24, repetition_penalty: 1.5 });
  const c = await greedy({ max_tokens: 24, repetition_penalty: 1.0 });
  assert.notEqual(b.choices[0].text, a.choices[0].text);
  assert.equal(c.choices[0].text, a.choices[0].text);
  const req = { model: MODEL, prompt: PROMPT, max_tokens: 12, temperature: 1.0, seed: 99,
    ignore_eos: true };
  const s1 = await client.completions.create(req);
  const s2 = await client.completions.create({ ...req, logprobs: 1 });
  assert.equal(s2.choices[0].text, s1.choices[0].text);
});
