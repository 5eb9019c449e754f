// The fp32 CPU reference backend. Weights are converted to fp32 once at load;
// forward() reads top to bottom like HF's LlamaForCausalLM.forward.
#include "cpu/cpu_backend.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "cpu/cpu_weights.h"
#include "cpu/ops.h"
#include "model/model.h"

namespace hayate {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const Model& model, const BackendOptions& options) : c_(model.config) {
    max_context_ =
        options.max_context > 0 ? options.max_context : std::min(c_.max_position_embeddings, 8192);
    HAYATE_CHECK(max_context_ > 0, "max context ", max_context_, " must be positive");

    w_ = load_cpu_weights(model);
    const size_t cache = size_t(c_.num_layers) * size_t(max_context_) * size_t(c_.kv_dim());
    k_cache_.assign(cache, 0.0f);
    v_cache_.assign(cache, 0.0f);
  }

  std::string name() const override { return "cpu"; }
  const ModelConfig& config() const override { return c_; }
  int max_context() const override { return max_context_; }

  double weight_bytes_per_token() const override { return w_.floats_per_token(c_) * sizeof(float); }

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

    cpu::embedding(tokens, w_.embed.data(), V, H, x.data());  // x: [n, H]
    for (int l = 0; l < c_.num_layers; ++l) {
      const CpuLayer& L = w_.layers[size_t(l)];
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
      cpu::rope(q.data(), n, c_.num_heads, c_.head_dim, pos, w_.inv_freq.data());
      cpu::rope(kc + size_t(pos) * kv_dim, n, c_.num_kv_heads, c_.head_dim, pos,
                w_.inv_freq.data());
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
    cpu::rmsnorm(last, w_.final_norm.data(), h.data(), out_rows, H, c_.rms_norm_eps);
    cpu::matmul(w_.lm(c_).data(), h.data(), logits.data(), out_rows, V, H);
  }

 private:
  ModelConfig c_;
  int max_context_ = 0;
  CpuWeights w_;
  std::vector<float> k_cache_;  // [layers, max_context, kv_dim], roped keys
  std::vector<float> v_cache_;  // [layers, max_context, kv_dim]
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const Model& model, const BackendOptions& options) {
  return std::make_unique<CpuBackend>(model, options);
}

}  // namespace hayate
