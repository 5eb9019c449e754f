// Continuous-batching scheduler (host only). Each step it builds one batch
// under a token budget: first the running sequences in arrival order (a
// decode id each, or their next prefill chunk), then waiting sequences from
// the head of the queue (first-come first-served, never skipping ahead) with
// a prefill chunk of whatever budget is left. When the pool cannot give a
// running sequence its next slots, the most recently arrived running
// sequence is preempted by recompute: its blocks are freed and it goes back
// to the front of the waiting queue with num_computed_tokens = 0. Sequences
// that want their prompt's logits (perplexity, prompt logprobs) have their
// prefill chunks cut to the step's logits rows. A sequence whose last id is
// still on the device (a launched step's, not yet read) decodes it from there
// (ScheduledSeq::from_device) or waits.
//
// Sharing: a waiting sequence's first admission takes what is already
// computed: its fork parent's blocks (the n choices of a request), else the
// longest run of its full blocks in the prefix cache (not for prompt_logits
// sequences, whose every prompt position must run; and never the block of
// its last token, which always runs to give the logits to sample from).
// Full blocks are registered in the cache once computed and known (no
// stand-in ids), at each schedule() and when a sequence is preempted or
// removed. A chunk that starts inside a block another table shares first
// copies it (SchedulerOutput::copies, run by the backend before the step).
//
// Invariant: every running sequence arrived before every waiting one, so
// `running_` is in arrival order and its back is the preemption victim.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"

namespace hayate {

struct SchedulerOptions {
  int max_num_seqs = 256;             // sequences per step
  int max_num_batched_tokens = 8192;  // tokens per step; >= max_num_seqs
  // Logits rows per step (the backend's max_logit_rows; 0: max_num_seqs): a
  // sampling sequence takes one, a prompt_logits chunk one per prompt token,
  // so such chunks are cut to what is left.
  int max_logit_rows = 0;
};

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int start_pos = 0;    // seq->num_computed_tokens when scheduled
  int num_tokens = 0;   // run tokens [start_pos, start_pos + num_tokens)
  bool sample = false;  // the chunk reaches the end of the sequence's tokens
  bool all_logits = false;  // a prompt_logits sequence's chunk inside its prompt
  bool from_device = false;  // its one token is the stand-in of an id still on the device
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;
  int num_tokens = 0;
  std::vector<Sequence*> preempted;  // preempted during this schedule() call
  std::vector<BlockCopy> copies;     // copy on write, before the step's forward
  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  // `blocks` must outlive the scheduler. Throws Error for bad options.
  Scheduler(BlockManager& blocks, const SchedulerOptions& options);

  // Queues a new sequence at the back of the waiting queue. The caller keeps
  // ownership; the pointer must stay valid until finish() or remove().
  void add(Sequence* seq);

  // Picks this step's batch and reserves its KV slots.
  SchedulerOutput schedule();

  // After the backend ran `out`: advances num_computed_tokens of every
  // scheduled sequence. The caller then appends sampled ids and calls
  // finish() for sequences that ended.
  void commit(const SchedulerOutput& out);

  // Takes a sequence out of whichever queue holds it and frees its blocks
  // (finished, aborted or failed). Sets its status to kFinished. Its
  // computed full blocks stay in the prefix cache unless `failed` (a step
  // that may have left garbage in them): then those it alone holds leave it.
  void remove(Sequence* seq, bool failed = false);

  int num_running() const { return int(running_.size()); }
  int num_waiting() const { return int(waiting_.size()); }
  bool empty() const { return running_.empty() && waiting_.empty(); }
  const std::vector<Sequence*>& running() const { return running_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  uint64_t num_preemptions() const { return num_preemptions_; }
  // Prefix cache lookups at admission, in tokens (vLLM's prefix_cache_queries
  // and prefix_cache_hits): every token of each sequence looked up, and those
  // found computed (cache or fork parent).
  uint64_t prefix_cache_queries() const { return prefix_queries_; }
  uint64_t prefix_cache_hits() const { return prefix_hits_; }
  const SchedulerOptions& options() const { return options_; }

 private:
  void preempt(Sequence* seq);
  // Tokens of `seq` to run now under the token and logits-row budgets (0: none).
  int chunk_of(const Sequence& seq, int budget, int rows_left) const;
  // Whether `seq` can run now: a sequence whose last id is still on the
  // device only as a decode of that id, and not when it is its last id.
  static bool ready(const Sequence& seq);
  ScheduledSeq scheduled(Sequence* seq, int n) const;
  // Registers seq's computed full blocks of known tokens in the prefix cache.
  void cache_blocks(Sequence* seq);
  // A waiting sequence's shared start (fork parent or prefix cache): fills
  // its table and num_computed_tokens. False: its parent is not far enough yet.
  bool take_shared(Sequence* seq, int* hit_tokens, bool* looked_up);
  // Blocks for the chunk [num_computed_tokens, +n): copy on write of the
  // block it starts in, then growth. False when the pool is short.
  bool reserve(Sequence* seq, int n, std::vector<BlockCopy>& copies);
  // Cuts seq's link to its fork parent and (children) its children's to it.
  void unlink_forks(Sequence* seq, bool children = true);

  BlockManager& blocks_;
  SchedulerOptions options_;
  std::vector<Sequence*> running_;  // arrival order
  std::deque<Sequence*> waiting_;   // arrival order; preempted ones at the front
  uint64_t num_preemptions_ = 0;
  uint64_t prefix_queries_ = 0, prefix_hits_ = 0;
};

}  // namespace hayate
