// Writes the tokenizer parity corpus (one JSON string per line) to stdout.
// Deterministic: hand-picked seed strings per category, then seeded random
// mixtures of them. Only inputs live here; expected ids always come from
// tokenizers.js at test time (tokenize_oracle.mjs).
//   node tests/oracle/make_corpus.mjs > tests/tokenizer/data/corpus.jsonl

const seeds = {
  japanese: [
    "日本語のテキストです。", "東京都渋谷区で会議があります。", "ひらがなとカタカナ",
    "ｶﾀｶﾅﾊﾝｶｸ ﾃｽﾄ", "ﾊﾟﾋﾟﾌﾟﾍﾟﾎﾟ、ｶﾞｷﾞｸﾞ。", "ＡＢＣ１２３　全角英数字", "（括弧）「かぎ」『二重』【隅付き】",
    "！？＆＠＃", "吾輩は猫である。名前はまだ無い。", "令和６年１２月３１日", "〜～ー―‐", "㈱㈲㍿ ①②③",
    "すもももももももものうち", "Llama 3.1 Swallowは日本語に強いモデルです。", "ﾃﾞｰﾀ・サイエンス",
  ],
  chinese: ["中文测试，你好世界！", "這是繁體中文。", "机器学习与深度学习", "《红楼梦》是一部小说。", "一二三四五六七八九十"],
  korean: ["안녕하세요, 세계!", "한국어 토크나이저 테스트입니다.", "ᄒᆞᆫ글 옛한글", "서울특별시 강남구"],
  arabic: ["مرحبا بالعالم", "اللُّغَةُ الْعَرَبِيَّةُ", "١٢٣٤٥ أرقام عربية", "ﷺ ﷽"],
  hindi: ["नमस्ते दुनिया", "हिन्दी भाषा परीक्षण।", "क्षत्रिय ज्ञान श्री", "१२३ देवनागरी अंक"],
  cyrillic: ["Привет, мир!", "Съешь же ещё этих мягких французских булок.", "ЁЛКИ-ПАЛКИ", "Ґанок і їжак"],
  other_scripts: ["Γειά σου Κόσμε", "שלום עולם", "สวัสดีชาวโลก", "Xin chào thế giới", "Tiếng Việt có dấu"],
  emoji: [
    "👍", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "🇯🇵🇺🇸🇫🇷", "👩🏽‍💻 coder", "❤️‍🔥", "😀😃😄😁",
    "emoji in text 🎉 yay 🚀!", "🧑‍🤝‍🧑", "#️⃣ 1️⃣ 🔟", "🫠🫡🫶", "✊🏿✋🏻",
  ],
  combining: [
    "e\u0301 vs \u00e9", "n\u0303o", "Z\u0351\u0352\u0353algo", "a\u0300\u0301\u0302\u0303", "\u0915\u094d\u0937",
    "Å vs A\u030a", "cafe\u0301", "\u1100\u1161\u11a8",
  ],
  code: [
    "def f(x):\n\treturn x + 1\n", "int main() {\r\n  return 0;\r\n}\r\n", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "if x == 1:\n    print('one')\nelse:\n    print(\"other\")", "#include <stdio.h>\n", "SELECT * FROM t WHERE id = 42;",
    "const f = (a, b) => a ?? b;", "x<<=2; y>>>=3; z**=4", "\t\t\tindent\n\t\tdedent", "fn main() { println!(\"{}\", 1); }",
    "<div class=\"a\">text</div>", "{\"key\": [1, 2, 3], \"n\": null}", "$ ls -la | grep '.txt' > out 2>&1",
    "a\r\nb\rc\nd", "// comment /* nested */", "    four spaces\n        eight", "λx. x + 1",
  ],
  whitespace: [
    "", " ", "  ", "   ", "\n", "\n\n", "\n\n\n\n", "\t", " \t \n ", "a  b   c    d", "trailing   ", "   leading",
    "\r\n\r\n", "\u3000全角スペース\u3000", "a\u00a0b", "x\u2003y\u2009z", "line1\n\n\nline2", "  \n  \n  ",
    "word \n\n word", "end\n", " \n", "\u2028\u2029", "a \u3000 b",
  ],
  digits: [
    "1", "12", "123", "1234", "12345", "1234567890", "3.14159265358979", "1,000,000", "2024-12-31",
    "0000000000000000000000", "123456789012345678901234567890", "v1.2.3", "1e-10", "-42", "+81 90-1234-5678",
    "１２３４５", "٣٤٥", "⅓ ½ ¾", "Ⅻ ⅻ",
  ],
  apostrophes: [
    "don't", "I'm", "you're", "they've", "we'll", "he'd", "it's", "DON'T", "I'M", "You'Re", "can't won't",
    "rock 'n' roll", "'s 't 're", "the '90s", "don’t (curly)", "it‘s", "O'Reilly's", "''double''", "ʼokina",
    "'S'T'RE'VE'M'LL'D",
  ],
  urls: [
    "https://example.com/path?q=1&r=2#frag", "http://日本.jp/パス", "mailto:someone@example.org",
    "Visit www.github.com/huggingface/tokenizers now", "ftp://[::1]:21/file.txt", "C:\\Users\\name\\file.txt",
    "/usr/local/bin/hayate --model dummy:tiny",
  ],
  special: [
    "<|begin_of_text|>", "<|begin_of_text|>Hello", "Hello<|end_of_text|>", "<|eot_id|><|eot_id|>",
    "text <|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>", "<|begin_of_text |>", "<|reserved_special_token_5|>x",
    "<|finetune_right_pad_id|>", "a<|python_tag|>b", "<<|eot_id|>>", "<|eom_id|>", "<s> </s> <unk>", "<|im_start|>user",
    "<|begin_of_text|><|begin_of_text|>", " <|eot_id|> ", "<|", "|>", "<|eot_id",
  ],
  short: ["a", "A", "z", ".", ",", "!", "?", "-", "_", "'", "\"", "日", "ｱ", "😀", "é", "\u200b", "\u00ad", "~", "@", "\\"],
  // Where JavaScript's \s and Unicode White_Space (Oniguruma's \s, so HF's)
  // differ, tokenizers.js cannot be the oracle: U+FEFF (JS: space) and
  // U+0085 after a space (JS: not a space) are left out of the corpus; we
  // follow HF (test_tokenizer.cpp, Tokenizer.RegexWhitespaceIsUnicodeWhiteSpace).
  edge_whitespace: ["a\u0085 b", "a\u0085\u0085b", "\u180e x", "a \u200b b", "x\u2028\u2029 y",
                    "\u000b\u000c\u001c\u001f", "ſ ’S x'ſ", "K\u212a", "a\r\r\n\n\rb"],
  mixed: [
    "Hello, world!", "The quick brown fox jumps over the lazy dog.", "Tokenization is the first step.",
    "ChatGPTとLlamaの比較をします。", "Pythonで機械学習(ML)を始めよう！", "価格は$100（税込¥15,000）です。",
    "E=mc² and ∑xᵢ² ≥ 0", "naïve café résumé coöperate", "Straße ß ẞ", "ÀÉÎÕÜ àéîõü", "İstanbul ıi",
    "ﬁ ﬂ ﬀ ligatures", "½ cup of ☕", "→ ← ↑ ↓ ⇒", "™ © ®", "« guillemets »", "¿Qué? ¡Sí!",
  ],
};

function mulberry32(a) {
  return function () {
    a |= 0; a = (a + 0x6D2B79F5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = mulberry32(20241129);
const pick = (arr) => arr[Math.floor(rand() * arr.length)];
const all = Object.values(seeds).flat();
const seps = [" ", "", "\n", "  ", "\t", "\r\n", "。", ", ", "\n\n", "   "];

const out = [];
for (const list of Object.values(seeds)) out.push(...list);
// Random mixtures: 2 to 6 seeds joined by assorted separators.
for (let i = 0; i < 200; ++i) {
  const n = 2 + Math.floor(rand() * 5);
  let s = "";
  for (let k = 0; k < n; ++k) s += (k ? pick(seps) : "") + pick(all);
  out.push(s);
}
// A few long documents (several KB), mixed Japanese and English.
for (let d = 0; d < 4; ++d) {
  let s = "";
  while (s.length < 3000 + d * 1500) s += pick(all) + pick(seps);
  out.push(s);
}
for (const s of out) process.stdout.write(JSON.stringify(s) + "\n");
