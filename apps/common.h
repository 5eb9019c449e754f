// Options shared by every command that runs a model, and the one place that
// turns them into a loaded model, tokenizer and backend.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/batch_backend.h"
#include "engine/engine.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace hayate {

struct ModelArgs {
  // A checkpoint directory, a Hugging Face repository id (ORG/NAME, from the
  // local cache) or dummy:NAME; empty: dummy:llama-3.1-8b on a GPU, else
  // dummy:tiny (serve refuses an empty one).
  std::string model;
  std::string revision = "main";  // of a repository id
  std::string backend = "auto";   // auto | cpu | cuda
  // auto (the checkpoint's torch_dtype, fp16 for fp32 checkpoints, as vLLM)
  // | float16 | bfloat16 | float32 (cpu). The default stays float16, the
  // dtype every figure in docs/benchmarks.md was measured in.
  std::string dtype = "float16";
  std::string tokenizer;         // directory; default: the checkpoint's, or assets for dummy:
  uint64_t seed = 0;
  int max_context = 0;
  // vLLM's: "" or fp8 (W8A8, weights quantized per channel at load; FP8
  // checkpoints need no flag), and auto | fp8 (e4m3 K/V in the pool).
  std::string quantization;
  std::string kv_cache_dtype = "auto";
  int tensor_parallel_size = 1;  // vLLM's --tensor-parallel-size / -tp
};

// The model options, each declared once with its aliases: vLLM's names
// first, hayate's older ones after. `serving` adds llama-server's short
// names (-c) where the command has no option of its own under them.
void add_model_options(CLI::App* cmd, ModelArgs& args, bool serving = false);

// The resolved choices ("auto" and an empty model made concrete). A
// repository id becomes its snapshot folder in the local Hugging Face cache
// ($HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub).
std::string resolve_backend(const ModelArgs& args);
std::string resolve_model(const ModelArgs& args, const std::string& backend);
// Checks a --dtype value (one line naming the choices) before anything loads.
void check_dtype(const std::string& name);
// The weight dtype of `config`'s model under --dtype (auto resolved).
DType resolve_dtype(const ModelArgs& args, const ModelConfig& config);
// --kv-cache-dtype as the backend option (one line naming the choices).
KvCacheDtype resolve_kv_cache_dtype(const ModelArgs& args);
// load_model with --quantization applied: every command loads through it.
Model load_model_args(const std::string& spec, const ModelArgs& args);
// What a result records: "fp8" or "none", and "fp8" or the KV's compute dtype.
std::string quantization_name(const Model& model);

// hayate's data folder, found relative to the binary, never through the
// source tree it was built from: $HAYATE_HOME, else BIN/../share/hayate
// (cmake --install), else BIN/../.. (build/<preset>/hayate in a checkout),
// else the working directory. It holds assets/ and tools/.
std::string hayate_home();
// hayate_home()/assets: llama3_1/, qwen3/, llama2/ tokenizer files for dummy models.
std::string assets_dir();

// The backend the engine runs on: cpu or cuda.
std::unique_ptr<BatchBackend> make_batch_backend(const std::string& backend, const Model& model,
                                                 const BatchBackendOptions& options);

// The engine of an offline command (generate, perplexity, the article's
// bench): `sequences` sequences of up to --max-context tokens at once, the KV
// pool sized for exactly that (not from the GPU's free memory), graphs for
// up to `sequences` rows.
struct LocalEngine {
  std::unique_ptr<BatchBackend> backend;
  std::unique_ptr<Engine> engine;
};
LocalEngine make_local_engine(const std::string& backend, const Model& model,
                              const Tokenizer* tokenizer, const ModelArgs& args, int sequences,
                              int logit_rows = 0);

struct Loaded {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  LocalEngine local;
  BatchBackend& backend() { return *local.backend; }
  Engine& engine() { return *local.engine; }
};
// Model, tokenizer and engine (make_local_engine's sequences and logit_rows).
Loaded load(const ModelArgs& args, int sequences = 1, int logit_rows = 0);
std::unique_ptr<Tokenizer> load_tokenizer_only(const ModelArgs& args);

// Subcommands; each lives in its own cmd_*.cpp.
void add_generate_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_profile_command(CLI::App& app);
// `hayate report` on a profile's JSON: floor against measured per op, as text bars.
std::string profile_chart(const nlohmann::json& profile);

}  // namespace hayate
