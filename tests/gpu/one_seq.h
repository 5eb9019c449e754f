// One sequence stepped by hand through any BatchBackend (no engine, no
// scheduler): forward() runs tokens at a position and returns logits rows,
// forward_sample() samples after them. The gpu tests drive the CUDA backend
// and the fp32 CPU backend (the oracle) this way, side by side.
#pragma once

#include <memory>
#include <numeric>
#include <span>
#include <vector>

#include "core/check.h"
#include "cpu/cpu_paged_backend.h"
#include "engine/batch_backend.h"
#include "model/model.h"

namespace hayate::test {

class OneSeq {
 public:
  // Uses blocks [first_block, first_block + blocks for max_model_len) of `b`.
  explicit OneSeq(BatchBackend& b, int first_block = 0) : b_(b) {
    table_.resize(size_t((b.max_model_len() + b.block_size() - 1) / b.block_size()));
    std::iota(table_.begin(), table_.end(), first_block);
  }

  // Logits of every token (all_logits) or of the last one: [rows, vocab].
  void forward(std::span<const int32_t> tokens, int pos, std::span<float> out,
               bool all_logits = false) {
    const size_t V = size_t(b_.config().vocab_size);
    HAYATE_CHECK(out.size() == (all_logits ? tokens.size() : 1) * V, "OneSeq: out size");
    std::vector<float> rows(tokens.size() * V);
    run(tokens, pos, false, nullptr, 0);
    b_.last_chunk_logits(0, rows);
    std::copy(rows.end() - ptrdiff_t(out.size()), rows.end(), out.begin());
  }

  int32_t forward_sample(std::span<const int32_t> tokens, int pos, const SamplingParams& p,
                         uint64_t step) {
    return run(tokens, pos, true, &p, step);
  }

  BatchBackend& backend() { return b_; }

 private:
  int32_t run(std::span<const int32_t> tokens, int pos, bool sample, const SamplingParams* p,
              uint64_t step) {
    Batch batch;
    BatchSeq s;
    s.tokens = tokens;
    s.start_pos = pos;
    s.block_table = std::span<const int32_t>(table_).first(
        size_t((pos + int(tokens.size()) + b_.block_size() - 1) / b_.block_size()));
    s.sample = sample;
    s.all_logits = !sample;
    s.sampling = p;
    s.sample_step = step;
    batch.seqs.push_back(s);
    batch.num_tokens = int(tokens.size());
    int32_t id = -1;
    b_.step(batch, std::span<int32_t>(&id, 1));
    return id;
  }

  BatchBackend& b_;
  std::vector<int32_t> table_;
};

// The fp32 CPU backend sized for one sequence of max_len tokens, any chunk's
// logits kept: the oracle of the gpu tests.
inline std::unique_ptr<BatchBackend> cpu_oracle_backend(const Model& model, int max_len) {
  BatchBackendOptions o;
  o.max_model_len = max_len;
  o.block_size = 16;
  o.num_blocks = (max_len + 15) / 16;
  o.max_num_seqs = 1;
  o.max_logit_rows = max_len;
  return make_cpu_paged_backend(model, o);
}

// A backend and one sequence over it, owned together.
struct OwnedSeq {
  std::unique_ptr<BatchBackend> backend;
  std::unique_ptr<OneSeq> seq;
  OneSeq* operator->() { return seq.get(); }
};
inline OwnedSeq own(std::unique_ptr<BatchBackend> b) {
  OwnedSeq o;
  o.backend = std::move(b);
  o.seq = std::make_unique<OneSeq>(*o.backend);
  return o;
}

}  // namespace hayate::test
