// The fp32 ops of the CPU reference backend. The CUDA backend mirrors these
// by name and argument order, and tests each of its kernels against them.
// Activations are row-major [n tokens, width]; weights are HF-style
// [out_features, in_features]. Ops parallelise over independent outputs with
// OpenMP, so a result never depends on the thread count.
#pragma once

#include <cstdint>
#include <span>

namespace hayate::cpu {

// out[t, :] = table[tokens[t], :]. table: [vocab, hidden]; out: [n, hidden].
// Throws Error for an id outside [0, vocab).
void embedding(std::span<const int32_t> tokens, const float* table, int vocab, int hidden,
               float* out);

// A vocabulary slice of the embedding (a tensor-parallel rank's): out[t, :] =
// table[tokens[t] - row0, :] for ids inside [row0, row0 + rows), zeros for
// the others (the ranks' outputs sum to embedding()'s). table: [rows, hidden].
void embedding_slice(std::span<const int32_t> tokens, const float* table, int row0, int rows,
                     int hidden, float* out);

// out[t, i] = x[t, i] / sqrt(mean_i(x[t, :]^2) + eps) * w[i], as HF's
// LlamaRMSNorm in fp32. x, out: [n, dim] (may alias); w: [dim].
void rmsnorm(const float* x, const float* w, float* out, int n, int dim, float eps);

// x[t, i] += b[i]: a projection's bias (Qwen2's q/k/v). x: [n, dim]; b: [dim].
void add_bias(float* x, const float* b, int n, int dim);

// Qwen3's per-head RMSNorm of q and k, before RoPE, in place on fused QKV
// rows: each head's head_dim values of the q part (n_heads of them, weight
// q_w) and of the k part (n_kv_heads, weight k_w) normalised as rmsnorm()
// does; the v part is untouched. qkv: [n, (n_heads + 2 n_kv_heads) *
// head_dim]; q_w, k_w: [head_dim].
void qk_norm(float* qkv, const float* q_w, const float* k_w, int n, int n_heads, int n_kv_heads,
             int head_dim, float eps);

// y[t, o] = sum_i W[o, i] * x[t, i]. W: [out, in]; x: [n, in]; y: [n, out].
// Sums in fp32 with 8 partial accumulators (the GPU's order differs anyway).
void matmul(const float* W, const float* x, float* y, int n, int out, int in);

// Rotary embedding in HF's rotate_half layout (pairs i and i + head_dim/2),
// applied in place to x: [n, n_heads * head_dim]; row t is at position
// pos0 + t. inv_freq: [head_dim / 2] from rope_inv_freq() (llama3 scaling
// already applied). The angle is float(pos) * inv_freq in fp32 as HF does.
void rope(float* x, int n, int n_heads, int head_dim, int pos0, const float* inv_freq);

// Causal grouped-query attention over the KV cache. q: [n, n_heads *
// head_dim], row t at position pos0 + t; k_cache, v_cache: [capacity,
// n_kv_heads * head_dim] holding positions [0, pos0 + n). Query head h reads
// kv head h / (n_heads / n_kv_heads), as HF's repeat_kv. out: [n, n_heads *
// head_dim]. Scores are scaled by 1/sqrt(head_dim); the softmax is fp32
// with the row max subtracted, as HF's eager attention.
void attention(const float* q, const float* k_cache, const float* v_cache, float* out, int n,
               int pos0, int n_heads, int n_kv_heads, int head_dim);

// SwiGLU: out[t, j] = silu(gu[t, j]) * gu[t, inter + j]. gu: [n, 2 * inter]
// (gate rows then up rows of the fused w_gate_up); out: [n, inter].
void silu_mul(const float* gu, float* out, int n, int inter);

// FP8 fake quantization of a linear's input, in place: each row of x [n,
// dim] becomes its e4m3 values times its scale, the row's own (dynamic per
// token, static_scale 0) or static_scale (core/fp8.h).
void quantize_fp8(float* x, int n, int dim, float static_scale);

// x[i] += y[i] for i < count (the residual connection).
void add(float* x, const float* y, int64_t count);

// Copy on write in a paged KV pool: for each pair c in order and each layer
// l, pool[l, pairs[c][1], :] = pool[l, pairs[c][0], :]. pool: [layers,
// blocks, block_elems]; pairs: [n, 2] (src, dst), host memory, blocks inside
// [0, blocks) and src != dst (the caller validates).
void copy_blocks(float* pool, int layers, int blocks, int64_t block_elems, const int32_t* pairs,
                 int n);

}  // namespace hayate::cpu
