// Tokenizer throughput: encode 1 MB of mixed Japanese/English text with the
// Llama 3.1 tokenizer on one core. Reported as bytes/s (MB/s).
//   build/<dir>/tests/tokenizer/bench_tokenizer
// BM_Encode runs with the word cache warm (steady state of a server);
// BM_EncodeColdCache encodes the text once on a freshly loaded tokenizer.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

// Deterministic 1 MB text: alternating Japanese and English paragraphs with
// varying numbers, so that not every word repeats.
std::string mixed_text(size_t bytes) {
  const std::vector<std::string> ja = {
      "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。",
      "東京都の人口は約1400万人で、日本で最も人口の多い都道府県です。",
      "機械学習モデルの推論を高速化するために、GPUのメモリ帯域を最大限に活用します。",
      "ｶﾀｶﾅやＡＢＣのような全角・半角文字も混ざった文章を処理できる必要があります。",
      "大規模言語モデル（LLM）は、自然言語処理の多くのタスクで高い性能を示しています。",
      "今日は晴れ時々くもり、最高気温は二十三度の予報です。",
  };
  const std::vector<std::string> en = {
      "The quick brown fox jumps over the lazy dog near the riverbank.",
      "Inference engines stream weights from memory once per generated token.",
      "Tokenization must match the reference implementation id for id, or comparisons are void.",
      "Llama 3.1 uses a byte-level BPE with a vocabulary of 128,256 tokens.",
      "We measured 4.08 TB/s of read bandwidth on the device, and it's the floor we compare against.",
      "def encode(text):\n    return [vocab[w] for w in text.split()]\n",
  };
  std::string out;
  for (size_t i = 0; out.size() < bytes; ++i) {
    out += ja[i % ja.size()];
    out += std::to_string(i * 7919 % 100000);
    out += en[(i * 5) % en.size()];
    out += (i % 4 == 3) ? "\n\n" : " ";
  }
  out.resize(bytes);
  // Do not end inside a UTF-8 character.
  while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
  if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
  return out;
}

std::string assets() { return std::string(HAYATE_ASSETS_DIR) + "/llama3_1"; }

void BM_Encode(benchmark::State& state) {
  static const hayate::Tokenizer tok = hayate::Tokenizer::load(assets());
  const std::string text = mixed_text(1 << 20);
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = tok.encode(text, true);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}
BENCHMARK(BM_Encode)->Unit(benchmark::kMillisecond);

void BM_EncodeColdCache(benchmark::State& state) {
  const std::string text = mixed_text(1 << 20);
  for (auto _ : state) {
    state.PauseTiming();
    hayate::Tokenizer tok = hayate::Tokenizer::load(assets());
    state.ResumeTiming();
    benchmark::DoNotOptimize(tok.encode(text, true).data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_EncodeColdCache)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_Decode(benchmark::State& state) {
  static const hayate::Tokenizer tok = hayate::Tokenizer::load(assets());
  const std::string text = mixed_text(1 << 20);
  auto ids = tok.encode(text, false);
  for (auto _ : state) benchmark::DoNotOptimize(tok.decode(ids).data());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
