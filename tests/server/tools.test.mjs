// Tool calling end to end with the official openai client against `hayate
// serve` on dummy:tiny (random weights): tool_choice required and a named
// function come back as parsed tool_calls whose arguments validate against
// the function's parameters (the grammar enforces them), streamed and not;
// the tool's result goes back in the history and the conversation goes on;
// under auto (--tool-call-parser llama3_json) random text is content, never
// an error.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { startServer, post, errorOf } from './harness.mjs';

const oracleRequire = createRequire(new URL('../oracle/package.json', import.meta.url));
const Ajv = oracleRequire('ajv').default;
const ajv = new Ajv({ strict: false });

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather in a city',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', maxLength: 12 },
          unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        },
        required: ['city', 'unit'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time',
      parameters: { type: 'object', properties: { tz: { enum: ['UTC', 'CET'] } }, required: ['tz'] },
    },
  },
];
const validators = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

function checkCall(call) {
  assert.match(call.id, /^chatcmpl-tool-[0-9a-f]{32}$/);
  assert.equal(call.type, 'function');
  const v = validators[call.function.name];
  assert.ok(v, `unknown function ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  assert.ok(v(args), `${call.function.arguments}: ${JSON.stringify(v.errors)}`);
  return args;
}

test('tool calls through the openai client', async () => {
  const srv = await startServer({ args: ['--max-model-len', '1024', '--enable-auto-tool-choice',
    '--tool-call-parser', 'llama3_json'] });
  const client = srv.client();
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

  // required: a call, finish_reason tool_calls.
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model: 'dummy:tiny', messages, tools, tool_choice: 'required', max_tokens: 200, temperature: 1.0, seed,
      parallel_tool_calls: false,  // one call: random weights may list calls past max_tokens
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c.message));
    assert.equal(c.message.content, null);
    assert.equal(c.message.tool_calls.length, 1);
    for (const call of c.message.tool_calls) checkCall(call);
  }

  // A named function: exactly that call, finish_reason stop (vLLM's).
  const named = await client.chat.completions.create({
    model: 'dummy:tiny', messages, tools, max_tokens: 100, temperature: 0.8, seed: 5,
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  const nc = named.choices[0];
  assert.equal(nc.finish_reason, 'stop');
  assert.equal(nc.message.tool_calls.length, 1);
  assert.equal(nc.message.tool_calls[0].function.name, 'get_weather');
  checkCall(nc.message.tool_calls[0]);

  // The result goes back in the history; the conversation continues.
  const history = [
    ...messages,
    { role: 'assistant', content: null, tool_calls: nc.message.tool_calls },
    { role: 'tool', tool_call_id: nc.message.tool_calls[0].id, content: '{"temperature": 21}' },
  ];
  const next = await client.chat.completions.create({
    model: 'dummy:tiny', messages: history, tools, max_tokens: 16, temperature: 0, tool_choice: 'none',
  });
  assert.equal(typeof next.choices[0].message.content, 'string');
  assert.deepEqual(next.choices[0].message.tool_calls ?? [], []);

  // Streamed, named: the arguments arrive as deltas; the first carries id and name.
  const stream = await client.chat.completions.create({
    model: 'dummy:tiny', messages, tools, max_tokens: 100, temperature: 0.8, seed: 9, stream: true,
    tool_choice: { type: 'function', function: { name: 'get_time' } },
  });
  let args = '';
  let first = null;
  let finish = null;
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta;
    for (const tc of d?.tool_calls ?? []) {
      if (!first) first = tc;
      args += tc.function?.arguments ?? '';
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(first.function.name, 'get_time');
  assert.match(first.id, /^chatcmpl-tool-/);
  assert.equal(finish, 'stop');
  assert.ok(validators.get_time(JSON.parse(args)), args);

  // Streamed, required: each call as deltas, finish_reason tool_calls.
  const rs = await client.chat.completions.create({
    model: 'dummy:tiny', messages, tools, tool_choice: 'required', max_tokens: 200, temperature: 1.0,
    seed: 4, stream: true, parallel_tool_calls: false,
  });
  const calls = [];
  finish = null;
  for await (const chunk of rs) {
    for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) {
      if (!calls[tc.index]) calls[tc.index] = { id: tc.id, type: 'function', function: { name: tc.function.name, arguments: '' } };
      calls[tc.index].function.arguments += tc.function?.arguments ?? '';
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'tool_calls');
  assert.ok(calls.length >= 1);
  for (const call of calls) checkCall(call);

  // auto: random text is no call: content, 200.
  for (const stream of [false, true]) {
    const body = { messages, tools, max_tokens: 24, temperature: 1.0, seed: 2, stream };
    const res = await post(`${srv.base}/chat/completions`, body);
    assert.equal(res.status, 200, res.text);
    if (!stream) {
      assert.equal(typeof res.json.choices[0].message.content, 'string');
      assert.deepEqual(res.json.choices[0].message.tool_calls, []);
      assert.notEqual(res.json.choices[0].finish_reason, 'tool_calls');
    } else {
      assert.match(res.text, /data: \[DONE\]/);
    }
  }

  // Bad tool requests are 400s naming the field.
  const bad = async (extra, param) => {
    const e = errorOf(await post(`${srv.base}/chat/completions`, { messages, max_tokens: 4, ...extra }), assert, 400);
    assert.equal(e.param, param);
  };
  await bad({ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice');
  await bad({ tool_choice: 'required' }, 'tool_choice');
  await bad({ tools: [{ type: 'function', function: { name: 'bad name!' } }] }, 'tools');
  await bad({ tools, tool_choice: 'required', response_format: { type: 'json_object' } }, 'response_format');
  assert.equal((await srv.stop()).code, 0);
});

test('auto needs --enable-auto-tool-choice and a parser', async () => {
  const srv = await startServer({ args: ['--max-model-len', '256'] });
  const messages = [{ role: 'user', content: 'hi' }];
  const e = errorOf(await post(`${srv.base}/chat/completions`, { messages, tools, tool_choice: 'auto' }), assert, 400);
  assert.match(e.message, /--enable-auto-tool-choice/);
  // Without tool_choice the tools are not used (none): plain content.
  const r = await post(`${srv.base}/chat/completions`, { messages, tools, max_tokens: 4 });
  assert.equal(r.status, 200, r.text);
  assert.equal(typeof r.json.choices[0].message.content, 'string');
  assert.equal((await srv.stop()).code, 0);
});
