#include "apps/common.h"

#include <filesystem>

#include "core/check.h"
#include "cpu/cpu_paged_backend.h"
#if HAYATE_HAVE_CUDA
#include "cuda/cuda_batch_backend.h"
#endif

namespace hayate {

bool cuda_available() {
#if HAYATE_HAVE_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

std::unique_ptr<BatchBackend> make_batch_backend(const std::string& name, const Model& model,
                                                 const BatchBackendOptions& given) {
  BatchBackendOptions options = given;
  options.switches = Switches::from_environment();
  if (name == "cpu") return make_cpu_paged_backend(model, options);
  if (name == "cuda") {
#if HAYATE_HAVE_CUDA
    HAYATE_CHECK(cuda_device_count() > 0, "--backend cuda: no CUDA GPU is visible");
    return make_cuda_batch_backend(model, options);
#else
    fail("--backend cuda: this build has no CUDA backend (nvcc was not found at build time)");
#endif
  }
  fail(cat("unknown backend '", name, "' (expected cpu or cuda)"));
}

void add_model_options(CLI::App* cmd, ModelArgs& args) {
  cmd->add_option("--model,-m", args.model,
                  "checkpoint directory or dummy:NAME (llama-3.1-8b, llama-3.2-1b, tiny); "
                  "default dummy:llama-3.1-8b on a GPU, else dummy:tiny");
  cmd->add_option("--backend", args.backend, "auto, cpu or cuda")->capture_default_str();
  cmd->add_option("--dtype", args.dtype, "GPU weight dtype: float16 or bfloat16")
      ->capture_default_str();
  cmd->add_option("--tokenizer", args.tokenizer,
                  "directory with tokenizer.json (default: the checkpoint's)");
  cmd->add_option("--seed", args.seed, "seed of dummy weights and of sampling")
      ->capture_default_str();
  cmd->add_option("--max-context", args.max_context,
                  "KV-cache capacity in tokens (default min(max_position_embeddings, 8192))");
}

std::string resolve_backend(const ModelArgs& args) {
  if (args.backend != "auto") return args.backend;
  return cuda_available() ? "cuda" : "cpu";
}

std::string resolve_model(const ModelArgs& args, const std::string& backend) {
  if (!args.model.empty()) return args.model;
  return backend == "cuda" ? "dummy:llama-3.1-8b" : "dummy:tiny";
}

DType parse_dtype(const std::string& name) {
  if (name == "float16" || name == "fp16" || name == "half") return DType::F16;
  if (name == "bfloat16" || name == "bf16") return DType::BF16;
  if (name == "float32" || name == "fp32") return DType::F32;
  fail(cat("--dtype: unknown dtype '", name, "' (expected float16 or bfloat16)"));
}

std::string assets_dir() { return HAYATE_ASSETS_DIR; }

static std::string tokenizer_dir_for(const ModelArgs& args, const Model& model) {
  return args.tokenizer.empty() ? model.tokenizer_dir : args.tokenizer;
}

LocalEngine make_local_engine(const std::string& backend, const Model& model,
                              const Tokenizer* tokenizer, const ModelArgs& args, int sequences,
                              int logit_rows) {
  HAYATE_CHECK(args.max_context >= 0, "--max-context must be >= 0, got ", args.max_context);
  const ModelConfig& c = model.config;
  HAYATE_CHECK(args.max_context <= c.max_position_embeddings, "--max-context ", args.max_context,
               " exceeds the model's max_position_embeddings ", c.max_position_embeddings);
  BatchBackendOptions bo;
  bo.max_model_len = args.max_context > 0 ? args.max_context
                                          : std::min(c.max_position_embeddings, 8192);
  bo.num_blocks = sequences * ((bo.max_model_len + bo.block_size - 1) / bo.block_size);
  bo.max_num_seqs = sequences;
  bo.max_num_batched_tokens = std::max(std::min(bo.max_model_len, 2048), sequences);
  bo.max_logit_rows = logit_rows;
  bo.dtype = parse_dtype(args.dtype);
  LocalEngine out;
  out.backend = make_batch_backend(backend, model, bo);
  EngineOptions eo;
  eo.max_num_seqs = bo.max_num_seqs;
  eo.max_num_batched_tokens = bo.max_num_batched_tokens;
  out.engine = std::make_unique<Engine>(*out.backend, tokenizer, eo);
  return out;
}

Loaded load(const ModelArgs& args, int sequences, int logit_rows) {
  Loaded out;
  std::string backend = resolve_backend(args);
  out.model = std::make_unique<Model>(load_model(resolve_model(args, backend), args.seed,
                                                 assets_dir()));
  out.tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(tokenizer_dir_for(args, *out.model)));
  out.local =
      make_local_engine(backend, *out.model, out.tokenizer.get(), args, sequences, logit_rows);
  return out;
}

std::unique_ptr<Tokenizer> load_tokenizer_only(const ModelArgs& args) {
  if (!args.tokenizer.empty()) return std::make_unique<Tokenizer>(Tokenizer::load(args.tokenizer));
  std::string spec = resolve_model(args, "cpu");
  if (spec.rfind("dummy:", 0) == 0) {
    (void)dummy_config_json(spec.substr(6));  // reject unknown names
    return std::make_unique<Tokenizer>(Tokenizer::load(assets_dir() + "/llama3_1"));
  }
  HAYATE_CHECK(std::filesystem::is_directory(spec), spec, ": not a directory");
  return std::make_unique<Tokenizer>(Tokenizer::load(spec));
}

}  // namespace hayate
