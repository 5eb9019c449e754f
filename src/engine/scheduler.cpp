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

namespace {

// Extends seq.block_hashes to its first `n` blocks (their tokens known).
void extend_hashes(Sequence& seq, int n, int bs) {
  while (int(seq.block_hashes.size()) < n) {
    const size_t i = seq.block_hashes.size();
    const uint64_t prev = i == 0 ? 0 : seq.block_hashes[i - 1];
    seq.block_hashes.push_back(
        block_hash(prev, std::span<const int32_t>(seq.tokens).subspan(i * size_t(bs), size_t(bs))));
  }
}

}  // namespace

void Scheduler::cache_blocks(Sequence* seq) {
  if (!blocks_.prefix_caching()) return;
  const int bs = blocks_.block_size();
  const int known = seq->num_tokens() - seq->num_pending;
  const int full = std::min({seq->num_computed_tokens, known,
                             int(seq->block_table.size()) * bs}) / bs;
  if (full <= seq->num_cached_blocks) return;
  extend_hashes(*seq, full, bs);
  blocks_.cache(seq->block_table, std::span<const uint64_t>(seq->block_hashes).first(size_t(full)),
                seq->tokens, seq->num_cached_blocks);
  seq->num_cached_blocks = full;
}

void Scheduler::unlink_forks(Sequence* seq, bool children) {
  if (children) {
    for (Sequence* c : seq->fork_children) c->fork_parent = nullptr;
    seq->fork_children.clear();
  }
  if (Sequence* p = seq->fork_parent) {
    auto& kids = p->fork_children;
    kids.erase(std::remove(kids.begin(), kids.end(), seq), kids.end());
    seq->fork_parent = nullptr;
  }
}

bool Scheduler::take_shared(Sequence* seq, int* hit_tokens, bool* looked_up) {
  *hit_tokens = 0;
  *looked_up = false;
  if (seq->num_computed_tokens > 0 || !seq->block_table.empty()) return true;
  const int bs = blocks_.block_size();
  if (Sequence* p = seq->fork_parent) {
    // All but the last prompt token, as the parent computed them (the block
    // of the last one is shared too when partial: copied on write).
    const int share = seq->num_prompt_tokens - 1;
    if (p->status != SeqStatus::kRunning || p->num_computed_tokens < share) return false;
    const BlockTable head(p->block_table.begin(),
                          p->block_table.begin() + ptrdiff_t(blocks_.blocks_for(share)));
    seq->block_table = blocks_.fork(head);
    seq->num_computed_tokens = share;
    seq->num_cached_blocks = 0;
    *hit_tokens = share;
    *looked_up = true;
    return true;
  }
  if (!blocks_.prefix_caching() || seq->prompt_logits) return true;
  const int known = seq->num_tokens() - seq->num_pending;
  const int limit = std::min(known, seq->num_tokens() - 1) / bs;  // the last token always runs
  extend_hashes(*seq, limit, bs);
  const int m = blocks_.match(std::span<const uint64_t>(seq->block_hashes).first(size_t(limit)),
                              seq->tokens, seq->block_table);
  seq->num_computed_tokens = m * bs;
  seq->num_cached_blocks = m;
  *hit_tokens = m * bs;
  *looked_up = true;
  return true;
}

bool Scheduler::reserve(Sequence* seq, int n, std::vector<BlockCopy>& copies) {
  const int first = seq->num_computed_tokens / blocks_.block_size();
  if (first < int(seq->block_table.size()) &&
      !blocks_.make_writable(seq->block_table, first, copies))
    return false;
  return blocks_.grow(seq->block_table, seq->num_computed_tokens + n);
}

void Scheduler::preempt(Sequence* seq) {
  cache_blocks(seq);  // its recompute (or another prompt) may find them again
  unlink_forks(seq);
  blocks_.release(seq->block_table);
  seq->num_computed_tokens = 0;
  seq->num_cached_blocks = 0;
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

  // What the last steps computed becomes findable before anyone looks.
  for (Sequence* seq : running_) cache_blocks(seq);

  // 1. Running sequences, oldest first: decode ids and prefill continuations.
  std::vector<BlockCopy> copies;
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    const int n = chunk_of(*seq, budget, rows_left);
    if (n == 0) {  // not ready, or no logits rows left this step: it runs in a later one
      ++i;
      continue;
    }
    bool scheduled = true;
    copies.clear();
    while (!reserve(seq, n, copies)) {
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
    out.copies.insert(out.copies.end(), copies.begin(), copies.end());
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
    if (!ready(*seq)) break;
    int hit = 0;
    bool looked_up = false;
    if (!take_shared(seq, &hit, &looked_up)) break;  // a choice waits for its parent
    const int n = chunk_of(*seq, budget, rows_left);
    copies.clear();
    if (n == 0 || !reserve(seq, n, copies)) {
      blocks_.release(seq->block_table);  // the shared blocks go back; it retries later
      seq->num_computed_tokens = 0;
      seq->num_cached_blocks = 0;
      break;
    }
    if (looked_up) {
      prefix_queries_ += uint64_t(seq->num_tokens());
      prefix_hits_ += uint64_t(hit);
      if (seq->status == SeqStatus::kWaiting)
        seq->num_cached_tokens = std::min(hit, seq->num_prompt_tokens);
    }
    unlink_forks(seq, /*children=*/false);  // a forked choice needs its parent no more
    out.copies.insert(out.copies.end(), copies.begin(), copies.end());
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

void Scheduler::remove(Sequence* seq, bool failed) {
  auto r = std::find(running_.begin(), running_.end(), seq);
  if (r != running_.end()) {
    running_.erase(r);
  } else {
    auto w = std::find(waiting_.begin(), waiting_.end(), seq);
    if (w != waiting_.end()) waiting_.erase(w);
  }
  if (failed)
    blocks_.uncache(seq->block_table);
  else
    cache_blocks(seq);
  unlink_forks(seq);
  blocks_.release(seq->block_table);
  seq->num_cached_blocks = 0;
  seq->status = SeqStatus::kFinished;
}

}  // namespace hayate
