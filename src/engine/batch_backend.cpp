#include "engine/batch_backend.h"

#include <chrono>

#include "core/check.h"
#include "engine/step_profile.h"

namespace hayate {

void BatchBackend::step(const Batch& batch, std::span<int32_t> sampled) {
  HAYATE_CHECK(sampled.size() == batch.seqs.size(), "batch step: ", sampled.size(),
               " output slots for ", batch.seqs.size(), " sequences");
  launch(batch);
  finish(sampled);
}

void BatchBackend::sample_masked(std::span<const uint32_t> masks) {
  HAYATE_CHECK(false, "the ", name(), " backend samples under no token masks (", masks.size(),
               " mask words given)");
}

StepTimes BatchBackend::profile_step(const Batch& batch, std::span<int32_t> sampled) {
  step(batch, sampled);
  StepTimes t;
  t.why = "the " + name() + " backend measures no per-op times";
  return t;
}

void validate_batch(const Batch& batch, int max_model_len, int block_size, int num_blocks,
                    int max_logit_rows, int prev_seqs) {
  HAYATE_CHECK(!batch.seqs.empty(), "batch step: no sequences");
  int64_t total = 0, rows = 0;
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
    HAYATE_CHECK(s.prev_slot < 0 || (n == 1 && s.prev_slot < prev_seqs), "batch step: sequence ",
                 s.seq_id, " takes its token from slot ", s.prev_slot, " of a previous step of ",
                 prev_seqs, " sequences");
    total += n;
    rows += s.all_logits ? n : s.sample ? 1 : 0;
  }
  for (const BlockCopy& c : batch.copies)
    HAYATE_CHECK(c.src >= 0 && c.src < num_blocks && c.dst >= 0 && c.dst < num_blocks &&
                     c.src != c.dst,
                 "batch step: block copy ", c.src, " -> ", c.dst, " outside the pool of ",
                 num_blocks, " or onto itself");
  HAYATE_CHECK(total == batch.num_tokens, "batch step: num_tokens ", batch.num_tokens,
               " but the sequences hold ", total);
  HAYATE_CHECK(rows <= max_logit_rows, "batch step: ", rows, " logits rows exceed the ",
               max_logit_rows, " the backend computes per step");
}

LogitRows logit_rows(const Batch& batch) {
  LogitRows r;
  r.first.assign(batch.seqs.size(), -1);
  int32_t token = 0;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const BatchSeq& s = batch.seqs[i];
    const int32_t n = int32_t(s.tokens.size());
    const int32_t from = s.all_logits ? 0 : s.sample ? n - 1 : n;
    if (from < n) r.first[i] = int32_t(r.token_row.size());
    for (int32_t t = from; t < n; ++t) r.token_row.push_back(token + t);
    if (s.sample) r.sampled.push_back(int32_t(r.token_row.size()) - 1);
    token += n;
  }
  return r;
}

namespace {

class SteadyTimer final : public RegionTimer {
 public:
  void start() override { t0_ = std::chrono::steady_clock::now(); }
  double stop_ms() override {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_)
        .count();
  }

 private:
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace

std::unique_ptr<RegionTimer> BatchBackend::make_timer() { return std::make_unique<SteadyTimer>(); }

}  // namespace hayate
