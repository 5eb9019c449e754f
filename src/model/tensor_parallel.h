// Megatron-style tensor parallelism: what one rank of N holds of the model.
// Attention heads and KV heads split across ranks (a KV head replicated on
// N / num_kv_heads ranks where N exceeds them); q/k/v and gate/up split by
// output rows (columns of the activation), o_proj and down_proj by input
// columns (their outputs are partial sums, all-reduced); the embedding and
// the LM head split by vocabulary rows (the embedding's rows outside a
// rank's range read as zeros and are all-reduced; the logits are gathered).
// Every rank holds the full residual stream and the norms.
#pragma once

#include "model/config.h"

namespace hayate {

struct TpShard {
  int rank = 0, size = 1;
  int head0 = 0, heads = 0;        // query heads [head0, head0 + heads)
  int kv_head0 = 0, kv_heads = 0;  // KV heads [kv_head0, kv_head0 + kv_heads)
  int inter0 = 0, inter = 0;       // intermediate columns [inter0, inter0 + inter)
  int vocab0 = 0, vocab = 0;       // vocabulary rows [vocab0, vocab0 + vocab); the last rank's
                                   // range is shorter when size does not divide the vocabulary

  int q_dim(const ModelConfig& c) const { return heads * c.head_dim; }
  int kv_dim(const ModelConfig& c) const { return kv_heads * c.head_dim; }
  int qkv_dim(const ModelConfig& c) const { return q_dim(c) + 2 * kv_dim(c); }
};

// Throws Error (one line naming the sizes) when `size` ranks cannot split
// `c`: size < 1, num_attention_heads or intermediate_size not divisible by
// it, or KV heads neither divisible by it nor dividing it.
void check_tensor_parallel(const ModelConfig& c, int size);

// Rank `rank` of `size` (check_tensor_parallel first).
TpShard tp_shard(const ModelConfig& c, int size, int rank);

}  // namespace hayate
