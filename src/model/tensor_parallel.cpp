#include "model/tensor_parallel.h"

#include <algorithm>

#include "core/check.h"

namespace hayate {

void check_tensor_parallel(const ModelConfig& c, int size) {
  HAYATE_CHECK(size >= 1, "--tensor-parallel-size must be >= 1, got ", size);
  HAYATE_CHECK(c.num_heads % size == 0, "--tensor-parallel-size ", size,
               " does not divide num_attention_heads ", c.num_heads);
  HAYATE_CHECK(c.num_kv_heads % size == 0 || size % c.num_kv_heads == 0,
               "--tensor-parallel-size ", size, " neither divides num_key_value_heads ",
               c.num_kv_heads, " nor is a multiple of it");
  HAYATE_CHECK(c.intermediate_size % size == 0, "--tensor-parallel-size ", size,
               " does not divide intermediate_size ", c.intermediate_size);
  HAYATE_CHECK(c.vocab_size >= size, "--tensor-parallel-size ", size, " exceeds vocab_size ",
               c.vocab_size);
}

TpShard tp_shard(const ModelConfig& c, int size, int rank) {
  check_tensor_parallel(c, size);
  HAYATE_CHECK(rank >= 0 && rank < size, "tensor-parallel rank ", rank, " outside [0, ", size, ")");
  TpShard s;
  s.rank = rank;
  s.size = size;
  s.heads = c.num_heads / size;
  s.head0 = rank * s.heads;
  if (c.num_kv_heads % size == 0) {
    s.kv_heads = c.num_kv_heads / size;
    s.kv_head0 = rank * s.kv_heads;
  } else {  // size is a multiple of the KV heads: each is replicated on size / kv ranks
    s.kv_heads = 1;
    s.kv_head0 = rank / (size / c.num_kv_heads);
  }
  s.inter = c.intermediate_size / size;
  s.inter0 = rank * s.inter;
  const int per = (c.vocab_size + size - 1) / size;
  s.vocab0 = std::min(rank * per, c.vocab_size);
  s.vocab = std::min(per, c.vocab_size - s.vocab0);
  return s;
}

}  // namespace hayate
