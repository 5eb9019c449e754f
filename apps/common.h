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
  std::string model;             // empty: dummy:llama-3.1-8b on a GPU, else dummy:tiny
  std::string backend = "auto";  // auto | cpu | cuda
  std::string dtype = "float16";
  std::string tokenizer;         // directory; default: the checkpoint's, or assets for dummy:
  uint64_t seed = 0;
  int max_context = 0;
};

void add_model_options(CLI::App* cmd, ModelArgs& args);

// The resolved choices ("auto" and an empty model made concrete).
std::string resolve_backend(const ModelArgs& args);
std::string resolve_model(const ModelArgs& args, const std::string& backend);
DType parse_dtype(const std::string& name);  // float16|bfloat16|float32

// Directory holding llama3_1/tokenizer.json for dummy models.
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
void add_profile_command(CLI::App& app);
// `hayate report` on a profile's JSON: floor against measured per op, as text bars.
std::string profile_chart(const nlohmann::json& profile);

}  // namespace hayate
