// The CUDA backend: weights on the GPU, a preallocated KV cache, the decode
// step captured once as a CUDA graph, prefill through cuBLAS GEMMs. The two
// forward passes (decode_step and prefill_chunk) read top to bottom.
#include <cublas_v2.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "core/check.h"
#include "cuda/buffer.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_info.h"
#include "cuda/launch.h"
#include "cuda/stream_timing.h"
#include "cuda/ops.h"
#include "cuda/weights.h"
#include "model/model.h"

namespace hayate {
namespace cuda {
namespace {

constexpr int kPrefillChunk = 256;  // tokens per prefill pass: bounds activation memory

template <typename T> constexpr cudaDataType_t cuda_type();
template <> constexpr cudaDataType_t cuda_type<half>() { return CUDA_R_16F; }
template <> constexpr cudaDataType_t cuda_type<__nv_bfloat16>() { return CUDA_R_16BF; }

template <typename T>
T* alloc(std::vector<DeviceBuffer>& owner, size_t count) {
  owner.emplace_back(std::max<size_t>(count, 1) * sizeof(T));
  return owner.back().as<T>();
}

class CudaTimer final : public RegionTimer {
 public:
  explicit CudaTimer(cudaStream_t s) : s_(s) {
    HAYATE_CUDA_CHECK(cudaEventCreate(&a_));
    HAYATE_CUDA_CHECK(cudaEventCreate(&b_));
  }
  ~CudaTimer() override {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  void start() override { HAYATE_CUDA_CHECK(cudaEventRecord(a_, s_)); }
  double stop_ms() override {
    HAYATE_CUDA_CHECK(cudaEventRecord(b_, s_));
    HAYATE_CUDA_CHECK(cudaEventSynchronize(b_));
    float ms = 0;
    HAYATE_CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
    return ms;
  }

 private:
  cudaStream_t s_;
  cudaEvent_t a_, b_;
};

template <typename T>
class CudaBackend final : public Backend {
 public:
  CudaBackend(const Model& model, const BackendOptions& opt, const CudaTuning& tuning)
      : cfg_(model.config), tuning_(tuning) {
    const ModelConfig& c = cfg_;
    max_ctx_ = opt.max_context > 0 ? opt.max_context : std::min(c.max_position_embeddings, 8192);
    HAYATE_CHECK(max_ctx_ > 0, "max context must be positive, got ", max_ctx_);
    HAYATE_CHECK(c.hidden_size % 8 == 0 && c.intermediate_size % 8 == 0 && c.q_dim() % 8 == 0,
                 "hidden, intermediate and q dims must be multiples of 8");
    HAYATE_CUDA_CHECK(cudaSetDevice(opt.device));
    HAYATE_CUDA_CHECK(cudaGetDeviceProperties(&prop_, opt.device));
    device_ = opt.device;
    HAYATE_CUDA_CHECK(cudaDeviceSetCacheConfig(tuning.prefer_shared ? cudaFuncCachePreferShared
                                                                    : cudaFuncCachePreferNone));
    check_memory(model);
    HAYATE_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
    HAYATE_CUBLAS_CHECK(cublasCreate(&cublas_));
    HAYATE_CUBLAS_CHECK(cublasSetStream(cublas_, s_));

    w_ = upload_weights<T>(model, s_);
    const size_t cache = size_t(c.num_layers) * max_ctx_ * c.kv_dim();
    k_cache_ = alloc<T>(bufs_, cache);
    v_cache_ = alloc<T>(bufs_, cache);
    const std::vector<float> inv = rope_inv_freq(c);
    inv_freq_ = alloc<float>(bufs_, inv.size());
    HAYATE_CUDA_CHECK(cudaMemcpy(inv_freq_, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));

    // Decode buffers (fp32 activations; the residual stream h stays fp32).
    h_ = alloc<float>(bufs_, c.hidden_size);
    q_ = alloc<float>(bufs_, c.q_dim());
    attn_ = alloc<float>(bufs_, c.q_dim());
    act_ = alloc<float>(bufs_, c.intermediate_size);
    logits_ = alloc<float>(bufs_, size_t(kPrefillChunk) * c.vocab_size);
    part_o_ = alloc<float>(bufs_, size_t(attention_max_splits()) * c.q_dim());
    part_ml_ = alloc<float>(bufs_, size_t(attention_max_splits()) * c.num_heads * 2);
    counters_ = alloc<int>(bufs_, c.num_kv_heads);
    HAYATE_CUDA_CHECK(cudaMemsetAsync(counters_, 0, sizeof(int) * c.num_kv_heads, s_));
    state_ = alloc<StepState>(bufs_, 1);
    token_out_ = alloc<int32_t>(bufs_, 1);
    const size_t ws = sampling_workspace_bytes(c.vocab_size);
    sample_ws_ = alloc<char>(bufs_, ws);
    HAYATE_CUDA_CHECK(cudaMemsetAsync(sample_ws_, 0, ws, s_));
    // Prefill buffers for one chunk.
    const size_t n = kPrefillChunk;
    p_tokens_ = alloc<int32_t>(bufs_, n);
    p_pos_ = alloc<int32_t>(bufs_, 1);
    p_h_ = alloc<float>(bufs_, n * c.hidden_size);
    p_xn_ = alloc<T>(bufs_, n * std::max(c.hidden_size, c.intermediate_size));
    p_qkv_ = alloc<float>(bufs_, n * std::max(c.qkv_dim(), 2 * c.intermediate_size));
    p_q_ = alloc<float>(bufs_, n * c.q_dim());
    p_attn_ = alloc<T>(bufs_, n * c.q_dim());
    HAYATE_CUDA_CHECK(cudaMallocHost(&host_state_, sizeof(StepState)));
    HAYATE_CUDA_CHECK(cudaMallocHost(&host_io_, sizeof(int32_t) * (n + 1)));

    // The persistent kernel's bulk copies and mbarriers are sm_90 (an sm_80
    // build runs the per-kernel graph on an A100).
    if (tuning_.persistent && prop_.major >= 9 &&
        persistent_decode_supported(c.hidden_size, c.intermediate_size, c.vocab_size,
                                    c.num_heads, c.num_kv_heads, c.head_dim))
      init_persistent();
    // Two graphs per mode: short contexts take the one-pass attention kernel.
    short_keys_ = attention_short_max_keys(c.head_dim);
    for (int shrt = 0; shrt < 2; ++shrt) {
      graph_greedy_[shrt] = capture(true, shrt);
      graph_sample_[shrt] = capture(false, shrt);
    }
    HAYATE_CUDA_CHECK(cudaStreamSynchronize(s_));
  }

  ~CudaBackend() override {
    if (persist_.trace) print_trace();
    for (cudaGraphExec_t g : {graph_greedy_[0], graph_greedy_[1], graph_sample_[0], graph_sample_[1]})
      if (g) cudaGraphExecDestroy(g);
    if (host_state_) cudaFreeHost(host_state_);
    if (host_io_) cudaFreeHost(host_io_);
    if (cublas_) cublasDestroy(cublas_);
    if (s_) cudaStreamDestroy(s_);
  }

  std::string name() const override { return "cuda"; }
  const ModelConfig& config() const override { return cfg_; }
  int max_context() const override { return max_ctx_; }
  double weight_bytes_per_token() const override { return w_.streamed_bytes; }
  std::unique_ptr<RegionTimer> make_timer() override { return std::make_unique<CudaTimer>(s_); }

  DeviceInfo device_info() const override { return cuda::device_info(device_); }

  double measure_read_bandwidth_gbs() override;

  void forward(std::span<const int32_t> tokens, int pos, std::span<float> logits,
               bool all_logits) override {
    check_input(tokens, pos);
    const size_t V = cfg_.vocab_size, n = tokens.size();
    HAYATE_CHECK(logits.size() >= (all_logits ? n : 1) * V, "logits span holds ", logits.size(),
                 " values, needs ", (all_logits ? n : 1) * V);
    if (n == 1) {
      run_decode(tokens[0], pos, SamplingParams{}, 0);
      copy_out(logits.data(), logits_, V);
      return;
    }
    for (size_t done = 0; done < n; done += kPrefillChunk) {
      const int m = int(std::min<size_t>(kPrefillChunk, n - done));
      const bool last = done + m == n;
      prefill_chunk(tokens.subspan(done, m), pos + int(done), all_logits ? m : (last ? 1 : 0));
      if (all_logits) copy_out(logits.data() + done * V, logits_, m * V);
      else if (last) copy_out(logits.data(), logits_, V);
    }
  }

  int32_t forward_sample(std::span<const int32_t> tokens, int pos, const SamplingParams& p,
                         uint64_t step) override {
    p.validate();
    check_input(tokens, pos);
    if (tokens.size() == 1) return run_decode(tokens[0], pos, p, step);
    const size_t n = tokens.size();
    for (size_t done = 0; done < n; done += kPrefillChunk) {
      const int m = int(std::min<size_t>(kPrefillChunk, n - done));
      prefill_chunk(tokens.subspan(done, m), pos + int(done), done + m == n ? 1 : 0);
    }
    set_state(tokens.back(), pos + int(n) - 1, p, step);
    sample(logits_, cfg_.vocab_size, state_, p.greedy(), sample_ws_, token_out_, s_, false);
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(host_io_, token_out_, 4, cudaMemcpyDeviceToHost, s_));
    HAYATE_CUDA_CHECK(cudaStreamSynchronize(s_));
    return host_io_[0];
  }

 private:
  // ---- the decode step: one token, captured once as a graph -------------------
  // short_ctx: the step's context fits attention_decode_short (one pass).
  void decode_step(bool greedy, bool short_ctx) {
    const ModelConfig& c = cfg_;
    const int D = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
    const float eps = c.rms_norm_eps;
    const bool pdl = tuning_.pdl;
    const GemvLaunch gl{s_, pdl || tuning_.gemv_tma != 0, tuning_.gemv_blocks_per_sm,
                        tuning_.gemv_two_rounds, tuning_.gemv_tma};
    const QkvShape qkv{c.num_heads, c.num_kv_heads, c.head_dim};
    const AttnShape att{c.num_heads, c.num_kv_heads, c.head_dim};
    const int32_t* pos = &state_->pos;
    embed(w_.embed, &state_->token, 1, D, h_, s_, false);                   // h [D] = embed[token]
    if (persist_.layers) {  // every layer and the LM head in one kernel
      decode_persistent(persist_, s_);                                      // logits [V]
      sample(logits_, V, state_, greedy, sample_ws_, token_out_, s_, false);  // token_out
      return;
    }
    for (int l = 0; l < c.num_layers; ++l) {
      const LayerWeights<T>& L = w_.layers[l];
      T* kc = k_cache_ + size_t(l) * max_ctx_ * c.kv_dim();                 // [max_ctx, kv_dim]
      T* vc = v_cache_ + size_t(l) * max_ctx_ * c.kv_dim();
      gemv_qkv_rope(L.wqkv, qkv, D, h_, L.attn_norm, eps, inv_freq_, pos,  // q [Hq d] roped,
                    q_, kc, vc, gl);                                         // k, v -> cache[pos]
      if (short_ctx) attention_decode_short(q_, kc, vc, att, pos, max_ctx_, attn_, s_, pdl);
      else attention_decode(q_, kc, vc, att, pos, part_o_, part_ml_, counters_, attn_, s_, pdl);
      gemv_residual(L.wo, D, c.q_dim(), attn_, h_, gl);                    // h += Wo attn
      gemv_gate_up(L.w_gate_up, I, D, h_, L.ffn_norm, eps, act_, gl);       // act [I] = silu(g) u
      gemv_residual(L.w_down, D, I, act_, h_, gl);                         // h += Wdown act
    }
    gemv(w_.lm_head, V, D, h_, w_.final_norm, eps, logits_, gl);            // logits [V]
    sample(logits_, V, state_, greedy, sample_ws_, token_out_, s_, pdl);    // token_out
  }

  // ---- prefill: m tokens at positions [pos, pos + m) through GEMMs -------------
  // Writes logits of the last `rows_out` tokens (0, 1 or m) to logits_.
  void prefill_chunk(std::span<const int32_t> tokens, int pos, int rows_out) {
    const ModelConfig& c = cfg_;
    const int m = int(tokens.size()), D = c.hidden_size, I = c.intermediate_size;
    const float eps = c.rms_norm_eps;
    const QkvShape qkv{c.num_heads, c.num_kv_heads, c.head_dim};
    const AttnShape att{c.num_heads, c.num_kv_heads, c.head_dim};
    std::memcpy(host_io_, tokens.data(), sizeof(int32_t) * m);
    host_io_[m] = pos;
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(p_tokens_, host_io_, sizeof(int32_t) * m, cudaMemcpyHostToDevice, s_));
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(p_pos_, host_io_ + m, sizeof(int32_t), cudaMemcpyHostToDevice, s_));
    embed(w_.embed, p_tokens_, m, D, p_h_, s_, false);                     // H [m, D]
    for (int l = 0; l < c.num_layers; ++l) {
      const LayerWeights<T>& L = w_.layers[l];
      T* kc = k_cache_ + size_t(l) * max_ctx_ * c.kv_dim();
      T* vc = v_cache_ + size_t(l) * max_ctx_ * c.kv_dim();
      rmsnorm(p_h_, L.attn_norm, m, D, eps, p_xn_, s_);                    // XN [m, D]
      gemm(L.wqkv, p_xn_, m, c.qkv_dim(), D, p_qkv_, 0.0f);               // QKV [m, qkv]
      rope_kv(p_qkv_, qkv, m, inv_freq_, p_pos_, p_q_, kc, vc, s_);       // Q [m, Hq d]; cache
      attention_prefill(p_q_, kc, vc, att, p_pos_, m, p_attn_, s_);       // ATT [m, Hq d]
      gemm(L.wo, p_attn_, m, D, c.q_dim(), p_h_, 1.0f);                    // H += ATT Wo^T
      rmsnorm(p_h_, L.ffn_norm, m, D, eps, p_xn_, s_);                     // XN [m, D]
      gemm(L.w_gate_up, p_xn_, m, 2 * I, D, p_qkv_, 0.0f);                 // GU [m, 2I]
      silu_mul(p_qkv_, m, I, p_xn_, s_);                                   // ACT [m, I]
      gemm(L.w_down, p_xn_, m, D, I, p_h_, 1.0f);                          // H += ACT Wd^T
    }
    if (rows_out == 0) return;
    const float* last = p_h_ + size_t(m - rows_out) * D;
    rmsnorm(last, w_.final_norm, rows_out, D, eps, p_xn_, s_);             // [rows_out, D]
    gemm(w_.lm_head, p_xn_, rows_out, c.vocab_size, D, logits_, 0.0f);     // logits [rows_out, V]
  }

  // y [m, N] = x [m, K] . W [N, K]^T + beta y, fp32 out. cuBLAS is column-major:
  // y^T (N x m) = W^T' ... i.e. op(A) = W^T with A = W stored K x N col-major.
  void gemm(const T* W, const T* x, int m, int N, int K, float* y, float beta) {
    const float alpha = 1.0f;
    HAYATE_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, N, m, K, &alpha, W,
                                     cuda_type<T>(), K, x, cuda_type<T>(), K, &beta, y, CUDA_R_32F,
                                     N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  // The persistent kernel's arguments: per-layer pointers on the device, its
  // own attention partials and grid barrier; the activations are decode's.
  void init_persistent() {
    const ModelConfig& c = cfg_;
    std::vector<PersistentLayer<T>> layers;
    for (int l = 0; l < c.num_layers; ++l) {
      const LayerWeights<T>& L = w_.layers[l];
      layers.push_back({L.attn_norm, L.wqkv, L.wo, L.ffn_norm, L.w_gate_up, L.w_down,
                        k_cache_ + size_t(l) * max_ctx_ * c.kv_dim(),
                        v_cache_ + size_t(l) * max_ctx_ * c.kv_dim()});
    }
    auto* d_layers = alloc<PersistentLayer<T>>(bufs_, layers.size());
    HAYATE_CUDA_CHECK(cudaMemcpy(d_layers, layers.data(), layers.size() * sizeof(layers[0]),
                                 cudaMemcpyHostToDevice));
    const size_t splits = size_t(persistent_max_splits());
    auto* barrier = alloc<unsigned>(bufs_, 2);
    HAYATE_CUDA_CHECK(cudaMemsetAsync(barrier, 0, 2 * sizeof(unsigned), s_));
    const int n_counters = persistent_counters(c.num_layers, c.num_kv_heads);
    auto* counters = alloc<int>(bufs_, n_counters);
    HAYATE_CUDA_CHECK(cudaMemsetAsync(counters, 0, n_counters * sizeof(int), s_));
    persist_ = PersistentDecode<T>{d_layers,
                                   c.num_layers,
                                   c.hidden_size,
                                   c.intermediate_size,
                                   c.vocab_size,
                                   c.num_heads,
                                   c.num_kv_heads,
                                   c.head_dim,
                                   c.rms_norm_eps,
                                   w_.final_norm,
                                   w_.lm_head,
                                   inv_freq_,
                                   &state_->pos,
                                   nullptr,
                                   0,
                                   h_,
                                   alloc<float>(bufs_, c.hidden_size),
                                   q_,
                                   act_,
                                   attn_,
                                   alloc<float>(bufs_, splits * c.q_dim()),
                                   alloc<float>(bufs_, splits * c.num_heads * 2),
                                   logits_,
                                   barrier,
                                   counters,
                                   nullptr};
    // A trial step before capture: position 0 (a cache row prefill writes
    // before anything reads it); activations are whatever the buffers hold.
    HAYATE_CUDA_CHECK(cudaMemsetAsync(state_, 0, sizeof(StepState), s_));
    if (!decode_persistent_trial(persist_, s_, tuning_.persistent_refuse_trial)) {
      persist_ = PersistentDecode<T>{};  // layers == nullptr: the per-kernel graph
      return;
    }
    if (tuning_.persistent_trace) {
      persist_.trace = alloc<unsigned long long>(bufs_, kPersistTraceSlots);
      HAYATE_CUDA_CHECK(cudaMemsetAsync(persist_.trace, 0, kPersistTraceSlots * 8, s_));
    }
  }

  // CudaTuning::persistent_trace: block 0's average time per layer in each
  // segment of the persistent kernel, over every step run so far.
  void print_trace() {
    unsigned long long t[kPersistTraceSlots] = {};
    if (cudaMemcpy(t, persist_.trace, sizeof t, cudaMemcpyDeviceToHost) != cudaSuccess || t[11] == 0)
      return;
    const char* names[] = {"qkv", "attn", "attn wait", "o_proj", "bar", "gate_up", "bar", "down", "bar", "qkv bar"};
    const double per_layer = 1e3 * double(t[11]) * cfg_.num_layers;  // ns -> us per layer
    std::fprintf(stderr, "hayate: persistent phases, us per layer (block 0, %llu steps):", t[11]);
    for (int i = 0; i < 10; ++i) std::fprintf(stderr, " %s %.2f", names[i], double(t[i]) / per_layer);
    std::fprintf(stderr, "; lm_head %.1f us\n", double(t[10]) / 1e3 / double(t[11]));
  }

  cudaGraphExec_t capture(bool greedy, bool short_ctx) {
    cudaGraph_t graph = nullptr;
    HAYATE_CUDA_CHECK(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal));
    decode_step(greedy, short_ctx);
    HAYATE_CUDA_CHECK(cudaStreamEndCapture(s_, &graph));
    cudaGraphExec_t exec = nullptr;
    HAYATE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    HAYATE_CUDA_CHECK(cudaGraphDestroy(graph));
    return exec;
  }

  void set_state(int32_t token, int pos, const SamplingParams& p, uint64_t step) {
    *host_state_ = StepState{token, pos, p.seed, step, p.temperature, p.top_p, p.min_p, p.top_k};
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(state_, host_state_, sizeof(StepState), cudaMemcpyHostToDevice, s_));
  }

  // One decode step: upload the step state, replay the graph, read the id.
  int32_t run_decode(int32_t token, int pos, const SamplingParams& p, uint64_t step) {
    set_state(token, pos, p, step);
    const bool shrt = tuning_.short_attention && pos + 1 <= short_keys_;
    HAYATE_CUDA_CHECK(cudaGraphLaunch(p.greedy() ? graph_greedy_[shrt] : graph_sample_[shrt], s_));
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(host_io_, token_out_, 4, cudaMemcpyDeviceToHost, s_));
    HAYATE_CUDA_CHECK(cudaStreamSynchronize(s_));
    return host_io_[0];
  }

  void copy_out(float* dst, const float* src, size_t count) {
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToHost, s_));
    HAYATE_CUDA_CHECK(cudaStreamSynchronize(s_));
  }

  void check_input(std::span<const int32_t> tokens, int pos) const {
    HAYATE_CHECK(!tokens.empty(), "forward: no tokens");
    HAYATE_CHECK(pos >= 0, "forward: negative position ", pos);
    HAYATE_CHECK(pos + int64_t(tokens.size()) <= max_ctx_, "context of ", pos + tokens.size(),
                 " tokens exceeds the KV cache (", max_ctx_, "; raise --max-context)");
    for (int32_t t : tokens)
      HAYATE_CHECK(t >= 0 && t < cfg_.vocab_size, "token id ", t, " outside [0, ", cfg_.vocab_size, ")");
  }

  void check_memory(const Model& model) {
    const ModelConfig& c = cfg_;
    const double need = double(device_weight_bytes(model, sizeof(T))) +
                        2.0 * c.num_layers * double(max_ctx_) * c.kv_dim() * sizeof(T) +
                        double(kPrefillChunk) * c.vocab_size * 4 +
                        double(kPrefillChunk) * (4.0 * c.intermediate_size * 2 + 16.0 * c.hidden_size);
    size_t free_b = 0, total_b = 0;
    HAYATE_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    HAYATE_CHECK(need < double(free_b), "model needs ", need / 1e9, " GB on the GPU (weights in ",
                 sizeof(T) == 2 ? "16-bit" : "?", ", KV cache for ", max_ctx_, " tokens), only ",
                 double(free_b) / 1e9, " GB of ", double(total_b) / 1e9, " GB are free");
  }

  ModelConfig cfg_;
  CudaTuning tuning_;
  int max_ctx_ = 0;
  cudaDeviceProp prop_{};
  int device_ = 0;
  cudaStream_t s_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceWeights<T> w_;
  std::vector<DeviceBuffer> bufs_;
  T *k_cache_ = nullptr, *v_cache_ = nullptr;
  float* inv_freq_ = nullptr;
  float *h_ = nullptr, *q_ = nullptr, *attn_ = nullptr, *act_ = nullptr, *logits_ = nullptr;
  float *part_o_ = nullptr, *part_ml_ = nullptr;
  int* counters_ = nullptr;
  StepState* state_ = nullptr;
  int32_t* token_out_ = nullptr;
  char* sample_ws_ = nullptr;
  int32_t *p_tokens_ = nullptr, *p_pos_ = nullptr;
  float *p_h_ = nullptr, *p_qkv_ = nullptr, *p_q_ = nullptr;
  T *p_xn_ = nullptr, *p_attn_ = nullptr;
  StepState* host_state_ = nullptr;
  int32_t* host_io_ = nullptr;
  int short_keys_ = 0;  // contexts up to this many keys use graphs [1]
  PersistentDecode<T> persist_{};  // layers == nullptr: the per-kernel decode step
  cudaGraphExec_t graph_greedy_[2] = {}, graph_sample_[2] = {};
};

// Read bandwidth: a read-only kernel over 4 GiB (the ceiling a GEMV can reach),
// median of 10 passes; a device-to-device copy is printed beside it.
template <typename T>
double CudaBackend<T>::measure_read_bandwidth_gbs() {
  const size_t bytes = size_t(4) << 30;
  DeviceBuffer buf(bytes), dst(bytes / 2), sink(64);
  HAYATE_CUDA_CHECK(cudaMemsetAsync(buf.as(), 1, bytes, s_));
  auto median_ms = [&](const std::function<void()>& body) {
    return double(median_ms_on_stream(s_, 2, 10, body));  // two warm-ups, median of 10
  };
  const double read_ms = median_ms([&] { read_probe(buf.as(), bytes, sink.as<float>(), s_); });
  const double copy_ms = median_ms([&] {
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(dst.as(), buf.as(), bytes / 2, cudaMemcpyDeviceToDevice, s_));
  });
  const double read_gbs = double(bytes) / read_ms / 1e6;
  std::fprintf(stderr,
               "hayate: read bandwidth %.0f GB/s (read-only kernel, 4 GiB); device copy %.0f GB/s "
               "read+written (%.0f GB/s read)\n",
               read_gbs, double(bytes) / copy_ms / 1e6, double(bytes) / 2 / copy_ms / 1e6);
  return read_gbs;
}

}  // namespace
}  // namespace cuda

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(const Model& model, const BackendOptions& options,
                                           const CudaTuning& tuning) {
  const int n = cuda_device_count();
  HAYATE_CHECK(n > 0, "no CUDA GPU is visible (use --backend cpu)");
  HAYATE_CHECK(options.device >= 0 && options.device < n, "GPU ", options.device, " does not exist (",
               n, " visible)");
  cudaDeviceProp prop{};
  HAYATE_CUDA_CHECK(cudaGetDeviceProperties(&prop, options.device));
  HAYATE_CHECK(cuda::kernels_supported(options.device), "GPU ", prop.name, " (sm_", prop.major,
               prop.minor, ") is not supported by this build (compiled for sm_90a",
               " ; configure with -DHAYATE_SM80=ON for sm_80)");
  // The one place where the runtime dtype becomes the template argument.
  switch (options.dtype) {
    case DType::F16: return std::make_unique<cuda::CudaBackend<half>>(model, options, tuning);
    case DType::BF16: return std::make_unique<cuda::CudaBackend<__nv_bfloat16>>(model, options, tuning);
    case DType::F32: break;
  }
  fail("the cuda backend runs float16 or bfloat16 (--dtype), not float32");
}

std::unique_ptr<Backend> make_cuda_backend(const Model& model, const BackendOptions& options) {
  return make_cuda_backend(model, options, CudaTuning{});
}

}  // namespace hayate
