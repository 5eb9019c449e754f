// Launchers of the CUDA kernels, one group per kernel file (kernels/; the
// paged attention's are in paged_attention.cuh). Host code (the backend, the
// gpu tests, the kernel lab) calls these; each .cu file instantiates them for
// T = half and __nv_bfloat16. Shapes are given in the comments as [rows,
// cols]; every pointer is device memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace hayate::cuda {

// One row's sampling parameters, in device memory (sample, sample_batched).
// token and pos are not read by the samplers.
struct StepState {
  int32_t token = 0;
  int32_t pos = 0;
  uint64_t seed = 0;   // sampling: uniform01(seed, step, 0)
  uint64_t step = 0;
  float temperature = 0.0f;  // 0 = greedy
  float top_p = 1.0f;
  float min_p = 0.0f;
  int32_t top_k = 0;
};

// ---- decode_persistent.cu: the decode step's layers and LM head, one kernel --
// One cooperative block per SM walks every phase of the step (persistent.cuh):
// per layer QKV + RoPE + KV append, attention over [0, *pos], o_proj +
// residual, gate/up + SiLU*mul, down + residual; then logits = lm_head .
// rmsnorm(h).
template <typename T>
struct PersistentLayer {
  const T *attn_norm, *wqkv, *wo, *ffn_norm, *w_gate_up, *w_down;
  T *k_cache, *v_cache;  // this layer's paged pool [blocks * block_size, kv_dim]
  // FP8 weights (PersistentDecode::fp8): e4m3 codes of the four linears in
  // place of the T pointers above, their row scales, static input scales (0:
  // per token).
  const uint8_t *wqkv8 = nullptr, *wo8 = nullptr, *w_gate_up8 = nullptr, *w_down8 = nullptr;
  const float *s_qkv = nullptr, *s_o = nullptr, *s_gate_up = nullptr, *s_down = nullptr;
  float in_qkv = 0.0f, in_o = 0.0f, in_gate_up = 0.0f, in_down = 0.0f;
  // Qwen2's q/k/v biases [q_dim + 2 kv_dim], added in the QKV epilogue; Qwen3's
  // per-head q/k RMSNorm weights [head_dim] (PersistentDecode::qk_norm). Null: none.
  const T *bqkv = nullptr, *q_norm = nullptr, *k_norm = nullptr;
};
template <typename T>
struct PersistentDecode {
  const PersistentLayer<T>* layers;  // device [n_layers]
  int n_layers, hidden, inter, vocab, n_heads, n_kv_heads, head_dim;
  float eps;
  const T *final_norm, *lm_head;
  const float* inv_freq;  // [head_dim / 2]
  const int32_t* pos;     // device: the step's position
  const int32_t* block_table;  // device [max_blocks]: the one sequence's blocks
  int block_size;
  float *h, *h2, *q, *act;  // [hidden] x 2 (h2: o_proj's output), [q_dim], [inter]
  float* attn;              // [q_dim]
  float *part_o, *part_ml;  // [persistent_max_splits(), n_heads, head_dim | 2]
  float* logits;            // [vocab]
  unsigned* barrier;        // [2], zeroed once; the kernel leaves it zero
  int* counters;            // [persistent_counters(n_layers, n_kv_heads)], the same
  // The layers' linears are FP8 (W8A8): each phase's x is quantized to e4m3
  // in registers (per token, or with the static scale) and its sums scaled
  // by x's scale and the weight row's; the LM head stays in T.
  bool fp8 = false;
  // Qwen3: q and k are RMS-normalised per head before RoPE. A head's norm
  // needs all of its rows, which QKV's tiles spread over the grid, so QKV
  // writes them raw (q to q, k to k_raw [kv_dim]) and the attention items,
  // after the barrier, normalise and turn q in shared memory and the item
  // holding the step's key row does the same for k and appends it.
  bool qk_norm = false;
  float* k_raw = nullptr;
  // null, or [gridDim.x][persistent_trace_slots(n_layers)]: each block's
  // %globaltimer (ns) where its consumers finish a phase and leave its
  // barrier (`hayate profile`): [0] start; per layer l from 1 + 9 l: QKV
  // done, past its barrier, attention done (o_proj's inputs ready), o_proj
  // done, past its barrier, gate/up done, past, down done, past; last: LM head done.
  unsigned long long* trace = nullptr;
};
__host__ __device__ inline int persistent_trace_slots(int n_layers) { return 2 + 9 * n_layers; }
// The persistent kernel's attention units: a kv head's query heads, split
// into ceil(group / 4) near-equal shares where it has more than 4 (Qwen2.5-7B's
// 7 per kv head: 4 + 3), as its registers and shared memory hold 4.
__host__ __device__ constexpr int persistent_attn_units(int n_heads, int n_kv_heads) {
  return n_kv_heads * ((n_heads / n_kv_heads + 3) / 4);
}
// Counters, as offsets into one int array: a tile counter per GEMV phase
// (claims: 4 per layer and the LM head), then per layer and attention unit
// the attention splits done, then per layer the units whose attention output
// is final; `total` ints in all.
struct PersistentCounterLayout {
  int claims, split_done, attn_done, total;
};
__host__ __device__ constexpr PersistentCounterLayout persistent_counter_layout(int n_layers,
                                                                             int units) {
  return {0, 4 * n_layers + 1, 4 * n_layers + 1 + n_layers * units,
          4 * n_layers + 1 + n_layers * units + n_layers};
}
// units: persistent_attn_units(n_heads, n_kv_heads).
__host__ __device__ constexpr int persistent_counters(int n_layers, int units) {
  return persistent_counter_layout(n_layers, units).total;
}
// Shapes the kernel has a configuration for (Llama 3.x 1B/3B/8B: head_dim 64
// or 128, and dummy:tiny's 32; up to 8 query heads per kv head, hidden <= 4096,
// inter <= 19456 (past 16384, Qwen2.5-7B's 18944, a down row spans two
// stages: head_dim 128, no q/k norms); with qk_norm, head_dim 128 and up to 4
// per kv head: Qwen3's). h holds the embedded token on entry and the residual
// stream on exit (down_proj writes h, o_proj h2).
bool persistent_decode_supported(int hidden, int inter, int vocab, int n_heads, int n_kv_heads,
                                 int head_dim, bool qk_norm = false);
int persistent_max_splits();
// Whether the persistent kernel reads FP8 linear weights (W8A8 models).
bool persistent_decode_fp8_supported();
template <typename T>
void decode_persistent(const PersistentDecode<T>& args, cudaStream_t s);
// One real step (args must be safe to run: position 0 of a cache row nothing
// reads yet, counters zeroed), synchronised, at start-up: false, with a note
// on stderr, when the runtime refuses the cooperative launch (fewer SMs than
// the device reports, as under MPS limits); the caller then runs bucket 1 on
// the batched GEMVs or GEMMs. refuse (tests): ask for a grid that cannot be
// resident, so the runtime refuses it here too.
template <typename T>
bool decode_persistent_trial(const PersistentDecode<T>& args, cudaStream_t s, bool refuse = false);

// ---- norm.cu -----------------------------------------------------------------
// out [n, dim] = rmsnorm(x [n, dim]) * w, fp32 math, rounded to T (GEMM input).
// pdl: launched with programmatic dependent launch (launch.h), as the batched
// step's own kernels are (here, in silu_mul, argmax_rows and PagedShape::pdl).
template <typename T>
void rmsnorm(const float* x, const T* w, int n, int dim, float eps, T* out, cudaStream_t s,
             bool pdl = false);
// out [n, dim] = rmsnorm(x [rows[j], dim]) * w in T: the batched backend's LM-head rows.
template <typename T>
void rmsnorm_gather(const float* x, const int32_t* rows, const T* w, int n, int dim, float eps,
                    T* out, cudaStream_t s, bool pdl = false);

// ---- embed.cu ----------------------------------------------------------------
// h [n, dim] = table [vocab, dim] rows tokens[0..n) (fp32).
template <typename T>
void embed(const T* table, const int32_t* tokens, int n, int dim, float* h, cudaStream_t s,
           bool pdl);

// ---- rope.cu -----------------------------------------------------------------
// qkv [n_tokens, q_dim + 2 kv_dim] in In (fp32, or T where the QKV GEMM
// writes T) -> q [n_tokens, q_dim] roped (fp32); roped k and v into the paged
// pools at each token's (block, row) (paged_attention.cuh): T values, or
// (T = KvFp8) e4m3 codes of k / sh.k_scale and v / sh.v_scale. Before RoPE,
// with `pre` (W: the model's 16-bit type): the bias [q_dim + 2 kv_dim] added
// (Qwen2), then each q and k head RMS-normalised and scaled by q_norm /
// k_norm [head_dim] (Qwen3).
struct PagedShape;
struct PagedMeta;
template <typename T>
struct QkvPre {
  const T* bias = nullptr;    // null: no q/k/v biases
  const T* q_norm = nullptr;  // null: no per-head norm (k_norm then null too)
  const T* k_norm = nullptr;
  float eps = 0.0f;
};
template <typename In, typename T, typename W = T>
void paged_rope_kv(const In* qkv, PagedShape sh, int n_tokens, const float* inv_freq,
                   PagedMeta meta, float* q, T* k_pool, T* v_pool, cudaStream_t s,
                   QkvPre<W> pre = {});

// ---- activation.cu -----------------------------------------------------------
// gu [n, 2 inter] (fp32: GemmEx or batched-GEMV output) -> out [n, inter] =
// silu(gate) * up in T.
template <typename T>
void silu_mul(const float* gu, int n, int inter, T* out, cudaStream_t s, bool pdl = false);
// The same from gu [n, 2 inter] in T (the batched backend's gate/up GEMM output).
template <typename T>
void silu_mul(const T* gu, int n, int inter, T* out, cudaStream_t s, bool pdl = false);

// ---- quant.cu: FP8 (core/fp8.h's arithmetic; codes as uint8_t, scales fp32) --
// Weights at load: out [rows, cols] e4m3 codes and scale [rows] of w [rows,
// cols] (fp32), each row with its own scale.
void quantize_weight_rows(const float* w, int rows, int cols, uint8_t* out, float* scale,
                          cudaStream_t s);
// A linear's input, per token (static_scale 0) or with static_scale: out [n,
// dim] codes and scale [n] of x [n, dim] in T (the attention output).
template <typename T>
void quantize_rows_fp8(const T* x, int n, int dim, float static_scale, uint8_t* out,
                       float* scale, cudaStream_t s);
// silu_mul then the same quantization: gu [n, 2 inter] in T -> out [n, inter].
template <typename T>
void silu_mul_fp8(const T* gu, int n, int inter, float static_scale, uint8_t* out, float* scale,
                  cudaStream_t s);
// rmsnorm (norm.cu) then the same quantization: x [n, dim] fp32 -> out [n, dim].
bool rmsnorm_fp8_supported(int dim);
template <typename T>
void rmsnorm_fp8(const float* x, const T* w, int n, int dim, float eps, float static_scale,
                 uint8_t* out, float* scale, cudaStream_t s);

// ---- gemm_fp8_small.cu: the FP8 product at few rows (W8A8) ---------------------
// y [m, N] (E: float, half or bf16) = x_scale[i] w_scale[n] sum_k xq[i, k]
// W[n, k] (+ y when accumulate), W [N, K] and xq [m, K] e4m3 codes (16-byte
// aligned), scales fp32 [N] and [m]: BatchGemm::fp8's product, for m <=
// kFp8SmallMaxRows. Two kernels: mma.sync on codes widened to f16 (a block per
// rows * row_warps weight rows, its k_warps groups split K), and, where k_blocks > 0,
// wgmma on the codes (gemm_fp8_wgmma.cu: `rows` weight rows per block, 64 or 128,
// a cluster of k_blocks blocks splitting K; the other fields unused). The backend
// times the tiles against cuBLASLt at start-up (batch_gemm.h).
constexpr int kFp8SmallMaxRows = 64;
struct Fp8SmallTile {
  int rows = 32;      // weight rows per warp: 16, 32 (m <= 64) or 64 (m <= 32, row_warps 1);
                      // wgmma: per block, 64 or 128
  int k_warps = 8;    // K groups per block, each a K / k_warps slice: 1, 2, 4 or 8
  int row_warps = 1;  // warps per K group side by side over rows, sharing the group's staged
                      // activations: 1, 2 or 4 (2, 4: m > 8); k_warps * row_warps <= 8
  int k_blocks = 0;   // > 0: the wgmma kernel, K split over 1, 2, 4 or 8 blocks (K % 128 k_blocks)
};
bool gemm_fp8_small_supported(int m, int N, int K, Fp8SmallTile tile);
template <typename E>
void gemm_fp8_small(const uint8_t* W, const float* w_scale, const uint8_t* xq,
                    const float* x_scale, int m, int N, int K, E* y, bool accumulate,
                    Fp8SmallTile tile, cudaStream_t s);

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
// dst[i] = T(offset + scale * uniform_pm1(seed, stream, first + i)), i < n
// (T: half, bf16, or float for FP8 weights quantized at load).
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
