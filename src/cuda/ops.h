// Launchers of the CUDA kernels, one group per kernel file. Host code (the
// backend, the gpu tests, the kernel lab) calls these; each .cu file
// instantiates them for T = half and __nv_bfloat16. Shapes are given in the
// comments as [rows, cols]; every pointer is device memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace hayate::cuda {

// The decode step's inputs and outputs, in device memory. The host writes
// the step's token, position and sampling parameters before replaying the
// graph; kernels read them from here, so one captured graph serves every step.
struct StepState {
  int32_t token = 0;   // input token of this step
  int32_t pos = 0;     // its position
  uint64_t seed = 0;   // sampling: uniform01(seed, step, 0)
  uint64_t step = 0;
  float temperature = 0.0f;  // 0 = greedy
  float top_p = 1.0f;
  float min_p = 0.0f;
  int32_t top_k = 0;
};

// ---- gemv.cu: decode GEMVs (one token) --------------------------------------
// y [rows] = W [rows, K] . norm?(x) ; norm_w == nullptr: x used as is.
template <typename T>
void gemv(const T* W, int rows, int K, const float* x, const T* norm_w, float eps, float* y,
          cudaStream_t s, bool pdl);
// h [rows] += W [rows, K] . x  (o_proj and down_proj with the residual add)
template <typename T>
void gemv_residual(const T* W, int rows, int K, const float* x, float* h, cudaStream_t s, bool pdl);
// act [inter] = silu(Wg . n) * (Wu . n), n = rmsnorm(h) * norm_w; W = [gate; up] [2 inter, K]
template <typename T>
void gemv_gate_up(const T* W, int inter, int K, const float* h, const T* norm_w, float eps,
                  float* act, cudaStream_t s, bool pdl);
// qkv = Wqkv [q_dim + 2 kv_dim, K] . rmsnorm(h) * norm_w; q (roped) -> q [q_dim];
// k (roped), v -> k_cache / v_cache [max_ctx, kv_dim] at row *pos.
struct QkvShape {
  int n_heads, n_kv_heads, head_dim;
};
template <typename T>
void gemv_qkv_rope(const T* W, QkvShape shape, int K, const float* h, const T* norm_w, float eps,
                   const float* inv_freq, const int32_t* pos, float* q, T* k_cache, T* v_cache,
                   cudaStream_t s, bool pdl);

// The same four with launch options (run 8): blocks_per_sm > 0 caps the
// one-wave grid below full occupancy so that, under PDL, the next kernel's
// blocks fit beside it and start their weight loads early (measured slower on
// the H200 at 2 and 3 blocks per SM: bench/kernels/NOTES.md run 8).
// two_rounds: rows of K <= 4096 keep two rounds of loads in flight per thread.
struct GemvLaunch {
  cudaStream_t s = nullptr;
  bool pdl = false;
  int blocks_per_sm = 0;  // 0: as many as fit
  bool two_rounds = true;
  // Run 10: stream W through shared memory with bulk async copies
  // (gemv_tma.cuh). 0: off; 1: on, the next kernel may launch once a block
  // has issued its last stage; 2: on, at kernel entry; 3: as 2 with stages of
  // two row groups (32 KB at K = 4096). Shapes it has no configuration for
  // (K > 16384) keep the register kernels.
  int tma = 0;
};
template <typename T>
void gemv(const T* W, int rows, int K, const float* x, const T* norm_w, float eps, float* y,
          const GemvLaunch& l);
template <typename T>
void gemv_residual(const T* W, int rows, int K, const float* x, float* h, const GemvLaunch& l);
template <typename T>
void gemv_gate_up(const T* W, int inter, int K, const float* h, const T* norm_w, float eps,
                  float* act, const GemvLaunch& l);
template <typename T>
void gemv_qkv_rope(const T* W, QkvShape shape, int K, const float* h, const T* norm_w, float eps,
                   const float* inv_freq, const int32_t* pos, float* q, T* k_cache, T* v_cache,
                   const GemvLaunch& l);

// ---- decode_persistent.cu: the decode step's layers and LM head, one kernel --
// One cooperative block per SM walks every phase of the step (persistent.cuh):
// per layer QKV + RoPE + KV append, attention over [0, *pos], o_proj +
// residual, gate/up + SiLU*mul, down + residual; then logits = lm_head .
// rmsnorm(h).
template <typename T>
struct PersistentLayer {
  const T *attn_norm, *wqkv, *wo, *ffn_norm, *w_gate_up, *w_down;
  T *k_cache, *v_cache;  // this layer's: [max_ctx, kv_dim], or the paged pool [rows, kv_dim]
};
template <typename T>
struct PersistentDecode {
  const PersistentLayer<T>* layers;  // device [n_layers]
  int n_layers, hidden, inter, vocab, n_heads, n_kv_heads, head_dim;
  float eps;
  const T *final_norm, *lm_head;
  const float* inv_freq;  // [head_dim / 2]
  const int32_t* pos;     // device: the step's position
  // nullptr: the caches are contiguous (row = position); else the paged pool's
  // block table of the one sequence [max_blocks], block_size tokens a block.
  const int32_t* block_table;
  int block_size;
  float *h, *h2, *q, *act;  // [hidden] x 2 (h2: o_proj's output), [q_dim], [inter]
  float* attn;              // [q_dim]
  float *part_o, *part_ml;  // [persistent_max_splits(), n_heads, head_dim | 2]
  float* logits;            // [vocab]
  unsigned* barrier;        // [2], zeroed once; the kernel leaves it zero
  int* counters;            // [persistent_counters(n_layers, n_kv_heads)], the same
  // Lab only (CudaTuning::persistent_trace), else nullptr: block 0's time per
  // segment summed over layers and steps, ns: [0] QKV, [9] barrier, [1]
  // attention, [2] wait for every kv head's attention, [3] o_proj, [4]
  // barrier, [5] gate/up, [6] barrier, [7] down, [8] barrier, [10] LM head,
  // [11] steps.
  unsigned long long* trace;
};
constexpr int kPersistTraceSlots = 12;
// Counters, as offsets into one int array: a tile counter per GEMV phase
// (claims: 4 per layer and the LM head), then per layer and kv head the
// attention splits done, then per layer the kv heads whose attention output
// is final; `total` ints in all.
struct PersistentCounterLayout {
  int claims, split_done, attn_done, total;
};
__host__ __device__ constexpr PersistentCounterLayout persistent_counter_layout(int n_layers,
                                                                             int n_kv_heads) {
  return {0, 4 * n_layers + 1, 4 * n_layers + 1 + n_layers * n_kv_heads,
          4 * n_layers + 1 + n_layers * n_kv_heads + n_layers};
}
__host__ __device__ constexpr int persistent_counters(int n_layers, int n_kv_heads) {
  return persistent_counter_layout(n_layers, n_kv_heads).total;
}
// Shapes the kernel has a configuration for (Llama 3.x 1B/3B/8B: head_dim 64
// or 128, and dummy:tiny's 32; up to 4 query heads per kv head, hidden <= 4096,
// inter <= 16384). h holds the embedded token on entry and the residual
// stream on exit (down_proj writes h, o_proj h2).
bool persistent_decode_supported(int hidden, int inter, int vocab, int n_heads, int n_kv_heads,
                                 int head_dim);
int persistent_max_splits();
template <typename T>
void decode_persistent(const PersistentDecode<T>& args, cudaStream_t s);
// One real step (args must be safe to run: position 0 of a cache row nothing
// reads yet, counters zeroed), synchronised, at start-up: false, with a note
// on stderr, when the runtime refuses the cooperative launch (fewer SMs than
// the device reports, as under MPS limits); the caller then keeps the
// per-kernel decode graph. refuse (tests): ask for a grid that cannot be
// resident, so the runtime refuses it here too.
template <typename T>
bool decode_persistent_trial(const PersistentDecode<T>& args, cudaStream_t s, bool refuse = false);

// ---- norm.cu -----------------------------------------------------------------
// out [n, dim] = rmsnorm(x [n, dim]) * w, fp32 math, rounded to T (GEMM input).
template <typename T>
void rmsnorm(const float* x, const T* w, int n, int dim, float eps, T* out, cudaStream_t s);
// out [n, dim] = rmsnorm(x [rows[j], dim]) * w in T: the batched backend's LM-head rows.
template <typename T>
void rmsnorm_gather(const float* x, const int32_t* rows, const T* w, int n, int dim, float eps,
                    T* out, cudaStream_t s);

// ---- embed.cu ----------------------------------------------------------------
// h [n, dim] = table [vocab, dim] rows tokens[0..n) (fp32).
template <typename T>
void embed(const T* table, const int32_t* tokens, int n, int dim, float* h, cudaStream_t s,
           bool pdl);

// ---- rope.cu -----------------------------------------------------------------
// Prefill: qkv [n, q_dim + 2 kv_dim] (fp32, GEMM output) -> q [n, q_dim] roped,
// k roped and v into the caches at rows *pos0 + i.
template <typename T>
void rope_kv(const float* qkv, QkvShape shape, int n, const float* inv_freq, const int32_t* pos0,
             float* q, T* k_cache, T* v_cache, cudaStream_t s);
// Batched backend: qkv [n_tokens, q_dim + 2 kv_dim] in In (fp32, or T where
// the QKV GEMM writes T) -> q [n_tokens, q_dim] roped (fp32); roped k and v
// into the paged pools at each token's (block, row) (paged_attention.cuh).
struct PagedShape;
struct PagedMeta;
template <typename In, typename T>
void paged_rope_kv(const In* qkv, PagedShape sh, int n_tokens, const float* inv_freq,
                   PagedMeta meta, float* q, T* k_pool, T* v_pool, cudaStream_t s);

// ---- activation.cu -----------------------------------------------------------
// Prefill: gu [n, 2 inter] (fp32) -> out [n, inter] = silu(gate) * up in T.
template <typename T>
void silu_mul(const float* gu, int n, int inter, T* out, cudaStream_t s);
// The same from gu [n, 2 inter] in T (the batched backend's gate/up GEMM output).
template <typename T>
void silu_mul(const T* gu, int n, int inter, T* out, cudaStream_t s);

// ---- attention.cu ------------------------------------------------------------
// Causal attention of n queries at positions *pos0 + i against the cache rows
// [0, *pos0 + i]. Flash-decoding: each (kv head, split, query) block walks its
// share of the keys in tiles with an online softmax, so memory is O(n).
struct AttnShape {
  int n_heads, n_kv_heads, head_dim;
};
// Decode (n = 1): partials of up to max_splits splits, combined by the last
// split block of each kv head. part_o [max_splits, n_heads, head_dim],
// part_ml [max_splits, n_heads, 2], counters [n_kv_heads] zeroed once (the
// kernel leaves them zero), out [n_heads * head_dim].
int attention_max_splits();
template <typename T>
void attention_decode(const float* q, const T* k_cache, const T* v_cache, AttnShape shape,
                      const int32_t* pos, float* part_o, float* part_ml, int* counters, float* out,
                      cudaStream_t s, bool pdl);
// Decode at short context, *pos + 1 <= attention_short_max_keys(head_dim) (128
// keys for head_dim 128): one block per query head, every K/V row loaded at
// once, no split and no combine (the caller picks it; a longer context traps).
// max_ctx: rows in the cache, out [n_heads * head_dim].
int attention_short_max_keys(int head_dim);
template <typename T>
void attention_decode_short(const float* q, const T* k_cache, const T* v_cache, AttnShape shape,
                            const int32_t* pos, int max_ctx, float* out, cudaStream_t s, bool pdl);
// Prefill: out [n, n_heads * head_dim] in T (the o_proj GEMM input).
template <typename T>
void attention_prefill(const float* q, const T* k_cache, const T* v_cache, AttnShape shape,
                       const int32_t* pos0, int n, T* out, cudaStream_t s);

// ---- sampling.cu -------------------------------------------------------------
// Picks the next token from logits [vocab] and writes it to *token_out:
// greedy = argmax (lowest id on ties); else temperature / top-k / top-p /
// min-p from *state with u = uniform01(seed, step, 0), as engine/sampling.h.
// The choice is made on the host because the decode step is captured once per
// mode (greedy must not pay for a sort). workspace: sampling_workspace_bytes().
size_t sampling_workspace_bytes(int vocab);
void sample(const float* logits, int vocab, const StepState* state, bool greedy, void* workspace,
            int32_t* token_out, cudaStream_t s, bool pdl);

// ---- sampling_batched.cu -----------------------------------------------------
// Non-greedy picks of n rows in one pass (one segmented sort, one pick launch
// with a block per row; the walk and draw of sample() above). Row b is logits
// row rows[b] ([*, vocab], device) with states[b] (temperature > 0: greedy rows
// take argmax_rows instead); its id goes to out[rows[b]], every other entry of
// out is left as it was. n <= max_rows; workspace:
// batched_sampling_workspace_bytes(), prepared once by batched_sampling_init()
// (about 16 * vocab * max_rows bytes: the sort's double buffers).
size_t batched_sampling_workspace_bytes(int vocab, int max_rows);
void batched_sampling_init(void* workspace, int vocab, int max_rows, cudaStream_t s);
void sample_batched(const float* logits, int vocab, const int32_t* rows, const StepState* states,
                    int n, int max_rows, void* workspace, int32_t* out, cudaStream_t s);

// ---- dummy.cu: weight generation and conversion ---------------------------------
// dst[i] = T(offset + scale * uniform_pm1(seed, stream, first + i)), i < n.
template <typename T>
void fill_dummy(T* dst, size_t n, uint64_t seed, uint64_t stream, float scale, float offset,
                uint64_t first, cudaStream_t s);
// dst[i] = T(src[i]); src_dtype: 0 = f32, 1 = f16, 2 = bf16 (core/dtype.h order).
template <typename T>
void convert(const void* src, int src_dtype, size_t n, T* dst, cudaStream_t s);
// Reads `bytes` of `buf` with 16-byte loads (the read-bandwidth probe); the sum
// goes to *sink so the reads are not elided.
void read_probe(const void* buf, size_t bytes, float* sink, cudaStream_t s);
// False when this binary holds no kernel image for the device (wrong arch).
bool kernels_supported(int device);

}  // namespace hayate::cuda
