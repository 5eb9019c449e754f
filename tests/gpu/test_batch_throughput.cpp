// Throughput driver of the batched CUDA backend (until `hayate bench --mode
// throughput` takes --backend cuda): runs bench::run_throughput presets on one
// backend and writes each result as JSON.
//   test_batch_throughput MODEL OUT_DIR PRESET[:NUM_PROMPTS] ...
// e.g. test_batch_throughput dummy:llama-3.1-8b out llmib-128-b64 llmib-1024-b64:64
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/throughput.h"
#include "core/check.h"
#include "cuda/cuda_batch_backend.h"
#include "model/model.h"

int main(int argc, char** argv) try {
  using namespace hayate;
  HAYATE_CHECK(argc >= 4, "usage: ", argv[0], " MODEL OUT_DIR PRESET[:NUM_PROMPTS] ...");
  const Model model = load_model(argv[1], 0, HAYATE_ASSETS_DIR);
  BatchBackendOptions bo;
  bo.max_model_len = 4096;
  bo.max_num_seqs = 256;
  bo.max_num_batched_tokens = 8192;
  bo.dtype = DType::F16;
  std::unique_ptr<BatchBackend> backend = make_cuda_batch_backend(model, bo);
  for (int a = 3; a < argc; ++a) {
    const std::string spec = argv[a];
    const size_t colon = spec.find(':');
    bench::ThroughputOptions opt;
    bench::apply_throughput_preset(spec.substr(0, colon), opt);
    if (colon != std::string::npos) opt.num_prompts = std::stoi(spec.substr(colon + 1));
    opt.warmup = 4;
    opt.max_num_seqs = bo.max_num_seqs;
    opt.max_num_batched_tokens = bo.max_num_batched_tokens;
    bench::ThroughputResult r = bench::run_throughput(*backend, nullptr, opt, &std::cerr);
    r.model.spec = argv[1];
    r.model.dtype = "float16";
    r.notes.push_back("batched cuda backend, driver tests/gpu/test_batch_throughput.cpp");
    std::cout << "== " << spec << "\n" << bench::format_throughput(r) << std::flush;
    std::ofstream(std::string(argv[2]) + "/" + opt.preset + ".json") << bench::to_json(r).dump(2);
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "error: " << e.what() << "\n";
  return 1;
}
