// Sampling parameters and the host sampler. The CUDA sampler mirrors it and
// uses the same counter-based random numbers (core/rng.h), so a seeded run
// picks the same tokens on either backend up to logit rounding.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace hayate {

// Temperatures below this are greedy (vLLM's _SAMPLING_EPS): dividing logits
// by a tiny temperature overflows them to inf, and the softmax to NaN.
inline constexpr float kSamplingEps = 1e-5f;

struct SamplingParams {
  float temperature = 0.0f;  // below kSamplingEps (0 included) = greedy
  float top_p = 1.0f;        // (0, 1]
  int top_k = 0;             // 0 = off
  float min_p = 0.0f;        // [0, 1]
  uint64_t seed = 0;
  // Penalties, applied to the logits before the filters above (vLLM's order:
  // repetition, then frequency, then presence). OpenAI semantics for the
  // last two, over the ids generated so far:
  //   logit[t] -= frequency_penalty * count[t] + presence_penalty * (count[t] > 0).
  // repetition_penalty as HF/vLLM, over every id seen (prompt + generated):
  //   logit[t] = logit[t] > 0 ? logit[t] / r : logit[t] * r.
  float presence_penalty = 0.0f;    // [-2, 2], 0 = off
  float frequency_penalty = 0.0f;   // [-2, 2], 0 = off
  float repetition_penalty = 1.0f;  // > 0, 1 = off
  // Log-probabilities wanted with each sampled id: -1 = none, 0 = the chosen
  // id's only, N = also the N most likely ids. They are those of the model's
  // own distribution (log_softmax of the raw logits, before penalties and
  // temperature: vLLM's default "raw_logprobs").
  int logprobs = -1;
  // OpenAI's logit_bias: added to the raw logit of each id before the
  // penalties and filters (vLLM's order). Sorted by id, ids unique, values
  // finite in [-100, 100].
  std::vector<std::pair<int32_t, float>> logit_bias{};
  // vLLM's min_tokens: eos and stop_token_ids cannot be sampled before this
  // many ids were generated. The engine turns it into `suppressed`.
  int min_tokens = 0;
  // vLLM's bad_words as token-id sequences (the server tokenizes each word
  // with and without a leading space): the last id of a sequence is banned
  // wherever the ids generated so far end with the ones before it.
  std::vector<std::vector<int32_t>> bad_words{};
  // Ids whose logits are -inf for now (the engine's; empty when none).
  std::vector<int32_t> suppressed{};

  // Throws Error naming the bad field (negative or non-finite temperature,
  // top_p outside (0, 1], top_k < 0, min_p outside [0, 1], penalties out of
  // their ranges, logprobs < -1, an empty bad word or a negative id).
  void validate() const;
  // Every sampler (host, CUDA single stream and batch) branches on this.
  bool greedy() const { return temperature < kSamplingEps; }
  bool has_penalties() const {
    return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f;
  }
  bool has_logit_edits() const {
    return !logit_bias.empty() || !suppressed.empty() || !bad_words.empty();
  }
  // Sampling must run on the host (sample_with_logprobs over the logits row)
  // instead of the backend's own sampler. Logit edits take this path on
  // every backend, so the CPU and CUDA backends apply them by the same code.
  bool needs_host() const { return logprobs >= 0 || has_penalties() || has_logit_edits(); }
};

// One (id, log-probability) pair.
struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;
};

// What the host sampler reports with a chosen id.
struct SampleResult {
  int32_t id = 0;
  float logprob = 0.0f;           // of id under the raw distribution (when logprobs >= 0)
  std::vector<TokenLogprob> top;  // the min(logprobs, vocab) most likely ids, descending
  int rank = 0;  // 1 + the ids ranked before id (logprobs_of only; vLLM's prompt_logprobs)
};

// The log-probabilities of `logits` (log_softmax in double, as
// sample_with_logprobs reports them) for `id` and the `top` most likely ids,
// and id's rank: what a prompt position reports for the prompt's next token.
SampleResult logprobs_of(std::span<const float> logits, int32_t id, int top);

// Prompt logprobs from a chunk of prompt logits rows [rows, vocab] at
// positions [pos, pos + rows) (EngineEvent::prompt_logits): out[p] =
// logprobs_of(row of p, prompt[p + 1], top) for each p with p + 1 inside the
// prompt; out is grown to prompt.size() - 1 entries.
void prompt_logprobs(std::span<const float> rows, size_t vocab, int pos,
                     std::span<const int32_t> prompt, int top, std::vector<SampleResult>& out);

// Picks the next token from `logits` (vocab values). `step` indexes the
// random stream so that each generated position draws a fresh number.
int32_t sample_token(std::span<const float> logits, const SamplingParams& p, uint64_t step);

// sample_token over the ids `mask` allows (bit id % 32 of word id / 32; the
// others' logits are -inf): the same pick, and -1 when the mask allows none.
// The draw walks only the allowed ids, so its fallback is one of them.
int32_t sample_token_masked(std::span<const float> logits, std::span<const uint32_t> mask,
                            const SamplingParams& p, uint64_t step);

// Applies the penalties of `p` to `logits` in place. `prompt` and `generated`
// are the request's ids so far (each in [0, logits.size())). `seen` is
// scratch: any size on entry, logits.size() zeros on return.
void apply_penalties(std::span<float> logits, const SamplingParams& p,
                     std::span<const int32_t> prompt, std::span<const int32_t> generated,
                     std::vector<uint8_t>& seen);

// Adds p.logit_bias, masks p.suppressed and the bad words that `generated`
// (the ids generated so far) completes but for their last id, in `logits`
// (ids must be in range).
void apply_logit_edits(std::span<float> logits, const SamplingParams& p,
                       std::span<const int32_t> generated);

// The host path for requests that need it (p.needs_host()): logit edits and penalties, then
// sample_token's filters and draw (same random stream, so without penalties
// it picks what sample_token picks), plus the log-probabilities of the raw
// `logits`. `work` is scratch for the penalised copy.
SampleResult sample_with_logprobs(std::span<const float> logits, const SamplingParams& p,
                                  uint64_t step, std::span<const int32_t> prompt,
                                  std::span<const int32_t> generated, std::vector<float>& work,
                                  std::vector<uint8_t>& seen);

}  // namespace hayate
