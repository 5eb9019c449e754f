#include "engine/batch_backend.h"

#include "core/check.h"

namespace hayate {

void validate_batch(const Batch& batch, std::span<const int32_t> sampled, int max_model_len,
                    int block_size, int num_blocks) {
  HAYATE_CHECK(!batch.seqs.empty(), "batch step: no sequences");
  HAYATE_CHECK(sampled.size() == batch.seqs.size(), "batch step: ", sampled.size(),
               " output slots for ", batch.seqs.size(), " sequences");
  int64_t total = 0;
  for (const BatchSeq& s : batch.seqs) {
    const int n = int(s.tokens.size());
    HAYATE_CHECK(n > 0, "batch step: sequence ", s.seq_id, " has no tokens");
    HAYATE_CHECK(s.start_pos >= 0 && int64_t(s.start_pos) + n <= max_model_len,
                 "batch step: sequence ", s.seq_id, " positions [", s.start_pos, ", ",
                 int64_t(s.start_pos) + n, ") exceed max_model_len ", max_model_len);
    HAYATE_CHECK(int64_t(s.block_table.size()) * block_size >= int64_t(s.start_pos) + n,
                 "batch step: sequence ", s.seq_id, " has ", s.block_table.size(), " blocks for ",
                 s.start_pos + n, " positions");
    for (int32_t b : s.block_table)
      HAYATE_CHECK(b >= 0 && b < num_blocks, "batch step: sequence ", s.seq_id, " names block ", b,
                   " outside the pool of ", num_blocks);
    HAYATE_CHECK(!s.sample || s.sampling != nullptr, "batch step: sequence ", s.seq_id,
                 " samples without sampling params");
    total += n;
  }
  HAYATE_CHECK(total == batch.num_tokens, "batch step: num_tokens ", batch.num_tokens,
               " but the sequences hold ", total);
}

}  // namespace hayate
