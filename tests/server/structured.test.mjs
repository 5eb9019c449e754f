// Structured outputs through `hayate serve` on dummy:tiny (random weights:
// only the grammar makes an output valid): OpenAI's response_format
// (json_object, json_schema strict) through the official openai client,
// vLLM's structured_outputs (json, regex, choice, grammar) and its guided_*
// aliases, streamed and not, n > 1; and the 400s for what cannot compile
// (unsupported keywords, deep or huge schemas, backreferences, two specs).
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { startServer, post, errorOf } from './harness.mjs';

const oracleRequire = createRequire(new URL('../oracle/package.json', import.meta.url));
const Ajv = oracleRequire('ajv').default;
const ajv = new Ajv({ strict: false });

const weather = {
  type: 'object',
  properties: {
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', minimum: 1, maximum: 14 },
    alerts: { type: 'boolean' },
    tags: { type: 'array', items: { enum: ['rain', 'sun'] }, maxItems: 2 },
  },
  required: ['unit', 'days', 'alerts', 'tags'],
  additionalProperties: false,
};

test('structured outputs on chat and completions', async () => {
  // A compile bound for the sanitizer build on a loaded CI machine.
  const srv = await startServer({ args: ['--max-model-len', '512', '--max-grammar-compile-ms', '120000'] });
  const client = srv.client();
  const messages = [{ role: 'user', content: 'Weather in Paris?' }];
  const validate = ajv.compile(weather);

  // response_format json_schema (strict) through the official client, n = 3, sampled.
  const r = await client.chat.completions.create({
    model: 'dummy:tiny', messages, max_tokens: 64, temperature: 1.0, n: 3, seed: 7,
    response_format: { type: 'json_schema', json_schema: { name: 'weather', schema: weather, strict: true } },
  });
  assert.equal(r.choices.length, 3);
  for (const c of r.choices) {
    assert.equal(c.finish_reason, 'stop', c.message.content);
    const v = JSON.parse(c.message.content);
    assert.ok(validate(v), `${c.message.content}: ${JSON.stringify(validate.errors)}`);
  }

  // json_object, greedy.
  const o = await client.chat.completions.create({
    model: 'dummy:tiny', messages, max_tokens: 200, temperature: 0,
    response_format: { type: 'json_object' },
  });
  if (o.choices[0].finish_reason === 'stop') {
    const v = JSON.parse(o.choices[0].message.content);
    assert.equal(typeof v, 'object');
    assert.ok(v !== null && !Array.isArray(v));
  } else {
    assert.match(o.choices[0].message.content, /^\{/);
  }

  // Streamed: the deltas join into valid JSON.
  const stream = await client.chat.completions.create({
    model: 'dummy:tiny', messages, max_tokens: 64, temperature: 1.0, seed: 3, stream: true,
    response_format: { type: 'json_schema', json_schema: { name: 'weather', schema: weather } },
  });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'stop');
  assert.ok(validate(JSON.parse(text)), text);

  // vLLM's structured_outputs and guided_* on completions.
  const completion = (extra) => post(`${srv.base}/completions`,
    { prompt: 'Answer:', max_tokens: 40, temperature: 1.0, seed: 11, n: 2, ...extra });
  const checks = [
    [{ structured_outputs: { regex: '[a-c]{2,4}-\\d{2}' } }, (t) => /^[a-c]{2,4}-\d{2}$/.test(t)],
    [{ guided_regex: '(yes|no)!?' }, (t) => /^(yes|no)!?$/.test(t)],
    [{ structured_outputs: { choice: ['red', 'green', 'blue'] } }, (t) => ['red', 'green', 'blue'].includes(t)],
    [{ guided_choice: ['Paris', 'São Paulo'] }, (t) => ['Paris', 'São Paulo'].includes(t)],
    [{ structured_outputs: { grammar: 'root ::= "x" [0-9] ("," [0-9])?' } }, (t) => /^x[0-9](,[0-9])?$/.test(t)],
    [{ guided_json: weather }, (t) => validate(JSON.parse(t))],
    [{ structured_outputs: { json: JSON.stringify(weather), disable_any_whitespace: true } },
      (t) => !/\s/.test(t) && validate(JSON.parse(t))],
  ];
  for (const [extra, ok] of checks) {
    const res = await completion(extra);
    assert.equal(res.status, 200, res.text);
    for (const c of res.json.choices) {
      assert.equal(c.finish_reason, 'stop', `${JSON.stringify(extra)}: ${c.text}`);
      assert.ok(ok(c.text), `${JSON.stringify(extra)}: ${JSON.stringify(c.text)}`);
    }
  }
  // response_format text is free text (no grammar).
  const free = await completion({ response_format: { type: 'text' }, n: 1 });
  assert.equal(free.status, 200);
  assert.equal((await srv.stop()).code, 0);
});

test('what cannot compile is a 400 naming the field and the reason', async () => {
  const srv = await startServer({ args: ['--max-model-len', '256'] });
  const chat = (extra) => post(`${srv.base}/chat/completions`,
    { messages: [{ role: 'user', content: 'hi' }], max_tokens: 8, ...extra });
  let deep = { type: 'string' };
  for (let i = 0; i < 200; ++i) deep = { type: 'array', items: deep };
  const wide = { type: 'object', properties: {}, required: [] };
  for (let i = 0; i < 6000; ++i) wide.properties[`p${i}`] = { type: 'integer' };
  const cases = [
    [{ response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { not: { type: 'null' } } } } },
      'response_format', /not/],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'd', schema: deep } } }, 'response_format', /depth|nest/i],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'w', schema: wide } } }, 'response_format', /.+/],
    [{ guided_regex: '(a)\\1' }, 'guided_regex', /backreference/i],
    [{ guided_regex: 'a{5000}{5000}' }, 'guided_regex', /.+/],
    [{ structured_outputs: { regex: 'a', choice: ['b'] } }, 'structured_outputs', /exactly one/],
    [{ guided_json: { type: 'object' }, response_format: { type: 'json_object' } }, 'guided_json', /give one/],
    [{ structured_outputs: { grammar: 'root ::= root "a"' } }, 'structured_outputs', /recurs/i],
    [{ structured_outputs: { json: '{not json' } }, 'structured_outputs.json', /JSON Schema/],
    [{ response_format: { type: 'structural_tag' } }, 'response_format', /not supported/],
    [{ guided_choice: [] }, 'guided_choice', /non-empty/],
  ];
  for (const [extra, param, message] of cases) {
    const e = errorOf(await chat(extra), assert, 400);
    assert.equal(e.param, param, JSON.stringify(extra).slice(0, 200));
    assert.match(e.message, message);
  }
  // A regex that backtracking engines take exponential time on is plain work here.
  const r = await post(`${srv.base}/completions`, { prompt: 'x', max_tokens: 12, guided_regex: '(a+)+b' });
  assert.equal(r.status, 200, r.text);
  assert.match(r.json.choices[0].text, /^a*b?$/);
  // The server keeps serving.
  assert.equal((await chat({})).status, 200);
  assert.equal((await srv.stop()).code, 0);
});

test('--max-grammar-compile-ms bounds a compile: a 400 naming the limit, then the server serves', async () => {
  // 1 ms: the first position's walk over the 128k vocabulary takes longer.
  const srv = await startServer({ args: ['--max-model-len', '256', '--max-grammar-compile-ms', '1'] });
  const r = await post(`${srv.base}/chat/completions`, {
    messages: [{ role: 'user', content: 'hi' }], max_tokens: 8,
    response_format: { type: 'json_schema', json_schema: { name: 'w', schema: weather } },
  });
  const e = errorOf(r, assert, 400);
  assert.equal(e.param, 'response_format');
  assert.match(e.message, /over the compile time limit .*the compile time limit is 1 ms/);
  const free = await post(`${srv.base}/chat/completions`,
    { messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
  assert.equal(free.status, 200);
  assert.equal((await srv.stop()).code, 0);
});
