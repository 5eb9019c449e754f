// The hayate half of tools/hf_8b_check.py: runs a dummy model teacher-forced
// over N tokens on the CUDA backend and writes, into DIR, what the Python
// side needs to rebuild the same model in transformers and compare:
//   config.json   the dummy architecture's config.json text
//   weights.tsv   name, dummy stream, scale, offset, shape (one weight a line)
//   meta.txt      seed, dtype, n tokens
//   tokens.bin    int32 [n]   (deterministic ids)
//   logits.bin    float32 [n, vocab]  (all positions)
// With `decode` the logits come from n single-token steps (the decode step:
// the persistent kernel by default) instead of one prefill of n tokens.
// Usage: hf_check_dump DIR [dummy:NAME] [n] [float16|bfloat16] [decode]
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "cuda/cuda_backend.h"
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
    const uint64_t seed = 0;
    Model m = load_model(spec, seed, HAYATE_ASSETS_DIR);
    auto b = make_cuda_backend(m, {std::max(n, 256), dt == "bfloat16" ? DType::BF16 : DType::F16, 0});
    std::vector<int32_t> tokens(n);
    for (int i = 0; i < n; ++i)
      tokens[i] = int32_t((uint64_t(i) * 0x9e3779b1u + 12345) % uint64_t(m.config.vocab_size));
    const size_t V = size_t(m.config.vocab_size);
    std::vector<float> logits(size_t(n) * V);
    if (decode)
      for (int i = 0; i < n; ++i)
        b->forward(std::span(&tokens[size_t(i)], 1), i, std::span(logits).subspan(i * V, V), false);
    else
      b->forward(tokens, 0, logits, true);

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
    std::ofstream(dir + "/meta.txt") << "seed " << seed << "\ndtype " << dt << "\nn " << n << "\n";
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
