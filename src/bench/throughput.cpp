// Offline throughput: submit requests (all at once, or keeping `concurrency`
// in flight by submitting the next one from each final event), step the
// engine on this thread until every request is done, and time each request
// on the host clock (the engine's step returns after the sampled ids reach
// the host, so a token's timestamp is when the host has it).
#include "bench/throughput.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/stats.h"
#include "bench/workload.h"
#include "core/check.h"
#include "core/rng.h"
#include "engine/batch_backend.h"
#include "engine/engine.h"
#include "grammar/json_schema.h"
#include "grammar/token_tables.h"
#include "tokenizer/tokenizer.h"

namespace hayate::bench {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::vector<ThroughputPreset>& throughput_presets() {
  static const std::vector<ThroughputPreset> presets = [] {
    std::vector<ThroughputPreset> p;
    for (int len : {128, 1024})
      for (int batch : {1, 16, 32, 64})
        p.push_back({cat("llmib-", len, "-b", batch), 4 * batch, len, len, batch});
    p.push_back({"max-load-128", 1024, 128, 128, 0, 1024, 16384});
    p.push_back({"shared-prefix-2000", 512, 100, 128, 0, 0, 0, 2000, 1});
    p.push_back({"chat-5-turn", 64, 100, 128, 0, 0, 0, 0, 5});
    return p;
  }();
  return presets;
}

void apply_throughput_preset(const std::string& name, ThroughputOptions& opt,
                             bool keep_engine_knobs) {
  std::string known;
  for (const ThroughputPreset& p : throughput_presets()) {
    if (p.name == name) {
      opt.preset = p.name;
      opt.num_prompts = p.num_prompts;
      opt.input_len = p.input_len;
      opt.output_len = p.output_len;
      opt.concurrency = p.concurrency;
      opt.prefix_len = p.prefix_len;
      opt.turns = p.turns;
      if (!keep_engine_knobs && p.max_num_seqs > 0) opt.max_num_seqs = p.max_num_seqs;
      if (!keep_engine_knobs && p.max_num_batched_tokens > 0)
        opt.max_num_batched_tokens = p.max_num_batched_tokens;
      return;
    }
    known += cat(known.empty() ? "" : ", ", p.name);
  }
  fail(cat("unknown throughput preset '", name, "' (known: ", known, ")"));
}

namespace {

// Random ids, a pure function of (seed, prompt, position) as core/rng.h.
std::vector<int32_t> random_ids(uint64_t seed, uint64_t prompt, int len, uint64_t vocab) {
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (int j = 0; j < len; ++j)
    p[size_t(j)] = int32_t(mix64(seed ^ mix64(prompt ^ mix64(uint64_t(j)))) % vocab);
  return p;
}

// The prompts of requests (chats: each chat's first turn; later turns add
// turn_ids(chat, turn) to the conversation).
std::vector<std::vector<int32_t>> make_prompts(const BatchBackend& backend,
                                               const Tokenizer* tokenizer,
                                               const ThroughputOptions& opt) {
  std::vector<std::vector<int32_t>> prompts;
  if (!opt.dataset.empty()) {
    HAYATE_CHECK(tokenizer != nullptr, "--dataset needs a tokenizer");
    Workload w = make_workload(opt.dataset, 0);
    const int n = opt.num_prompts > 0 ? opt.num_prompts : int(w.prompts.size());
    for (int i = 0; i < n; ++i) prompts.push_back(tokenizer->encode(w.prompt_for_run(i)));
    return prompts;
  }
  const uint64_t vocab = uint64_t(backend.config().vocab_size);
  // The shared prefix has a stream of its own (prompt index ~0).
  const std::vector<int32_t> prefix = random_ids(opt.seed, ~uint64_t(0), opt.prefix_len, vocab);
  for (int i = 0; i < opt.num_prompts; ++i) {
    std::vector<int32_t> p = prefix;
    const std::vector<int32_t> own =
        random_ids(opt.seed, uint64_t(i) * uint64_t(opt.turns), opt.input_len, vocab);
    p.insert(p.end(), own.begin(), own.end());
    prompts.push_back(std::move(p));
  }
  return prompts;
}

Percentiles percentiles(const std::vector<double>& v) {
  Percentiles p;
  p.mean = mean(v);
  p.p50 = percentile(v, 50);
  p.p90 = percentile(v, 90);
  p.p99 = percentile(v, 99);
  p.max = max_of(v);
  return p;
}

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

ThroughputResult run_throughput(BatchBackend& backend, const Tokenizer* tokenizer,
                                const ThroughputOptions& opt, std::ostream* progress) {
  HAYATE_CHECK(opt.num_prompts >= 1 || !opt.dataset.empty(), "--num-prompts must be >= 1, got ",
               opt.num_prompts);
  HAYATE_CHECK(opt.input_len >= 1 || !opt.dataset.empty(), "--input-len must be >= 1, got ",
               opt.input_len);
  HAYATE_CHECK(opt.output_len >= 1, "--output-len must be >= 1, got ", opt.output_len);
  HAYATE_CHECK(opt.concurrency >= 0, "--concurrency must be >= 0, got ", opt.concurrency);
  HAYATE_CHECK(opt.warmup >= 0, "--warmup must be >= 0, got ", opt.warmup);
  HAYATE_CHECK(opt.prefix_len >= 0, "--prefix-len must be >= 0, got ", opt.prefix_len);
  HAYATE_CHECK(opt.turns >= 1, "--turns must be >= 1, got ", opt.turns);
  HAYATE_CHECK(opt.dataset.empty() || (opt.turns == 1 && opt.prefix_len == 0),
               "--turns and --prefix-len work on random prompts only, not --dataset");

  ThroughputResult r;
  r.backend = backend.name();
  r.created_utc = utc_now_iso8601();
  r.options = opt;
  const std::vector<std::vector<int32_t>> prompts = make_prompts(backend, tokenizer, opt);
  const int n = int(prompts.size());  // requests, or chats of opt.turns requests
  const int turns = opt.turns;
  const int total = n * turns;
  const uint64_t vocab = uint64_t(backend.config().vocab_size);
  // Ids only: detokenization is not part of this measurement, so the figure
  // is the engine's (the server's streaming adds the tokenizer's cost).
  EngineOptions eo;
  eo.max_num_seqs = opt.max_num_seqs;
  eo.max_num_batched_tokens = opt.max_num_batched_tokens;
  eo.enable_prefix_caching = opt.enable_prefix_caching;
  Engine engine(backend, nullptr, eo);

  std::shared_ptr<const grammar::TokenTables> grammar;
  if (!opt.json_schema.empty()) {
    HAYATE_CHECK(tokenizer != nullptr, "--json-schema needs the model's tokenizer");
    HAYATE_CHECK(!backend.config().eos_ids.empty(), "--json-schema needs a model with an EOS id");
    const auto t0 = Clock::now();
    grammar = std::make_shared<const grammar::TokenTables>(
        std::make_shared<const grammar::Grammar>(grammar::compile_json_schema(std::string_view(opt.json_schema))),
        std::make_shared<const grammar::TokenVocab>(
            grammar::TokenVocab::from_tokenizer(*tokenizer, backend.config().eos_ids)));
    if (progress)
      *progress << "throughput: JSON Schema compiled in " << seconds(Clock::now() - t0) * 1e3
                << " ms (vocabulary and tables)\n";
  }
  auto make_request = [&](std::vector<int32_t> prompt) {
    EngineRequest req;
    req.prompt = std::move(prompt);
    req.max_tokens = opt.output_len;
    req.ignore_eos = true;  // under a grammar the request ends where the grammar does
    req.grammar = grammar;
    return req;
  };
  if (opt.warmup > 0) {
    // Prompts of their own (another seed, no shared prefix): the timed
    // requests find nothing of theirs in the prefix cache.
    const int len = int(prompts[0].size());
    for (int i = 0; i < opt.warmup; ++i)
      engine.submit(make_request(opt.dataset.empty()
                                     ? random_ids(opt.seed ^ 0x5741524d55505eedull, uint64_t(i),
                                                  len, vocab)
                                     : prompts[size_t(i % n)]));
    engine.run_until_idle();
    if (progress) *progress << "throughput: " << opt.warmup << " warm-up requests done\n";
  }
  const EngineStats before = engine.stats();

  r.requests.resize(size_t(total));
  std::vector<Clock::time_point> submitted(static_cast<size_t>(total));
  std::vector<std::vector<int32_t>> sent(static_cast<size_t>(total)), answer(sent.size());
  int next = 0, done = 0;
  // Submits request k (chat k / turns, turn k % turns); false when rejected
  // (recorded; the chat's later turns are not sent).
  std::function<void()> submit_next;
  std::function<bool(int)> submit = [&](int k) {
    const int chat = k / turns, turn = k % turns;
    ThroughputRequest& out = r.requests[size_t(k)];
    out.index = k;
    out.turn = turn;
    std::vector<int32_t> prompt = prompts[size_t(chat)];
    if (turn > 0) {  // the conversation so far, then this turn's own ids
      prompt = sent[size_t(k - 1)];
      prompt.insert(prompt.end(), answer[size_t(k - 1)].begin(), answer[size_t(k - 1)].end());
      const std::vector<int32_t> own = random_ids(opt.seed, uint64_t(k), opt.input_len, vocab);
      prompt.insert(prompt.end(), own.begin(), own.end());
    }
    out.prompt_tokens = int(prompt.size());
    sent[size_t(k)] = prompt;
    EngineRequest req = make_request(std::move(prompt));
    req.on_event = [&, k](const EngineEvent& e) {
      ThroughputRequest& q = r.requests[size_t(k)];
      const double t = seconds(Clock::now() - submitted[size_t(k)]);
      if (!q.ttft_s && !e.token_ids.empty()) q.ttft_s = t;
      if (turns > 1)
        answer[size_t(k)].insert(answer[size_t(k)].end(), e.token_ids.begin(), e.token_ids.end());
      if (!e.finished) return;
      q.latency_s = t;
      q.output_tokens = e.completion_tokens;
      q.finish = std::string(finish_reason_name(e.finish));
      q.error = e.error;
      if (q.ttft_s && q.output_tokens > 1)
        q.tpot_ms = (t - *q.ttft_s) * 1e3 / double(q.output_tokens - 1);
      ++done;
      if (progress && (done % std::max(1, total / 10) == 0 || done == total))
        *progress << "throughput: " << done << "/" << total << " requests done\n";
      // The chat's next turn, else the next request or chat.
      if (k % turns + 1 < turns && q.error.empty() && submit(k + 1)) return;
      submit_next();
    };
    submitted[size_t(k)] = Clock::now();
    try {
      engine.submit(std::move(req));
      return true;
    } catch (const Error& e) {
      out.error = e.what();
      out.finish = "abort";
      ++done;
      return false;
    }
  };
  // Starts the next request (or chat); a rejected one is recorded and skipped.
  submit_next = [&] {
    while (next < n)
      if (submit(turns * next++)) return;
  };

  const Clock::time_point t0 = Clock::now();
  const int initial = opt.concurrency > 0 ? std::min(opt.concurrency, n) : n;
  for (int i = 0; i < initial; ++i) submit_next();
  engine.run_until_idle();
  ThroughputSummary& s = r.summary;
  s.total_s = seconds(Clock::now() - t0);

  std::vector<double> lat, ttft, tpot;
  std::vector<std::vector<double>> ttft_turn(static_cast<size_t>(turns));
  for (const ThroughputRequest& q : r.requests) {
    if (q.finish.empty()) {  // a chat's turn never sent: an earlier one failed
      ++s.requests_failed;
      continue;
    }
    if (!q.error.empty() || q.finish == "abort") {
      ++s.requests_failed;
      continue;
    }
    if (q.ttft_s) ttft_turn[size_t(q.turn)].push_back(*q.ttft_s);
    ++s.requests_ok;
    s.input_tokens += q.prompt_tokens;
    s.output_tokens += q.output_tokens;
    lat.push_back(q.latency_s);
    if (q.ttft_s) ttft.push_back(*q.ttft_s);
    if (q.tpot_ms) tpot.push_back(*q.tpot_ms);
  }
  if (s.total_s > 0.0) {
    s.requests_per_s = s.requests_ok / s.total_s;
    s.input_tokens_per_s = double(s.input_tokens) / s.total_s;
    s.output_tokens_per_s = double(s.output_tokens) / s.total_s;
    s.total_tokens_per_s = double(s.input_tokens + s.output_tokens) / s.total_s;
  }
  if (!lat.empty()) s.latency_s = percentiles(lat);
  if (!ttft.empty()) s.ttft_s = percentiles(ttft);
  if (!tpot.empty()) s.tpot_ms = percentiles(tpot);
  const EngineStats after = engine.stats();
  s.engine_steps = after.steps - before.steps;
  s.preemptions = after.preemptions_total - before.preemptions_total;
  s.prefix_cache_queries = after.prefix_cache_queries_total - before.prefix_cache_queries_total;
  s.prefix_cache_hits = after.prefix_cache_hits_total - before.prefix_cache_hits_total;
  if (s.prefix_cache_queries > 0)
    s.prefix_cache_hit_rate = double(s.prefix_cache_hits) / double(s.prefix_cache_queries);
  if (turns > 1)
    for (const auto& v : ttft_turn)
      s.ttft_by_turn_s.push_back(v.empty() ? Percentiles{} : percentiles(v));
  s.kv_blocks = backend.num_blocks();
  s.kv_block_size = backend.block_size();
  if (s.requests_failed > 0) r.notes.push_back(cat(s.requests_failed, " requests failed"));
  r.notes.push_back("ids only: prompts are token ids and outputs are not detokenized");
  return r;
}

namespace {

json opt_json(const std::optional<Percentiles>& p) {
  if (!p) return nullptr;
  return json{
      {"mean", p->mean}, {"p50", p->p50}, {"p90", p->p90}, {"p99", p->p99}, {"max", p->max}};
}

}  // namespace

json to_json(const ThroughputResult& r) {
  const ThroughputOptions& o = r.options;
  const ThroughputSummary& s = r.summary;
  json ttft_turns = json::array();
  for (const Percentiles& p : s.ttft_by_turn_s) ttft_turns.push_back(opt_json(p));
  json requests = json::array();
  for (const ThroughputRequest& q : r.requests) {
    requests.push_back({{"index", q.index},
                        {"turn", q.turn},
                        {"prompt_tokens", q.prompt_tokens},
                        {"output_tokens", q.output_tokens},
                        {"latency_s", q.error.empty() ? json(q.latency_s) : json(nullptr)},
                        {"ttft_s", q.ttft_s ? json(*q.ttft_s) : json(nullptr)},
                        {"tpot_ms", q.tpot_ms ? json(*q.tpot_ms) : json(nullptr)},
                        {"finish", null_if_empty(q.finish)},
                        {"error", null_if_empty(q.error)}});
  }
  return json{
      {"schema", kThroughputSchemaName},
      {"schema_version", r.schema_version},
      {"mode", "throughput"},
      {"engine", r.engine},
      {"engine_version", null_if_empty(r.engine_version)},
      {"backend", null_if_empty(r.backend)},
      {"commit", null_if_empty(r.commit)},
      {"created_utc", null_if_empty(r.created_utc)},
      {"system", system_json(r.system)},
      {"model", model_json(r.model)},
      {"workload",
       {{"preset", null_if_empty(o.preset)},
        {"num_prompts", int(r.requests.size())},
        {"input_len", o.dataset.empty() ? json(o.input_len) : json(nullptr)},
        {"output_len", o.output_len},
        {"concurrency", o.concurrency},
        {"dataset", null_if_empty(o.dataset)},
        {"seed", o.seed},
        {"ignore_eos", true},
        {"warmup", o.warmup},
        {"max_num_seqs", o.max_num_seqs},
        {"max_num_batched_tokens", o.max_num_batched_tokens},
        {"prefix_len", o.prefix_len},
        {"turns", o.turns},
        {"enable_prefix_caching", o.enable_prefix_caching},
        {"json_schema", o.json_schema.empty() ? json(nullptr) : json::parse(o.json_schema)},
        {"timer", "steady-clock"},
        {"timed_region", "first submit to last final event, engine stepped on the host thread"}}},
      {"requests", std::move(requests)},
      {"summary",
       {{"requests_ok", s.requests_ok},
        {"requests_failed", s.requests_failed},
        {"total_s", s.total_s},
        {"requests_per_s", s.requests_per_s},
        {"input_tokens", s.input_tokens},
        {"output_tokens", s.output_tokens},
        {"input_tokens_per_s", s.input_tokens_per_s},
        {"output_tokens_per_s", s.output_tokens_per_s},
        {"total_tokens_per_s", s.total_tokens_per_s},
        {"latency_s", opt_json(s.latency_s)},
        {"ttft_s", opt_json(s.ttft_s)},
        {"tpot_ms", opt_json(s.tpot_ms)},
        {"engine_steps", s.engine_steps},
        {"preemptions", s.preemptions},
        {"kv_blocks", s.kv_blocks},
        {"kv_block_size", s.kv_block_size},
        {"prefix_cache_queries", s.prefix_cache_queries},
        {"prefix_cache_hits", s.prefix_cache_hits},
        {"prefix_cache_hit_rate", s.prefix_cache_hit_rate},
        {"ttft_by_turn_s", ttft_turns}}},
      {"notes", r.notes},
  };
}

std::string format_throughput(const ThroughputResult& r) {
  const ThroughputSummary& s = r.summary;
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(2);
  out << "requests        " << s.requests_ok << " ok, " << s.requests_failed << " failed in "
      << s.total_s << " s (" << s.requests_per_s << " req/s)\n";
  out << "tokens/s        in " << s.input_tokens_per_s << ", out " << s.output_tokens_per_s
      << ", total " << s.total_tokens_per_s << "\n";
  auto line = [&](const char* name, const std::optional<Percentiles>& p, const char* unit) {
    if (!p) return;
    out << name << "mean " << p->mean << ", p50 " << p->p50 << ", p90 " << p->p90 << ", p99 "
        << p->p99 << " " << unit << "\n";
  };
  line("latency         ", s.latency_s, "s");
  line("ttft            ", s.ttft_s, "s");
  line("tpot            ", s.tpot_ms, "ms");
  for (size_t t = 0; t < s.ttft_by_turn_s.size(); ++t)
    line(cat("ttft turn ", t + 1, "     ").c_str(), s.ttft_by_turn_s[t], "s");
  out << "prefix cache    " << (r.options.enable_prefix_caching ? "on" : "off") << ", hit rate "
      << 100.0 * s.prefix_cache_hit_rate << " % (" << s.prefix_cache_hits << " of "
      << s.prefix_cache_queries << " prompt tokens)\n";
  out << "engine          " << s.engine_steps << " steps, " << s.preemptions << " preemptions, "
      << s.kv_blocks << " KV blocks of " << s.kv_block_size << "\n";
  return out.str();
}

}  // namespace hayate::bench
