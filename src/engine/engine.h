// The batching engine: many requests at once over one BatchBackend, with
// continuous batching (requests join and leave at every step), chunked
// prefill mixed with decode under a per-step token budget, and a paged KV
// cache with preemption by recompute when blocks run out. The server and the
// throughput bench build on this API.
//
// Threading: submit(), abort(), stats() and the start()/stop() pair are
// thread-safe. Steps run on one thread at a time: the background loop
// (start()) or the caller of step(); do not mix the two. Event callbacks run
// on the stepping thread with no engine lock held, so a callback may call
// submit() or abort(); it should return quickly because the whole batch waits
// for it.
//
// Guarantees: an accepted request (submit() returned an id) always gets
// exactly one final event (finished == true), whatever happens: it finished,
// was aborted, failed inside a step, or the engine was destroyed. No event
// for a request follows its final event.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/batch_backend.h"
#include "engine/generate.h"
#include "engine/sampling.h"

namespace hayate {

class Tokenizer;
namespace grammar {
class TokenTables;
}

using RequestId = uint64_t;

struct EngineOptions {
  int max_num_seqs = 256;             // most sequences in one step
  int max_num_batched_tokens = 8192;  // most tokens (decode + prefill chunks) in one step
  // Reuse the KV blocks of prompt prefixes earlier requests computed
  // (vLLM's --enable-prefix-caching, on by default as there).
  bool enable_prefix_caching = true;
};

// One streamed update for a request. Token events carry one or more new ids
// and the text that became final with them (UTF-8 whole characters, held back
// while it could still be the start of a stop string). The final event has
// finished == true and may carry last ids/text too.
struct EngineEvent {
  RequestId id = 0;
  std::vector<int32_t> token_ids;  // ids generated since the previous event
  std::string text;                // newly final text (empty without a tokenizer)
  bool finished = false;
  FinishReason finish = FinishReason::kLength;  // valid when finished
  std::string error;                            // set when the request failed (finish == kAbort)
  int prompt_tokens = 0;                        // usage: prompt length
  int cached_tokens = 0;  // usage: prompt tokens found computed (prefix cache, or a shared choice)
  int completion_tokens = 0;                    // usage: ids generated so far
  // One entry per token_ids entry (same order) when the request asked for
  // logprobs (SamplingParams::logprobs >= 0); empty otherwise.
  std::vector<SampleResult> logprobs;
  // Requests with prompt_logits: fp32 logits [rows, vocab] of prompt
  // positions [prompt_logits_pos, prompt_logits_pos + rows), each position's
  // row predicting the token after it; every prompt position comes once, in
  // order, before the first generated id.
  std::vector<float> prompt_logits;
  int prompt_logits_pos = 0;
};

using EventCallback = std::function<void(const EngineEvent&)>;

struct EngineRequest {
  std::vector<int32_t> prompt;  // token ids, non-empty
  SamplingParams sampling;
  int max_tokens = 128;  // generated ids at most (finish kLength); 0 only with prompt_logits
  bool prompt_logits = false;  // stream the logits of every prompt position (EngineEvent)
  bool ignore_eos = false;              // keep going past the model's eos ids
  std::vector<int32_t> stop_token_ids;  // also end the sequence (even with ignore_eos)
  std::vector<std::string> stop;  // stop strings (needs a tokenizer): text before the match is kept
  bool skip_special_tokens = true;  // in the streamed text
  bool include_stop_str_in_output = false;  // a matched stop string ends the text (vLLM)
  // Structured output: every sampled id is one the grammar allows (a mask
  // over the logits, on the backend's device); EOS only where the grammar
  // may end, and the request stops when it does. Compiled by the caller
  // (grammar/), once per grammar; requests may share it. Null: free text.
  std::shared_ptr<const grammar::TokenTables> grammar;
  EventCallback on_event;           // may be empty (then only stats count it)
};

struct EngineStats {
  int num_running = 0;  // sequences holding KV blocks
  int num_waiting = 0;  // queued or preempted, not yet (re)admitted
  int kv_blocks_total = 0;
  int kv_blocks_used = 0;
  double kv_usage = 0.0;  // used / total
  uint64_t steps = 0;
  uint64_t prompt_tokens_total = 0;      // prompt tokens of finished requests
  uint64_t generation_tokens_total = 0;  // ids generated, all requests
  uint64_t computed_tokens_total = 0;    // tokens run through the backend (recompute included)
  uint64_t preemptions_total = 0;
  uint64_t prefix_cache_queries_total = 0;  // tokens looked up in the prefix cache at admission
  uint64_t prefix_cache_hits_total = 0;     // of which found computed
  int kv_blocks_cached = 0;                 // blocks registered in the prefix cache
  uint64_t kv_block_copies_total = 0;       // copy on write of shared blocks
  uint64_t requests_finished_total = 0;  // every final event (abort and error included)
  uint64_t requests_aborted_total = 0;
  uint64_t requests_failed_total = 0;
};

class Engine {
 public:
  // `backend` must outlive the engine. `tokenizer` may be null: then events
  // carry ids only and requests with stop strings are rejected. Throws Error
  // for bad options.
  Engine(BatchBackend& backend, const Tokenizer* tokenizer, const EngineOptions& options = {});
  ~Engine();  // stops the loop; pending requests get a final kAbort event
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; returns its id. Throws Error (and queues nothing) for an
  // empty prompt, bad sampling params, max_tokens < 1, prompt + max_tokens
  // beyond max_model_len, a request needing more KV blocks than the whole
  // pool, or stop strings without a tokenizer.
  RequestId submit(EngineRequest request);

  // Queues requests together, all or none (every one is validated first):
  // ids in order, arrivals consecutive. A request whose prompt equals an
  // earlier one's in the list (the n choices of one request) shares that
  // one's prompt blocks once it has computed them and runs only its last
  // prompt token (not with prompt_logits). Also throws Error when such a
  // group could never hold its KV at once: the shared prompt blocks plus
  // each member's own exceed the pool.
  std::vector<RequestId> submit(std::vector<EngineRequest> requests);

  // Aborts a request in any state (queued, prefilling, decoding, preempted):
  // its blocks return to the pool at the next step, and it gets a final event
  // with FinishReason::kAbort. Unknown or already finished ids are ignored.
  void abort(RequestId id);

  // Runs one scheduling step (admits new requests, applies aborts, runs the
  // backend, emits events). Returns false when there was nothing to do.
  bool step();
  // Steps until no request is left (tests and offline benchmarks).
  void run_until_idle();
  bool has_work() const;  // any request queued, waiting or running

  // Background loop: steps while there is work, sleeps otherwise.
  void start();
  void stop();  // returns after the current step; requests stay queued

  EngineStats stats() const;
  const EngineOptions& options() const;
  BatchBackend& backend();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hayate
