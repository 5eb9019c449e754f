#include "apps/common.h"

#include <cstdlib>
#include <filesystem>

#include "core/check.h"
#include "cpu/cpu_paged_backend.h"
#include "model/hf_cache.h"
#include "model/tensor_parallel.h"
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
    check_tensor_parallel(model.config, options.tensor_parallel_size);
    HAYATE_CHECK(options.tensor_parallel_size <= cuda_device_count(), "--tensor-parallel-size ",
                 options.tensor_parallel_size, " exceeds the ", cuda_device_count(),
                 " CUDA GPUs visible");
    HAYATE_CHECK(options.tensor_parallel_size == 1, "--tensor-parallel-size ",
                 options.tensor_parallel_size,
                 ": the cuda backend runs on one GPU (ranks over NCCL are not built yet; "
                 "--backend cpu simulates them)");
    return make_cuda_batch_backend(model, options);
#else
    fail("--backend cuda: this build has no CUDA backend (nvcc was not found at build time)");
#endif
  }
  fail(cat("unknown backend '", name, "' (expected cpu or cuda)"));
}

void add_model_options(CLI::App* cmd, ModelArgs& args, bool serving) {
  cmd->add_option("model,--model,-m", args.model,
                  serving ? "checkpoint directory, Hugging Face id ORG/NAME (from the local "
                            "cache) or dummy:NAME (llama-3.1-8b, llama-3.2-1b, tiny)"
                          : "checkpoint directory, Hugging Face id ORG/NAME (from the local "
                            "cache) or dummy:NAME (llama-3.1-8b, llama-3.2-1b, tiny); default "
                            "dummy:llama-3.1-8b on a GPU, else dummy:tiny");
  cmd->add_option("--revision", args.revision,
                  "branch, tag or commit of a Hugging Face id (refs/ in the cache)")
      ->capture_default_str();
  cmd->add_option("--backend", args.backend, "auto, cpu or cuda")->capture_default_str();
  cmd->add_option("--dtype", args.dtype,
                  "weights and compute on the GPU: auto (the checkpoint's), float16 (half), "
                  "bfloat16; the CPU always computes in float32")
      ->capture_default_str();
  cmd->add_option("--quantization,-q", args.quantization,
                  "fp8: W8A8 FP8 (e4m3 weights per output channel, quantized at load; "
                  "activations per token), as vLLM's; FP8 checkpoints need no flag");
  cmd->add_option("--kv-cache-dtype", args.kv_cache_dtype,
                  "auto (the compute dtype) or fp8 (e4m3 K/V with per-layer scales: the "
                  "checkpoint's k_scale/v_scale, else 1.0)")
      ->capture_default_str();
  cmd->add_option("--tensor-parallel-size", args.tensor_parallel_size,
                  "ranks the model is split across, also -tp (Megatron-style: heads, MLP "
                  "columns and vocabulary); the cpu backend runs them as threads, the cuda "
                  "backend runs 1")
      ->capture_default_str();
  cmd->add_option("--tokenizer", args.tokenizer,
                  "directory with tokenizer.json (default: the checkpoint's)");
  cmd->add_option("--seed", args.seed, "seed of dummy weights and of sampling")
      ->capture_default_str();
  cmd->add_option(serving ? "--max-model-len,--max-context,--ctx-size,-c"
                          : "--max-model-len,--max-context",
                  args.max_context,
                  "context length in tokens, prompt + output (default min(max_position_embeddings, "
                  "8192))");
}

std::string resolve_backend(const ModelArgs& args) {
  HAYATE_CHECK(args.backend == "auto" || args.backend == "cpu" || args.backend == "cuda",
               "--backend: unknown backend '", args.backend, "' (expected auto, cpu or cuda)");
  check_dtype(args.dtype);  // every command resolves its backend before loading
  (void)resolve_kv_cache_dtype(args);
  HAYATE_CHECK(args.tensor_parallel_size >= 1, "--tensor-parallel-size must be >= 1, got ",
               args.tensor_parallel_size);
  HAYATE_CHECK(args.quantization.empty() || args.quantization == "fp8" ||
                   args.quantization == "none",
               "--quantization: unknown method '", args.quantization, "' (expected fp8)");
  if (args.backend != "auto") return args.backend;
  return cuda_available() ? "cuda" : "cpu";
}

std::string resolve_model(const ModelArgs& args, const std::string& backend) {
  if (args.model.empty()) return backend == "cuda" ? "dummy:llama-3.1-8b" : "dummy:tiny";
  if (args.model.rfind("dummy:", 0) == 0 || std::filesystem::is_directory(args.model))
    return args.model;
  HAYATE_CHECK(looks_like_hub_id(args.model), "--model '", args.model,
               "' is not a directory, a Hugging Face id (ORG/NAME) or dummy:NAME");
  return resolve_hf_snapshot(args.model, args.revision,
                             hf_hub_cache_dir(std::getenv("HF_HUB_CACHE"), std::getenv("HF_HOME"),
                                              std::getenv("XDG_CACHE_HOME"), std::getenv("HOME")));
}

void check_dtype(const std::string& name) {
  for (const char* ok : {"auto", "float16", "half", "fp16", "bfloat16", "bf16", "float32", "float",
                         "fp32"})
    if (name == ok) return;
  fail(cat("--dtype: unknown dtype '", name, "' (expected auto, float16, bfloat16 or float32)"));
}

static DType parse_dtype(const std::string& name) {
  if (name == "float16" || name == "fp16" || name == "half") return DType::F16;
  if (name == "bfloat16" || name == "bf16") return DType::BF16;
  if (name == "float32" || name == "fp32" || name == "float") return DType::F32;
  fail(cat("--dtype: unknown dtype '", name, "' (expected auto, float16, bfloat16 or float32)"));
}

DType resolve_dtype(const ModelArgs& args, const ModelConfig& config) {
  check_dtype(args.dtype);
  if (args.dtype != "auto") return parse_dtype(args.dtype);
  // vLLM's auto: the checkpoint's half type; fp32 checkpoints run in fp16.
  return config.torch_dtype == DType::BF16 ? DType::BF16 : DType::F16;
}

KvCacheDtype resolve_kv_cache_dtype(const ModelArgs& args) {
  if (args.kv_cache_dtype == "auto") return KvCacheDtype::kAuto;
  if (args.kv_cache_dtype == "fp8" || args.kv_cache_dtype == "fp8_e4m3") return KvCacheDtype::kFp8;
  fail(cat("--kv-cache-dtype: unknown value '", args.kv_cache_dtype,
           "' (expected auto or fp8; fp8_e5m2 is not supported)"));
}

Model load_model_args(const std::string& spec, const ModelArgs& args) {
  Model m = load_model(spec, args.seed, assets_dir());
  apply_quantization(m, args.quantization);
  return m;
}

std::string quantization_name(const Model& model) { return model.quant.fp8() ? "fp8" : "none"; }

std::string hayate_home() {
  namespace fs = std::filesystem;
  auto has_assets = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_directory(p / "assets", ec);
  };
  if (const char* h = std::getenv("HAYATE_HOME"); h && *h) {
    HAYATE_CHECK(has_assets(h), "HAYATE_HOME=", h, " has no assets/ folder");
    return h;
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& p : {exe.parent_path() / ".." / "share" / "hayate",
                              exe.parent_path() / ".." / ".."})
      if (has_assets(p)) return p.lexically_normal().string();
  }
  if (has_assets(".")) return ".";
  fail("hayate's assets/ folder was not found (next to the binary: ../share/hayate/assets "
       "when installed, ../../assets in a build tree; or set HAYATE_HOME); scripts/setup.sh "
       "fetches them");
}

std::string assets_dir() { return hayate_home() + "/assets"; }

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
  bo.dtype = resolve_dtype(args, model.config);
  bo.kv_cache_dtype = resolve_kv_cache_dtype(args);
  bo.tensor_parallel_size = args.tensor_parallel_size;
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
  out.model = std::make_unique<Model>(load_model_args(resolve_model(args, backend), args));
  out.tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(tokenizer_dir_for(args, *out.model)));
  out.local =
      make_local_engine(backend, *out.model, out.tokenizer.get(), args, sequences, logit_rows);
  return out;
}

std::unique_ptr<Tokenizer> load_tokenizer_only(const ModelArgs& args) {
  if (!args.tokenizer.empty()) return std::make_unique<Tokenizer>(Tokenizer::load(args.tokenizer));
  std::string spec = resolve_model(args, "cpu");
  if (spec.rfind("dummy:", 0) == 0) {
    return std::make_unique<Tokenizer>(
        Tokenizer::load(assets_dir() + "/" + dummy_tokenizer(spec.substr(6))));
  }
  HAYATE_CHECK(std::filesystem::is_directory(spec), spec, ": not a directory");
  return std::make_unique<Tokenizer>(Tokenizer::load(spec));
}

}  // namespace hayate
