#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "engine/backend.h"

namespace hayate {

// Rows of logits are produced this many tokens at a time (chunked prefill
// through the KV cache), so memory stays kChunk x vocab whatever the context.
constexpr int kChunk = 32;

PerplexityResult perplexity(Backend& backend, std::span<const int32_t> ids, int context) {
  const int64_t n = int64_t(ids.size());
  HAYATE_CHECK(n >= 2, "perplexity needs at least 2 tokens, got ", n);
  if (context == 0) context = backend.max_context();
  HAYATE_CHECK(context >= 2 && context <= backend.max_context(), "--context ", context,
               " must be in [2, ", backend.max_context(), "] (the backend's context)");
  PerplexityResult r;
  r.context = int(std::min<int64_t>(context, n));
  r.stride = n <= context ? int(n) : std::max(context / 2, 1);

  const size_t V = size_t(backend.config().vocab_size);
  std::vector<float> logits(size_t(kChunk) * V);
  double total = 0.0;
  int64_t prev_end = 0;
  for (int64_t begin = 0; begin < n; begin += r.stride) {
    const int64_t end = std::min(begin + context, n);
    // Row j of the window (global index begin + j) predicts token begin + j + 1.
    const int64_t first_scored = std::max(prev_end, begin + 1);
    for (int64_t c0 = begin; c0 < end; c0 += kChunk) {
      const int64_t c1 = std::min(c0 + kChunk, end);
      std::span<const int32_t> chunk = ids.subspan(size_t(c0), size_t(c1 - c0));
      std::span<float> out(logits.data(), size_t(c1 - c0) * V);
      backend.forward(chunk, int(c0 - begin), out, /*all_logits=*/true);
      for (int64_t k = std::max(first_scored, c0 + 1); k <= std::min(c1, end - 1); ++k) {
        const float* row = out.data() + size_t(k - 1 - c0) * V;
        const int32_t target = ids[size_t(k)];
        HAYATE_CHECK(target >= 0 && size_t(target) < V, "token id ", target,
                     " is outside the vocabulary");
        // log-softmax in double: -log p = logsumexp(row) - row[target].
        double mx = row[0];
        for (size_t v = 1; v < V; ++v) mx = std::max(mx, double(row[v]));
        double s = 0.0;
        for (size_t v = 0; v < V; ++v) s += std::exp(double(row[v]) - mx);
        total += mx + std::log(s) - double(row[target]);
        ++r.count;
      }
    }
    ++r.windows;
    prev_end = end;
    if (end == n) break;
  }
  r.nll_mean = total / double(r.count);
  r.ppl = std::exp(r.nll_mean);
  return r;
}

}  // namespace hayate
