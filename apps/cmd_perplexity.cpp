// hayate perplexity: mean negative log-likelihood of a text file, BOS added as
// HF's tokenizer does. A text longer than the context is scored in windows of
// --context tokens starting every context/2 tokens (HF's strided recipe, see
// engine/perplexity.h): every token after BOS is scored once.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/common.h"
#include "core/check.h"
#include "core/mapped_file.h"
#include "engine/perplexity.h"

namespace hayate {

namespace {

constexpr int kPerplexitySequences = 2;
constexpr int kLogitRows = 64;

struct PerplexityArgs {
  ModelArgs model;
  std::string file;
  int context = 0;
  bool json = false;
};

void run(const PerplexityArgs& a) {
  HAYATE_CHECK(a.context == 0 || a.context >= 2, "--context must be >= 2, got ", a.context);
  const std::string text = read_text_file(a.file);
  // Windows run as a batch, two at a time, in chunks of up to kLogitRows
  // tokens (a step keeps the logits of each).
  Loaded L = load(a.model, kPerplexitySequences, kLogitRows);
  const std::vector<int32_t> ids = L.tokenizer->encode(text, true);
  HAYATE_CHECK(ids.size() >= 2, a.file, ": the text has ", ids.size(),
               " tokens with BOS; perplexity needs at least 2");
  HAYATE_CHECK(a.context <= L.backend().max_model_len(), "--context ", a.context,
               " exceeds the backend's context of ", L.backend().max_model_len(),
               " tokens (raise --max-context)");
  PerplexityResult r = perplexity(L.engine(), ids, a.context);
  if (a.json) {
    nlohmann::json j = {{"tokens", ids.size()},   {"scored", r.count},   {"nll_mean", r.nll_mean},
                        {"perplexity", r.ppl},     {"context", r.context}, {"stride", r.stride},
                        {"windows", r.windows}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("tokens: %zu (BOS included; %lld scored)\n", ids.size(), (long long)r.count);
  std::printf("windows: %d of up to %d tokens, stride %d\n", r.windows, r.context, r.stride);
  std::printf("mean NLL: %.6f\n", r.nll_mean);
  std::printf("perplexity: %.6f\n", r.ppl);
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto a = std::make_shared<PerplexityArgs>();
  auto* cmd = app.add_subcommand("perplexity", "perplexity of a text file (BOS added as HF does)");
  add_model_options(cmd, a->model);
  cmd->add_option("--file,-f", a->file, "UTF-8 text file")->required();
  cmd->add_option("--context,-c", a->context,
                  "window length in tokens (default: the backend's context); longer texts are "
                  "scored in windows starting every context/2 tokens");
  cmd->add_flag("--json", a->json, "print one JSON line instead of text");
  cmd->callback([a] { run(*a); });
}

}  // namespace hayate
