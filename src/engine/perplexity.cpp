#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/check.h"
#include "engine/engine.h"

namespace hayate {

PerplexityResult perplexity(Engine& engine, std::span<const int32_t> ids, int context) {
  const int64_t n = int64_t(ids.size());
  const int max_len = engine.backend().max_model_len();
  HAYATE_CHECK(n >= 2, "perplexity needs at least 2 tokens, got ", n);
  if (context == 0) context = max_len;
  HAYATE_CHECK(context >= 2 && context <= max_len, "--context ", context, " must be in [2, ",
               max_len, "] (the backend's context)");
  PerplexityResult r;
  r.context = int(std::min<int64_t>(context, n));
  r.stride = n <= context ? int(n) : std::max(context / 2, 1);

  const size_t V = size_t(engine.backend().config().vocab_size);
  double total = 0.0;
  std::string error;
  int64_t prev_end = 0;
  for (int64_t begin = 0; begin < n; begin += r.stride) {
    const int64_t end = std::min(begin + context, n);
    // Window row j (global index begin + j) predicts token begin + j + 1;
    // rows before first_scored belong to an earlier window.
    const int64_t first_scored = std::max(prev_end, begin + 1);
    EngineRequest q;
    q.prompt.assign(ids.begin() + begin, ids.begin() + end);
    q.max_tokens = 0;
    q.prompt_logits = true;
    q.on_event = [&, begin, end, first_scored](const EngineEvent& e) {
      if (e.finished && !e.error.empty()) error = e.error;
      const int64_t rows = int64_t(e.prompt_logits.size() / V);
      for (int64_t j = 0; j < rows; ++j) {
        const int64_t k = begin + e.prompt_logits_pos + j + 1;  // the token row j predicts
        if (k < first_scored || k >= end) continue;
        const float* row = e.prompt_logits.data() + size_t(j) * V;
        const int32_t target = ids[size_t(k)];  // in the vocabulary: submit() checked
        // log-softmax in double: -log p = logsumexp(row) - row[target].
        double mx = row[0];
        for (size_t v = 1; v < V; ++v) mx = std::max(mx, double(row[v]));
        double s = 0.0;
        for (size_t v = 0; v < V; ++v) s += std::exp(double(row[v]) - mx);
        total += mx + std::log(s) - double(row[target]);
        ++r.count;
      }
    };
    engine.submit(std::move(q));
    ++r.windows;
    prev_end = end;
    if (end == n) break;
  }
  engine.run_until_idle();
  HAYATE_CHECK(error.empty(), error);
  HAYATE_CHECK(r.count == n - 1, "perplexity: scored ", r.count, " of ", n - 1, " tokens");
  r.nll_mean = total / double(r.count);
  r.ppl = std::exp(r.nll_mean);
  return r;
}

}  // namespace hayate
