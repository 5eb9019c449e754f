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

namespace {

// Rows [r0, r0 + n) of a row-major [*, cols] matrix, appended to out.
void take_rows(const std::vector<float>& m, int64_t cols, int64_t r0, int64_t n,
               std::vector<float>& out) {
  out.insert(out.end(), m.begin() + r0 * cols, m.begin() + (r0 + n) * cols);
}

// Columns [c0, c0 + n) of every row of a row-major [rows, cols] matrix.
std::vector<float> take_cols(const std::vector<float>& m, int64_t cols, int64_t c0, int64_t n) {
  const int64_t rows = int64_t(m.size()) / cols;
  std::vector<float> out(size_t(rows * n));
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(m.begin() + r * cols + c0, n, out.begin() + r * n);
  return out;
}

}  // namespace

CpuWeights shard_cpu_weights(const CpuWeights& full, const ModelConfig& c, const TpShard& s) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, hd = c.head_dim;
  CpuWeights w;
  take_rows(full.embed, H, s.vocab0, s.vocab, w.embed);
  if (!c.tie_word_embeddings) take_rows(full.lm_head, H, s.vocab0, s.vocab, w.lm_head);
  w.final_norm = full.final_norm;
  w.inv_freq = full.inv_freq;
  w.k_scales = full.k_scales;
  w.v_scales = full.v_scales;
  w.layers.resize(full.layers.size());
  for (size_t l = 0; l < full.layers.size(); ++l) {
    const CpuLayer& F = full.layers[l];
    CpuLayer& L = w.layers[l];
    // [q | k | v] rows of the fused projection: this rank's heads of each part.
    const auto qkv_rows = [&](const std::vector<float>& m, int64_t cols, std::vector<float>& out) {
      take_rows(m, cols, s.head0 * hd, s.heads * hd, out);
      take_rows(m, cols, c.q_dim() + s.kv_head0 * hd, s.kv_heads * hd, out);
      take_rows(m, cols, c.q_dim() + c.kv_dim() + s.kv_head0 * hd, s.kv_heads * hd, out);
    };
    qkv_rows(F.wqkv, H, L.wqkv);
    if (!F.bqkv.empty()) qkv_rows(F.bqkv, 1, L.bqkv);
    L.q_norm = F.q_norm;
    L.k_norm = F.k_norm;
    L.attn_norm = F.attn_norm;
    L.ffn_norm = F.ffn_norm;
    L.wo = take_cols(F.wo, c.q_dim(), s.head0 * hd, s.heads * hd);
    take_rows(F.w_gate_up, H, s.inter0, s.inter, L.w_gate_up);      // gate
    take_rows(F.w_gate_up, H, I + s.inter0, s.inter, L.w_gate_up);  // up
    L.w_down = take_cols(F.w_down, I, s.inter0, s.inter);
    L.q_qkv = F.q_qkv;
    L.q_o = F.q_o;
    L.q_gate_up = F.q_gate_up;
    L.q_down = F.q_down;
  }
  return w;
}

}  // namespace hayate
