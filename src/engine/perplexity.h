// Perplexity of a token sequence, as HF's "perplexity of fixed-length
// models" recipe computes it: when the sequence is longer than the context C,
// windows of C tokens start every C/2 tokens; each window runs from position 0
// and scores only the tokens no earlier window scored, so every token after
// the first is scored once, with at least C/2 tokens of context after the
// first window. `hayate perplexity` and the golden tests use it.
#pragma once

#include <cstdint>
#include <span>

namespace hayate {

class Engine;

struct PerplexityResult {
  int64_t count = 0;      // scored tokens: ids.size() - 1
  double nll_mean = 0.0;  // mean negative log-likelihood, nats
  double ppl = 0.0;       // exp(nll_mean)
  int context = 0;        // window length used
  int stride = 0;         // window start spacing (= context when one window)
  int windows = 0;
};

// ids: the whole sequence, BOS first when the model wants one (at least 2).
// context: window length, 0 = the backend's max_model_len. Each window is one
// prompt-only request with prompt_logits (the engine runs them as a batch);
// the engine must have no background loop running. Throws Error for a
// context below 2 or above the backend's.
PerplexityResult perplexity(Engine& engine, std::span<const int32_t> ids, int context = 0);

}  // namespace hayate
