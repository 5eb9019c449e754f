#include "bench/runner.h"

#include <chrono>
#include <exception>
#include <optional>
#include <ostream>

#include "core/check.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "tokenizer/tokenizer.h"

namespace hayate::bench {

std::vector<int32_t> prompt_ids(const Tokenizer& tok, const std::string& prompt, bool chat) {
  if (!chat) return tok.encode(prompt, /*add_special_tokens=*/true);
  std::string text = tok.apply_chat_template({{"user", prompt}}, /*add_generation_prompt=*/true);
  return tok.encode(text, /*add_special_tokens=*/false);
}

int new_tokens_for(const BenchOptions& opt, int prompt_tokens) {
  if (opt.max_new_tokens > 0) return opt.max_new_tokens;
  int n = opt.max_length - prompt_tokens;
  HAYATE_CHECK(n >= 1, "--max-length ", opt.max_length, " leaves no room for new tokens after a ",
               prompt_tokens, "-token prompt");
  return n;
}

namespace {

struct Prepared {
  std::vector<int32_t> ids;
  double tokenize_ms = 0.0;
  int max_new = 0;
};

// One request: the whole generate() call in one device-timed region, and the
// first sampled id in a second one started at the same point.
RunRecord run_once(Engine& engine, const Prepared& p,
                   const GenerateOptions& gen, bool record_ids,
                   const std::function<void()>& on_first_token) {
  RunRecord rec;
  rec.prompt_tokens = int(p.ids.size());
  rec.tokenize_ms = p.tokenize_ms;
  auto total = engine.backend().make_timer();
  auto first = engine.backend().make_timer();
  std::optional<double> first_ms;
  GenerateCallbacks cb;
  cb.on_token = [&](int index, int32_t) {
    if (index != 0) return;
    first_ms = first->stop_ms();  // the id is on the host already: this adds no device wait
    if (on_first_token) on_first_token();
  };
  total->start();
  first->start();
  GenerateResult g = generate(engine, p.ids, gen, cb);
  double ms = total->stop_ms();
  rec.seconds = ms * 1e-3;
  rec.new_tokens = int(g.ids.size());
  rec.finish = std::string(finish_reason_name(g.finish));
  rec.prefill_ms = first_ms;
  if (first_ms && rec.new_tokens > 1)
    rec.decode_ms_per_token = (ms - *first_ms) / double(rec.new_tokens - 1);
  if (record_ids) rec.output_ids = std::move(g.ids);
  return rec;
}

}  // namespace

BenchResult run_bench(Engine& engine, const Tokenizer& tok, const Workload& w,
                      const BenchOptions& opt, const std::function<double()>& since_start,
                      std::ostream* progress) {
  HAYATE_CHECK(w.runs >= 1, "--runs must be at least 1, got ", w.runs);
  HAYATE_CHECK(opt.warmup >= 0, "--warmup must be >= 0, got ", opt.warmup);
  HAYATE_CHECK(opt.max_new_tokens >= 0, "--max-new-tokens must be >= 0");
  HAYATE_CHECK(opt.summary_from_run >= 1, "the summary's first run must be >= 1");

  // Tokenize every distinct prompt up front: bad input (a prompt too long
  // for max_length or for the KV cache) fails before any run.
  std::vector<Prepared> prepared;
  for (const auto& prompt : w.prompts) {
    Prepared p;
    auto t0 = std::chrono::steady_clock::now();
    p.ids = prompt_ids(tok, prompt, opt.chat);
    p.tokenize_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    HAYATE_CHECK(!p.ids.empty(), "prompt '", prompt, "' has no tokens");
    p.max_new = new_tokens_for(opt, int(p.ids.size()));
    const int context = engine.backend().max_model_len();
    HAYATE_CHECK(int64_t(p.ids.size()) + p.max_new <= context, "prompt of ", p.ids.size(),
                 " tokens + ", p.max_new, " new tokens exceeds the KV cache of ", context,
                 " tokens (raise --max-context)");
    prepared.push_back(std::move(p));
  }

  GenerateOptions gen;
  gen.ignore_eos = !opt.respect_eos;

  BenchResult r;
  r.workload.trial = w.trial;
  r.workload.source = w.source;
  r.workload.prompts = w.prompts;
  r.workload.chat_template = opt.chat;
  if (opt.max_new_tokens > 0) r.workload.max_new_tokens = opt.max_new_tokens;
  else r.workload.max_length = opt.max_length;
  r.workload.ignore_eos = !opt.respect_eos;
  r.workload.warmup = opt.warmup;
  r.workload.runs = w.runs;
  r.workload.summary_from_run = opt.summary_from_run;
  r.workload.timer = engine.backend().name() == "cuda" ? "steady-clock-synced" : "steady-clock";
  r.workload.timed_region =
      "one request through the engine: prompt ids in, every new id sampled and back on the "
      "host (prefill + decode + sampling + detokenization); tokenization excluded";

  for (int i = 0; i < opt.warmup; ++i) {
    const Prepared& p = prepared[size_t(i) % prepared.size()];
    gen.max_new_tokens = p.max_new;
    (void)run_once(engine, p, gen, false, {});
    if (progress) *progress << "warmup " << (i + 1) << "/" << opt.warmup << " done\n" << std::flush;
  }

  for (int i = 0; i < w.runs; ++i) {
    size_t pi = size_t(i) % prepared.size();
    const Prepared& p = prepared[pi];
    gen.max_new_tokens = p.max_new;
    RunRecord rec;
    auto on_first = [&] {
      if (!r.startup.first_token_s && since_start) r.startup.first_token_s = since_start();
    };
    try {
      rec = run_once(engine, p, gen, opt.record_ids, on_first);
    } catch (const std::exception& e) {
      rec = RunRecord{};
      rec.prompt_tokens = int(p.ids.size());
      rec.error = e.what();
    }
    rec.run = i + 1;
    rec.prompt_index = int(pi);
    if (i == 0 && rec.ok() && since_start) r.startup.first_request_done_s = since_start();
    if (progress) {
      *progress << "run " << rec.run << "/" << w.runs << ": ";
      if (rec.ok()) *progress << rec.seconds << " s, " << rec.new_tokens << " new tokens\n";
      else *progress << "failed: " << rec.error << "\n";
      *progress << std::flush;
    }
    r.runs.push_back(std::move(rec));
  }
  return r;
}

}  // namespace hayate::bench
