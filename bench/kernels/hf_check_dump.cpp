// The hayate half of tools/hf_8b_check.py: runs a dummy model teacher-forced
// over N tokens on the batched CUDA backend (one sequence) and writes, into DIR, what the Python
// side needs to rebuild the same model in transformers and compare:
//   config.json   the dummy architecture's config.json text
//   weights.tsv   name, dummy stream, scale, offset, shape (one weight a line)
//   meta.txt      seed, dtype, n tokens
//   tokens.bin    int32 [n]   (deterministic ids)
//   logits.bin    float32 [n, vocab]  (all positions)
// With `decode` the logits come from n single-token steps (bucket 1's decode
// graph: the persistent kernel) instead of one prefill chunk of n tokens.
// With `fp8` (a 6th argument) the model runs --quantization fp8 and meta.txt
// says so (the Python side applies the same fake quantization); with `kv8`
// (a 7th) the KV cache is e4m3 too (--kv-cache-dtype fp8, scales 1.0).
// Usage: hf_check_dump DIR [dummy:NAME] [n] [float16|bfloat16] [decode|prefill] [fp8|none] [kv8]
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <fstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "cuda/cuda_batch_backend.h"
#include "model/model.h"

int main(int argc, char** argv) {
  using namespace hayate;
  try {
    HAYATE_CHECK(argc >= 2,
                 "usage: hf_check_dump DIR [dummy:NAME] [n] [float16|bfloat16] [decode]");
    const std::string dir = argv[1];
    const std::string spec = argc > 2 ? argv[2] : "dummy:llama-3.1-8b";
    const int n = argc > 3 ? std::stoi(argv[3]) : 128;
    const std::string dt = argc > 4 ? argv[4] : "float16";
    const bool decode = argc > 5 && std::string(argv[5]) == "decode";
    const bool fp8 = argc > 6 && std::string(argv[6]) == "fp8";
    const bool kv8 = argc > 7 && std::string(argv[7]) == "kv8";
    const uint64_t seed = 0;
    Model m = load_model(spec, seed, HAYATE_ASSETS_DIR);
    if (fp8) apply_quantization(m, "fp8");
    BatchBackendOptions o;
    o.max_model_len = std::max(n, 256);
    o.num_blocks = (o.max_model_len + o.block_size - 1) / o.block_size;
    o.max_num_seqs = 1;
    o.max_num_batched_tokens = std::max(n, 1);
    o.max_logit_rows = n;
    o.dtype = dt == "bfloat16" ? DType::BF16 : DType::F16;
    o.kv_cache_dtype = kv8 ? KvCacheDtype::kFp8 : KvCacheDtype::kAuto;
    auto b = make_cuda_batch_backend(m, o);
    std::vector<int32_t> tokens(n), table(size_t(o.num_blocks));
    for (int i = 0; i < n; ++i)
      tokens[i] = int32_t((uint64_t(i) * 0x9e3779b1u + 12345) % uint64_t(m.config.vocab_size));
    std::iota(table.begin(), table.end(), 0);
    const size_t V = size_t(m.config.vocab_size);
    std::vector<float> logits(size_t(n) * V);
    // Tokens [first, first + count) of the one sequence, all their logits kept.
    auto run = [&](int first, int count) {
      Batch batch;
      BatchSeq q;
      q.tokens = std::span<const int32_t>(tokens).subspan(size_t(first), size_t(count));
      q.start_pos = first;
      q.block_table = std::span<const int32_t>(table).first(
          size_t((first + count + o.block_size - 1) / o.block_size));
      q.all_logits = true;
      batch.seqs.push_back(q);
      batch.num_tokens = count;
      int32_t sampled = 0;
      b->step(batch, std::span(&sampled, 1));
      b->last_chunk_logits(0, std::span(logits).subspan(size_t(first) * V, size_t(count) * V));
    };
    if (decode)
      for (int i = 0; i < n; ++i) run(i, 1);
    else
      run(0, n);

    std::ofstream(dir + "/config.json") << dummy_config_json(spec.substr(6));
    std::ofstream w(dir + "/weights.tsv");
    for (const WeightSource& ws : m.weights) {
      w << ws.name << '\t' << ws.dummy_stream << '\t';
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.9g\t%.9g", double(ws.dummy_scale), double(ws.dummy_offset));
      w << buf;
      for (int64_t d : ws.shape) w << '\t' << d;
      w << '\n';
    }
    std::ofstream(dir + "/meta.txt") << "seed " << seed << "\ndtype " << dt << "\nn " << n
                                     << "\nquantization " << (fp8 ? "fp8" : "none")
                                     << "\nkv_cache_dtype " << (kv8 ? "fp8" : "auto") << "\n";
    std::ofstream(dir + "/tokens.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 4));
    std::ofstream(dir + "/logits.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(logits.data()), std::streamsize(logits.size() * 4));
    std::printf("hf_check_dump: %s %s, %d tokens (%s) -> %s\n", spec.c_str(), dt.c_str(), n,
                decode ? "decode steps" : "prefill", dir.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hf_check_dump: %s\n", e.what());
    return 1;
  }
}
