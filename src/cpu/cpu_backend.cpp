// The fp32 CPU reference backend. Weights are converted to fp32 once at load;
// forward() reads top to bottom like HF's LlamaForCausalLM.forward.
#include "cpu/cpu_backend.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "cpu/ops.h"
#include "model/model.h"

namespace hayate {
namespace {

struct Layer {
  std::vector<float> attn_norm;  // [hidden]
  std::vector<float> wqkv;       // [q_dim + 2 kv_dim, hidden]
  std::vector<float> wo;         // [hidden, q_dim]
  std::vector<float> ffn_norm;   // [hidden]
  std::vector<float> w_gate_up;  // [2 * intermediate, hidden]
  std::vector<float> w_down;     // [hidden, intermediate]
};

std::vector<float> load_f32(const Model& m, const std::string& name, int64_t expected) {
  const WeightSource& w = m.weight(name);
  HAYATE_CHECK(w.numel() == expected, "weight ", name, " has ", w.numel(),
               " elements, expected ", expected);
  std::vector<float> out(static_cast<size_t>(expected));
  weight_to_f32(m, w, out);
  return out;
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(const Model& model, const BackendOptions& options) : c_(model.config) {
    HAYATE_CHECK(c_.num_kv_heads > 0 && c_.num_heads % c_.num_kv_heads == 0,
                 "num_attention_heads ", c_.num_heads, " is not a multiple of num_key_value_heads ",
                 c_.num_kv_heads);
    HAYATE_CHECK(c_.head_dim > 0 && c_.head_dim % 2 == 0, "head_dim ", c_.head_dim,
                 " must be positive and even");
    max_context_ = options.max_context > 0 ? options.max_context
                                           : std::min(c_.max_position_embeddings, 8192);
    HAYATE_CHECK(max_context_ > 0, "max context ", max_context_, " must be positive");

    const int64_t H = c_.hidden_size, V = c_.vocab_size, I = c_.intermediate_size;
    embed_ = load_f32(model, "embed", V * H);
    final_norm_ = load_f32(model, "final_norm", H);
    if (!c_.tie_word_embeddings) lm_head_ = load_f32(model, "lm_head", V * H);
    layers_.resize(size_t(c_.num_layers));
    for (int l = 0; l < c_.num_layers; ++l) {
      const std::string p = cat("layers.", l, ".");
      Layer& L = layers_[size_t(l)];
      L.attn_norm = load_f32(model, p + "attn_norm", H);
      L.wqkv = load_f32(model, p + "wqkv", int64_t(c_.qkv_dim()) * H);
      L.wo = load_f32(model, p + "wo", H * c_.q_dim());
      L.ffn_norm = load_f32(model, p + "ffn_norm", H);
      L.w_gate_up = load_f32(model, p + "w_gate_up", 2 * I * H);
      L.w_down = load_f32(model, p + "w_down", H * I);
    }
    inv_freq_ = rope_inv_freq(c_);
    HAYATE_CHECK(int(inv_freq_.size()) == c_.head_dim / 2, "rope table has ", inv_freq_.size(),
                 " entries, expected ", c_.head_dim / 2);
    const size_t cache = size_t(c_.num_layers) * size_t(max_context_) * size_t(c_.kv_dim());
    k_cache_.assign(cache, 0.0f);
    v_cache_.assign(cache, 0.0f);
  }

  std::string name() const override { return "cpu"; }
  const ModelConfig& config() const override { return c_; }
  int max_context() const override { return max_context_; }

  double weight_bytes_per_token() const override {
    double floats = double(final_norm_.size()) + double(lm_weights().size());
    for (const Layer& L : layers_)
      floats += double(L.attn_norm.size() + L.wqkv.size() + L.wo.size() + L.ffn_norm.size() +
                       L.w_gate_up.size() + L.w_down.size());
    return floats * sizeof(float);
  }

  void forward(std::span<const int32_t> tokens, int pos, std::span<float> logits,
               bool all_logits) override {
    const int n = int(tokens.size());
    HAYATE_CHECK(n > 0, "forward: no tokens");
    HAYATE_CHECK(pos >= 0 && int64_t(pos) + n <= max_context_, "forward: positions [", pos, ", ",
                 int64_t(pos) + n, ") exceed the context of ", max_context_, " tokens");
    const int H = c_.hidden_size, I = c_.intermediate_size, V = c_.vocab_size;
    const int q_dim = c_.q_dim(), kv_dim = c_.kv_dim(), qkv_dim = c_.qkv_dim();
    const int out_rows = all_logits ? n : 1;
    HAYATE_CHECK(logits.size() == size_t(out_rows) * size_t(V), "forward: logits buffer has ",
                 logits.size(), " floats, expected ", size_t(out_rows) * size_t(V));

    std::vector<float> x(size_t(n) * H), h(size_t(n) * H), tmp(size_t(n) * H);
    std::vector<float> qkv(size_t(n) * qkv_dim), q(size_t(n) * q_dim), att(size_t(n) * q_dim);
    std::vector<float> gu(size_t(n) * 2 * I), act(size_t(n) * I);

    cpu::embedding(tokens, embed_.data(), V, H, x.data());  // x: [n, H]
    for (int l = 0; l < c_.num_layers; ++l) {
      const Layer& L = layers_[size_t(l)];
      float* kc = k_cache_.data() + size_t(l) * max_context_ * kv_dim;  // [ctx, kv_dim]
      float* vc = v_cache_.data() + size_t(l) * max_context_ * kv_dim;
      // Attention block: x += wo . attention(rope(q), rope(k), v).
      cpu::rmsnorm(x.data(), L.attn_norm.data(), h.data(), n, H, c_.rms_norm_eps);
      cpu::matmul(L.wqkv.data(), h.data(), qkv.data(), n, qkv_dim, H);  // [n, q|k|v]
      for (int t = 0; t < n; ++t) {
        const float* row = qkv.data() + size_t(t) * qkv_dim;
        std::copy(row, row + q_dim, q.data() + size_t(t) * q_dim);
        std::copy(row + q_dim, row + q_dim + kv_dim, kc + size_t(pos + t) * kv_dim);
        std::copy(row + q_dim + kv_dim, row + qkv_dim, vc + size_t(pos + t) * kv_dim);
      }
      cpu::rope(q.data(), n, c_.num_heads, c_.head_dim, pos, inv_freq_.data());
      cpu::rope(kc + size_t(pos) * kv_dim, n, c_.num_kv_heads, c_.head_dim, pos,
                inv_freq_.data());
      cpu::attention(q.data(), kc, vc, att.data(), n, pos, c_.num_heads, c_.num_kv_heads,
                     c_.head_dim);
      cpu::matmul(L.wo.data(), att.data(), tmp.data(), n, H, q_dim);
      cpu::add(x.data(), tmp.data(), int64_t(n) * H);
      // MLP block: x += w_down . (silu(gate) * up).
      cpu::rmsnorm(x.data(), L.ffn_norm.data(), h.data(), n, H, c_.rms_norm_eps);
      cpu::matmul(L.w_gate_up.data(), h.data(), gu.data(), n, 2 * I, H);
      cpu::silu_mul(gu.data(), act.data(), n, I);
      cpu::matmul(L.w_down.data(), act.data(), tmp.data(), n, H, I);
      cpu::add(x.data(), tmp.data(), int64_t(n) * H);
    }
    // Final norm and LM head, only on the rows whose logits are wanted.
    const float* last = x.data() + size_t(n - out_rows) * H;
    cpu::rmsnorm(last, final_norm_.data(), h.data(), out_rows, H, c_.rms_norm_eps);
    cpu::matmul(lm_weights().data(), h.data(), logits.data(), out_rows, V, H);
  }

 private:
  const std::vector<float>& lm_weights() const {
    return c_.tie_word_embeddings ? embed_ : lm_head_;
  }

  ModelConfig c_;
  int max_context_ = 0;
  std::vector<float> embed_;       // [vocab, hidden]
  std::vector<float> final_norm_;  // [hidden]
  std::vector<float> lm_head_;     // [vocab, hidden]; empty when tied
  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;    // [head_dim / 2]
  std::vector<float> k_cache_;     // [layers, max_context, kv_dim], roped keys
  std::vector<float> v_cache_;     // [layers, max_context, kv_dim]
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const Model& model, const BackendOptions& options) {
  return std::make_unique<CpuBackend>(model, options);
}

}  // namespace hayate
