#include "cpu/cpu_weights.h"

#include "core/check.h"
#include "core/fp8.h"
#include "model/model.h"

namespace hayate {
namespace {

// Bytes of source data behind a weight (file bytes, or 4 per dummy element).
uint64_t source_bytes(const WeightSource& w) {
  if (w.is_dummy()) return uint64_t(w.numel()) * 4;
  uint64_t b = 0;
  for (const auto& part : w.parts) b += part.size();
  return b;
}

struct Progress {
  const std::function<void(uint64_t, uint64_t)>& fn;
  uint64_t done = 0, total = 0;
};

std::vector<float> load_f32(const Model& m, const std::string& name, int64_t expected,
                            Progress& progress) {
  const WeightSource& w = m.weight(name);
  HAYATE_CHECK(w.numel() == expected, "weight ", name, " has ", w.numel(), " elements, expected ",
               expected);
  std::vector<float> out(static_cast<size_t>(expected));
  weight_to_f32(m, w, out);
  if (w.fp8 && w.dtype != DType::F8E4M3) {  // quantized at load, per output row
    const int64_t rows = w.shape[0], cols = w.shape[1];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) fp8_fake_quantize_row(out.data() + r * cols, size_t(cols), 0.0f);
  }
  progress.done += source_bytes(w);
  if (progress.fn) progress.fn(progress.done, progress.total);
  return out;
}

}  // namespace

double CpuWeights::floats_per_token(const ModelConfig& c) const {
  double floats = double(final_norm.size()) + double(lm(c).size());
  for (const CpuLayer& L : layers)
    floats += double(L.attn_norm.size() + L.wqkv.size() + L.bqkv.size() + L.q_norm.size() +
                     L.k_norm.size() + L.wo.size() + L.ffn_norm.size() + L.w_gate_up.size() +
                     L.w_down.size());
  return floats;
}

CpuWeights load_cpu_weights(const Model& model,
                            const std::function<void(uint64_t, uint64_t)>& progress_fn) {
  Progress progress{progress_fn};
  for (const WeightSource& w : model.weights) progress.total += source_bytes(w);
  if (progress_fn) progress_fn(0, progress.total);
  const ModelConfig& c = model.config;
  HAYATE_CHECK(c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0, "num_attention_heads ",
               c.num_heads, " is not a multiple of num_key_value_heads ", c.num_kv_heads);
  HAYATE_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0, "head_dim ", c.head_dim,
               " must be positive and even");
  const int64_t H = c.hidden_size, V = c.vocab_size, I = c.intermediate_size;
  CpuWeights w;
  w.embed = load_f32(model, "embed", V * H, progress);
  w.final_norm = load_f32(model, "final_norm", H, progress);
  if (!c.tie_word_embeddings) w.lm_head = load_f32(model, "lm_head", V * H, progress);
  w.layers.resize(size_t(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = cat("layers.", l, ".");
    CpuLayer& L = w.layers[size_t(l)];
    L.attn_norm = load_f32(model, p + "attn_norm", H, progress);
    L.wqkv = load_f32(model, p + "wqkv", int64_t(c.qkv_dim()) * H, progress);
    if (c.qkv_bias) L.bqkv = load_f32(model, p + "bqkv", c.qkv_dim(), progress);
    if (c.qk_norm) {
      L.q_norm = load_f32(model, p + "q_norm", c.head_dim, progress);
      L.k_norm = load_f32(model, p + "k_norm", c.head_dim, progress);
    }
    L.wo = load_f32(model, p + "wo", H * c.q_dim(), progress);
    L.ffn_norm = load_f32(model, p + "ffn_norm", H, progress);
    L.w_gate_up = load_f32(model, p + "w_gate_up", 2 * I * H, progress);
    L.w_down = load_f32(model, p + "w_down", H * I, progress);
    const auto quant = [&](const char* name) {
      const WeightSource& ws = model.weight(p + name);
      return LinearQuant{ws.fp8, ws.input_scale};
    };
    L.q_qkv = quant("wqkv");
    L.q_o = quant("wo");
    L.q_gate_up = quant("w_gate_up");
    L.q_down = quant("w_down");
  }
  w.k_scales = model.k_scales;
  w.v_scales = model.v_scales;
  if (w.k_scales.empty()) {
    w.k_scales.assign(size_t(c.num_layers), 1.0f);
    w.v_scales.assign(size_t(c.num_layers), 1.0f);
  }
  w.inv_freq = rope_inv_freq(c);
  HAYATE_CHECK(int(w.inv_freq.size()) == c.head_dim / 2, "rope table has ", w.inv_freq.size(),
               " entries, expected ", c.head_dim / 2);
  return w;
}

}  // namespace hayate
