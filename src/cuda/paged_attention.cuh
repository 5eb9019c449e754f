// Kernels of the batched (paged) CUDA backend: paged decode attention
// (flash-decoding, split over KV length; one pass at short context), paged
// prefill attention over query tiles, and the per-row greedy argmax (the gathered RMSNorm
// of the LM head rows is rmsnorm_gather, ops.h).
// Every pointer is device memory; every launch goes through launch() (launch.h).
//
// Pool layout per layer: k_pool / v_pool [num_blocks, block_size, kv_dim];
// position p of the sequence in slot s is row p % block_size of block
// block_tables[s * max_blocks + p / block_size].
//
// Pool elements (KV): the compute dtype T, or e4m3 codes (KvFp8,
// `--kv-cache-dtype fp8`) that read back as code * k_scale (K) or code *
// v_scale (V), the layer's per-tensor scales in PagedShape; the writer
// (paged_rope_kv) quantizes with the same scales, the kernels dequantize in
// registers and accumulate in fp32 (the scales fold into the query's scale
// and the output's).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace hayate::cuda {

struct PagedShape {
  int n_heads, n_kv_heads, head_dim;  // head_dim in {32, 64, 128}; group n_heads / n_kv_heads <= 8
  int block_size;                     // tokens per KV block
  int max_blocks;                     // row stride of block_tables
  float k_scale = 1.0f, v_scale = 1.0f;  // an e4m3 pool's per-tensor scales (this layer's)
  // Launch the kernels taking this shape (paged_rope_kv, attention) with
  // programmatic dependent launch (launch.h): each waits for its predecessor
  // at entry, so its launch overlaps the predecessor's tail.
  bool pdl = false;
};

// The e4m3 pool element (--kv-cache-dtype fp8).
using KvFp8 = __nv_fp8_e4m3;

// The step's metadata, uploaded by the host before each step (or graph replay).
struct PagedMeta {
  const int32_t* tok_pos;       // [T] position of each token row
  const int32_t* tok_seq;       // [T] sequence slot of each token row
  const int32_t* block_tables;  // [S, max_blocks]
};

// Largest group (query heads per kv head) and head_dim the kernels handle.
inline constexpr int kPagedMaxGroup = 8;
bool paged_shape_supported(int n_heads, int n_kv_heads, int head_dim);
// Head sizes whose attention kernels read e4m3 pools (every decode and
// prefill kernel an e4m3 pool runs: one-pass, split v2 and tensor-core, prefill).
inline bool kv_fp8_head_dim_supported(int head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 128;
}

// RoPE + the KV write into the pools: paged_rope_kv (ops.h, rope.cu).

// Decode: for each of n_rows token rows rows[i] (one new token of its
// sequence), attention over positions [0, tok_pos[row]], split over the KV
// length into at most n_splits partitions. The split count is chosen on the
// device per row from its length and per launch from n_rows and max_keys:
// the longest context a row of the launch may have (0: the block table's
// reach, max_blocks x block_size), which sizes the grid's split slots; a row
// longer than max_keys is still right, with fewer splits than it would get.
// part_o [n_rows, n_heads, n_splits, head_dim], part_ml [n_rows, n_heads,
// n_splits, 2] are scratch; out [T, q_dim] in T. Graph-capturable: the
// launch depends only on n_rows, n_splits and max_keys.
// head_dim 128 runs on tensor cores (paged_decode_mma.cu: Q and P rounded to
// T, or to f16 on e4m3 pools; fp32 accumulation); 32 and 64 run v2's fp32 math.
template <typename T, typename KV = T>
void paged_attention_decode(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh,
                            PagedMeta meta, const int32_t* rows, int n_rows, int n_splits,
                            int max_keys, float* part_o, float* part_ml, T* out, cudaStream_t s);

// paged_attention_decode with RoPE and the KV append of the rows folded in,
// for a decode-only step: row rows[i]'s query heads come from its QKV row
// qkv [*, (n_heads + 2 n_kv_heads) head_dim] in T (the product's output; bias
// [that width] added first, or null) and are turned in registers, and its
// new K and V are turned / written into the pools (as paged_rope_kv writes
// them) by the block of the split that holds the new position before that
// block reads them; no roped q is written. Only where
// paged_decode_rope_supported (head_dim 128 on the tensor-core split
// kernel, not the streaming one); no per-head q/k norms.
bool paged_decode_rope_supported(int n_rows, const PagedShape& sh, int n_splits, int max_keys,
                                 bool e4m3);
template <typename T, typename KV = T>
void paged_attention_decode_rope(const T* qkv, const T* bias, const float* inv_freq, KV* k_pool,
                                 KV* v_pool, PagedShape sh, PagedMeta meta, const int32_t* rows,
                                 int n_rows, int n_splits, int max_keys, float* part_o,
                                 float* part_ml, T* out, cudaStream_t s);

// With max_keys at most this, a decode launch of n_rows rows gives every row
// one split and has no empty split slots (many pairs: rows up to big_min_part
// keys stay whole); 0 where no bound does (few pairs: short rows are split to
// fill the GPU). For the backend's graphs of large buckets: the split-slot
// grid sized for the table's reach (max_model_len 8192) launched 3 empty
// blocks per real one (lab, 1024 rows x 192 keys: 304 vs 246 us per layer;
// max-load-128 at a capacity of 8192 tokens: +2.6 % output tok/s).
int paged_decode_whole_row_keys(int n_rows, int n_kv_heads);

// Knobs of the decode kernel (the kernel lab sweeps them; defaults are its
// winners, bench/kernels/NOTES.md "Paged attention"). The launch has n_rows x
// n_kv_heads (row, kv head) pairs and z <= n_splits split slots per pair; row
// r uses min(z, ceil(len_r / min_part)) splits of equal length.
// - Few pairs (< many_pairs): z = ceil(target_blocks / pairs), min_part: a
//   small batch is cut into enough blocks to fill the GPU.
// - Many pairs: z = min(big_splits, ceil(max_keys / big_min_part)) (max_keys:
//   the launch's bound, else the table's reach), min_part = big_min_part:
//   rows up to big_min_part keys stay whole (splitting them only added
//   combine work in the lab), while a long row among short ones is still cut
//   into up to big_splits parts instead of becoming one slow block that the
//   whole step waits for.
struct PagedDecodeTuning {
  int target_blocks = 1056;
  int min_part = 256;
  int unroll = 2;        // U: chunks of U 16-byte K and V loads per lane (2 or 4)
  bool prefetch = true;  // next chunk's loads issued before this chunk's math
  int many_pairs = 264;
  int big_splits = 4;
  int big_min_part = 2048;
  // head_dim 128: the tensor-core kernel (paged_decode_mma.cu; Q and P
  // rounded to T, fp32 accumulation) instead of v2; unroll/prefetch are v2's.
  bool mma = true;
  int mma_blocks = 3;  // blocks per SM its registers are capped for: 3 (168 regs) or 4 (128)
  // Many pairs: one split slot per pair plus helper blocks that find the rows
  // to split (paged_decode_mma.cu), instead of big_splits slots per pair. Off:
  // slower in the lab (1024 x 192 keys 348 vs 304 us; NOTES.md, tensor cores).
  bool mma_helpers = false;
  // The longest context of any row of the launch (0: the block table's
  // reach): sizes the split slots of the grid (paged_attention_decode).
  int max_keys = 0;
  // Many pairs with every row in one split (z = 1; head_dim 128, block_size
  // % 16 == 0), and either at least stream_pairs pairs or no row longer than
  // stream_short_keys (the launch's bound, max_keys or the table's reach):
  // the streaming kernel (paged_decode_mma.cu), a warp per pair with the next
  // step's loads in flight during this step's math. With few pairs it
  // leaves the GPU short of loads on long rows (lab, 512 pairs of 1,536
  // keys: 138 vs 120 us) but still wins on short ones (512 pairs of 200
  // keys: 27 vs 31 us); from 2,048 pairs it wins (256 x 200, 1024 x 192,
  // 512 x 256). 1,024 lies between the measured points: launches of
  // 1,024..2,047 pairs with long rows are unmeasured.
  int stream_pairs = 1024;
  int stream_short_keys = 512;
  // The same bound for e4m3 pools: none. There the split kernel is the faster
  // one below stream_pairs (H100, 64 rows x 192 keys: 16.7 vs 18.9 us a layer).
  int stream_short_keys_e4m3 = 0;
};
// Whether paged_attention_decode_tuned runs the streaming kernel for a launch
// of n_rows rows (PagedDecodeTuning::stream_pairs and stream_short_keys, or
// stream_short_keys_e4m3 for e4m3 pools).
bool paged_decode_uses_stream(int n_rows, const PagedShape& sh, int n_splits,
                              const PagedDecodeTuning& tune, bool e4m3 = false);
// The split slots per (row, kv head) of such a launch's grid (1: every row
// whole in one block per pair).
int paged_decode_split_slots(int n_rows, const PagedShape& sh, int n_splits,
                             const PagedDecodeTuning& tune);
// unroll/prefetch are honoured for head_dim 128 (v2); 32 and 64 always use 2/true.
template <typename T, typename KV = T>
void paged_attention_decode_tuned(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh,
                                  PagedMeta meta, const int32_t* rows, int n_rows, int n_splits,
                                  PagedDecodeTuning tune, float* part_o, float* part_ml, T* out,
                                  cudaStream_t s);

// Decode at short context (paged_decode_short.cu): same contract as
// paged_attention_decode, in one pass with a block per (row, query head) that
// loads every K/V row of its context at entry; no split, no scratch. Every
// listed row's context (tok_pos + 1) must be at most
// paged_decode_short_max_keys(head_dim) (128 at head_dim 128, 256 at 32/64):
// a longer one is a device fault (trap), so the host picks this kernel only
// when all rows of the launch fit. Graph-capturable: depends only on n_rows.
// out [T, q_dim] in T.
int paged_decode_short_max_keys(int head_dim);
template <typename T, typename KV = T>
void paged_attention_decode_short(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh,
                                  PagedMeta meta, const int32_t* rows, int n_rows, T* out,
                                  cudaStream_t s);

// Prefill / chunked prefill: tiles [n_tiles] of (first row, rows) of one
// sequence, rows <= paged_prefill_tile_tokens(group), consecutive positions.
// Causal: query at position p sees keys [0, p]. out [T, q_dim] in T.
int paged_prefill_tile_tokens(int group);
template <typename T, typename KV = T>
void paged_attention_prefill(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh,
                             PagedMeta meta, const int2* tiles, int n_tiles, T* out,
                             cudaStream_t s);
// Opts the prefill kernels into their dynamic shared memory (once, before capture).
void paged_attention_init();

// out[r] = argmax of logits [rows, vocab] row r (lowest id on ties).
// pdl: launched with programmatic dependent launch (launch.h).
void argmax_rows(const float* logits, int rows, int vocab, int32_t* out, cudaStream_t s,
                 bool pdl = false);

// Grammar masks: for each b < n, the ids of logits row rows[b] whose bit in
// masks [n, words] (bit id % 32 of word id / 32) is clear become -inf, and
// out[rows[b]] = the argmax of the others (lowest id on ties; -1 if none).
void mask_argmax_rows(float* logits, int vocab, const int32_t* rows, const uint32_t* masks,
                      int words, int n, int32_t* out, cudaStream_t s);

}  // namespace hayate::cuda
