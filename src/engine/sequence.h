// One request's state inside the engine: its tokens (prompt, then generated
// ids), how many of them have KV entries in the cache, its block table and
// its stop conditions. Host only; the scheduler moves sequences between its
// queues and the engine appends sampled ids.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "engine/sampling.h"

namespace hayate {

enum class SeqStatus {
  kWaiting,    // queued, never run
  kRunning,    // holds KV blocks, scheduled each step (prefill chunks, then decode)
  kPreempted,  // lost its blocks to an older sequence; waits to recompute
  kFinished,
};

struct StopConditions {
  int max_tokens = 128;  // generated ids at most
  bool ignore_eos = false;
  std::vector<int32_t> eos_ids;         // the model's; ignored with ignore_eos
  std::vector<int32_t> stop_token_ids;  // always honoured
  std::vector<std::string> stop;        // stop strings, matched by the engine on text
};

struct Sequence {
  uint64_t id = 0;
  uint64_t arrival = 0;         // submission order: FCFS and the preemption victim choice
  std::vector<int32_t> tokens;  // prompt ids then generated ids
  int num_prompt_tokens = 0;
  // Tokens [0, num_computed_tokens) have K/V in the blocks of block_table.
  // Preemption resets it to 0 (recompute); it never exceeds num_tokens().
  int num_computed_tokens = 0;
  std::vector<int32_t> block_table;
  SamplingParams sampling;
  bool constrained = false;  // sampled under a grammar's token mask (the engine's matcher)
  StopConditions stop;
  SeqStatus status = SeqStatus::kWaiting;
  FinishReason finish = FinishReason::kLength;
  int num_preemptions = 0;
  // Keep the logits of every prompt position (perplexity, prompt logprobs).
  bool prompt_logits = false;
  // The last num_pending tokens stand in for ids that launched steps sample
  // and the host has not read yet (0, 1, or 2 for a moment during a step).
  int num_pending = 0;
  int slot = -1;  // its index in the last launched batch

  // Prefix cache: the chained hashes of its full blocks of known tokens
  // (block_hash; kept across preemption: the tokens do not change), how many
  // blocks of block_table are registered (cache() resumes there), and the
  // prompt tokens its first admission found computed (usage.cached_tokens).
  std::vector<uint64_t> block_hashes;
  int num_cached_blocks = 0;
  int num_cached_tokens = 0;
  // One of the n choices of a request: it waits for the first choice (the
  // parent) to compute all but the last prompt token, then shares those
  // blocks (fork) and runs the last token itself, copying the shared partial
  // block on write. The link is cut when either ends or the parent is
  // preempted (then the prefix cache is what it shares).
  Sequence* fork_parent = nullptr;
  std::vector<Sequence*> fork_children;

  int num_tokens() const { return int(tokens.size()); }
  int num_generated() const { return num_tokens() - num_prompt_tokens; }
  std::span<const int32_t> prompt() const { return {tokens.data(), size_t(num_prompt_tokens)}; }
  std::span<const int32_t> generated() const {
    return std::span<const int32_t>(tokens).subspan(size_t(num_prompt_tokens));
  }
  // The ids the next forward must run before a new id can be sampled.
  int num_uncomputed() const { return num_tokens() - num_computed_tokens; }
};

}  // namespace hayate
