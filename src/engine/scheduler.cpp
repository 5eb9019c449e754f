#include "engine/scheduler.h"

#include <algorithm>

#include "core/check.h"

namespace hayate {

Scheduler::Scheduler(BlockManager& blocks, const SchedulerOptions& options)
    : blocks_(blocks), options_(options) {
  HAYATE_CHECK(options.max_num_seqs >= 1, "--max-num-seqs must be >= 1, got ",
               options.max_num_seqs);
  if (options_.max_logit_rows == 0) options_.max_logit_rows = options.max_num_seqs;
  HAYATE_CHECK(options_.max_logit_rows >= options.max_num_seqs, "scheduler: ",
               options_.max_logit_rows, " logits rows per step, fewer than --max-num-seqs ",
               options.max_num_seqs);
  HAYATE_CHECK(options.max_num_batched_tokens >= options.max_num_seqs, "--max-num-batched-tokens (",
               options.max_num_batched_tokens, ") must be >= --max-num-seqs (",
               options.max_num_seqs, ") so that every running sequence can decode in one step");
}

void Scheduler::add(Sequence* seq) {
  HAYATE_CHECK(seq != nullptr && seq->num_tokens() > 0, "scheduler: empty sequence");
  HAYATE_CHECK(waiting_.empty() || waiting_.back()->arrival < seq->arrival,
               "scheduler: sequences must be added in arrival order");
  seq->status = SeqStatus::kWaiting;
  waiting_.push_back(seq);
}

void Scheduler::preempt(Sequence* seq) {
  blocks_.release(seq->block_table);
  seq->num_computed_tokens = 0;
  seq->status = SeqStatus::kPreempted;
  ++seq->num_preemptions;
  ++num_preemptions_;
  // Victims are taken newest first and pushed to the front, so the waiting
  // queue stays in arrival order.
  waiting_.push_front(seq);
}

bool Scheduler::ready(const Sequence& seq) {
  if (seq.num_pending == 0) return true;
  return seq.num_pending == 1 && seq.num_uncomputed() == 1 &&
         seq.num_generated() < seq.stop.max_tokens;
}

int Scheduler::chunk_of(const Sequence& seq, int budget, int rows_left) const {
  if (!ready(seq)) return 0;
  const int n = std::min(seq.num_uncomputed(), budget);
  if (seq.prompt_logits && seq.num_computed_tokens < seq.num_prompt_tokens)
    return std::min(n, rows_left);  // a row per token (the last one's is the sampling row)
  const bool samples = seq.num_computed_tokens + n == seq.num_tokens();
  return samples && rows_left < 1 ? 0 : n;
}

ScheduledSeq Scheduler::scheduled(Sequence* seq, int n) const {
  const int start = seq->num_computed_tokens;
  return {seq, start, n, start + n == seq->num_tokens(),
          seq->prompt_logits && start < seq->num_prompt_tokens, seq->num_pending == 1};
}

static int logit_rows_of(const ScheduledSeq& s) {
  return s.all_logits ? s.num_tokens : s.sample ? 1 : 0;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int budget = options_.max_num_batched_tokens;
  int rows_left = options_.max_logit_rows;

  // 1. Running sequences, oldest first: decode ids and prefill continuations.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    const int n = chunk_of(*seq, budget, rows_left);
    if (n == 0) {  // not ready, or no logits rows left this step: it runs in a later one
      ++i;
      continue;
    }
    bool scheduled = true;
    while (!blocks_.grow(seq->block_table, seq->num_computed_tokens + n)) {
      // Out of blocks: the newest running sequence gives its blocks back.
      Sequence* victim = running_.back();
      running_.pop_back();
      preempt(victim);
      out.preempted.push_back(victim);
      if (victim == seq) {
        scheduled = false;
        break;
      }
    }
    if (!scheduled) break;
    out.seqs.push_back(this->scheduled(seq, n));
    out.num_tokens += n;
    budget -= n;
    rows_left -= logit_rows_of(out.seqs.back());
    ++i;
  }

  // 2. Waiting sequences in arrival order, but not in a step that had to
  // preempt: the pool is short, and admitting newcomers would only evict
  // the sequences just kept.
  while (out.preempted.empty() && !waiting_.empty() && budget > 0 &&
         int(running_.size()) < options_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    const int n = chunk_of(*seq, budget, rows_left);
    if (n == 0 || !blocks_.grow(seq->block_table, seq->num_computed_tokens + n)) break;
    waiting_.pop_front();
    seq->status = SeqStatus::kRunning;
    running_.push_back(seq);
    out.seqs.push_back(scheduled(seq, n));
    out.num_tokens += n;
    budget -= n;
    rows_left -= logit_rows_of(out.seqs.back());
  }
  return out;
}

void Scheduler::commit(const SchedulerOutput& out) {
  for (const ScheduledSeq& s : out.seqs) {
    HAYATE_CHECK(s.seq->num_computed_tokens == s.start_pos, "scheduler: sequence ", s.seq->id,
                 " changed between schedule and commit");
    s.seq->num_computed_tokens += s.num_tokens;
  }
}

void Scheduler::remove(Sequence* seq) {
  auto r = std::find(running_.begin(), running_.end(), seq);
  if (r != running_.end()) {
    running_.erase(r);
  } else {
    auto w = std::find(waiting_.begin(), waiting_.end(), seq);
    if (w != waiting_.end()) waiting_.erase(w);
  }
  blocks_.release(seq->block_table);
  seq->status = SeqStatus::kFinished;
}

}  // namespace hayate
