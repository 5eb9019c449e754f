// Runs the article's experiment through the engine: each run is one whole
// request (prefill + greedy decode of every new token, a batch of one),
// timed with the backend's RegionTimer (CUDA events on the GPU), prompt
// tokenized outside the timed region, as the article's generate() call
// received ids.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "bench/result.h"
#include "bench/workload.h"

namespace hayate {
class Engine;
class Tokenizer;
}  // namespace hayate

namespace hayate::bench {

struct BenchOptions {
  int max_length = 128;     // HF semantics: prompt + new tokens (used when max_new_tokens is 0)
  int max_new_tokens = 0;   // > 0 overrides max_length
  bool chat = false;        // wrap each prompt in the tokenizer's chat template
  bool respect_eos = false; // default: ignore EOS so every engine makes the same number of tokens
  int warmup = 0;           // untimed requests before run 1
  int summary_from_run = 3;
  bool record_ids = true;   // keep each run's new ids in the result
};

// The prompt as ids: plain text gets the tokenizer's special tokens (BOS for
// Llama 3); with `chat` the template is rendered (it writes BOS itself) and
// encoded without adding special tokens, as HF's apply_chat_template does.
std::vector<int32_t> prompt_ids(const Tokenizer& tok, const std::string& prompt, bool chat);

// New tokens for a prompt of `prompt_tokens` under `opt`; throws Error when
// max_length leaves no room for a new token.
int new_tokens_for(const BenchOptions& opt, int prompt_tokens);

// Runs `w.runs` timed requests (after `opt.warmup` untimed ones) and returns
// the runs, the timing of the first token since process start
// (`since_start()` in seconds) and the workload description; system, model
// and startup load fields are the caller's. Progress lines go to `progress`
// when given. A failing run is recorded with its error and the rest go on.
BenchResult run_bench(Engine& engine, const Tokenizer& tok, const Workload& w,
                      const BenchOptions& opt, const std::function<double()>& since_start,
                      std::ostream* progress);

}  // namespace hayate::bench
