// `hayate bench`: the article's experiment on one backend (see src/bench).
#include <chrono>
#include <iostream>

#include "apps/common.h"
#include "bench/build_info.h"
#include "bench/result.h"
#include "bench/runner.h"
#include "bench/table.h"
#include "bench/workload.h"
#include "core/check.h"

namespace hayate {

namespace {

struct BenchArgs {
  ModelArgs model;
  std::string prompts = "same";
  int runs = 0;
  int max_length = 128;
  int max_new_tokens = 0;
  bool chat = false;
  bool respect_eos = false;
  int warmup = 0;
  int summary_from = 3;
  std::string json;
  std::string commit;
  std::string print_config;
  bool no_ids = false;
};

void run_bench_command(const BenchArgs& a) {
  if (!a.print_config.empty()) {
    std::string name = a.print_config;
    if (name.rfind("dummy:", 0) == 0) name = name.substr(6);
    std::cout << dummy_config_json(name) << "\n";
    return;
  }
  // Process age at each point: from /proc when available, else from here.
  const auto cmd_start = std::chrono::steady_clock::now();
  const bool have_proc = bench::seconds_since_process_start().has_value();
  auto since_start = [&]() -> double {
    if (auto s = bench::seconds_since_process_start()) return *s;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - cmd_start).count();
  };

  // Arguments first, so a typo fails before 16 GB of weights are made.
  bench::Workload w = bench::make_workload(a.prompts, a.runs);
  bench::BenchOptions opt;
  opt.max_length = a.max_length;
  opt.max_new_tokens = a.max_new_tokens;
  opt.chat = a.chat;
  opt.respect_eos = a.respect_eos;
  opt.warmup = a.warmup;
  opt.summary_from_run = a.summary_from;
  opt.record_ids = !a.no_ids;
  HAYATE_CHECK(a.max_new_tokens > 0 || a.max_length > 1, "--max-length must be > 1");

  // The tokenizer first, and the prompts against max_length with it: bad
  // lengths and unknown dummy names fail before any weight is made.
  auto tt = std::chrono::steady_clock::now();
  std::unique_ptr<Tokenizer> tok = load_tokenizer_only(a.model);
  double tokenizer_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - tt).count();
  for (const auto& p : w.prompts)
    (void)bench::new_tokens_for(opt, int(bench::prompt_ids(*tok, p, opt.chat).size()));

  // Then the model and backend, as load() does, reusing this tokenizer.
  const std::string backend_name = resolve_backend(a.model);
  const std::string spec = resolve_model(a.model, backend_name);
  std::cerr << "hayate bench: loading " << spec << " on " << backend_name << "\n" << std::flush;
  auto t0 = std::chrono::steady_clock::now();
  Model model = load_model(spec, a.model.seed, assets_dir());
  BackendOptions bopt;
  bopt.max_context = a.model.max_context;
  bopt.dtype = parse_dtype(a.model.dtype);
  std::unique_ptr<Backend> backend_ptr = make_backend(backend_name, model, bopt);
  double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Backend& backend = *backend_ptr;

  double bw = backend.measure_read_bandwidth_gbs();
  std::cerr << "hayate bench: loaded in " << load_s << " s";
  if (bw > 0.0) std::cerr << "; measured read bandwidth " << bw << " GB/s";
  std::cerr << "\n" << std::flush;

  bench::BenchResult r =
      bench::run_bench(backend, *tok, w, opt, since_start, &std::cerr);
  DeviceInfo di = backend.device_info();
  r.engine = "hayate";
  r.engine_version = bench::hayate_version();
  r.backend = backend.name();
  r.commit = a.commit.empty() ? bench::build_commit() : a.commit;
  r.created_utc = bench::utc_now_iso8601();
  r.system.device = di.name;
  r.system.driver = di.driver_version;
  r.system.cuda = di.cuda_runtime;
  r.system.sm_count = di.sm_count;
  r.system.memory_gb = di.memory_gb;
  r.system.host = bench::host_name();
  r.model.spec = spec;
  r.model.dtype = backend.name() == "cpu" ? "float32" : std::string(dtype_name(bopt.dtype));
  r.model.seed = a.model.seed;
  r.model.weight_bytes_per_token = backend.weight_bytes_per_token();
  r.startup.tokenizer_s = tokenizer_s;
  r.startup.load_s = load_s;
  if (bw > 0.0) r.startup.read_bandwidth_gbs = bw;
  if (!have_proc) r.notes.push_back("process start unknown (/proc): times since the command began");
  r.summary = bench::summarize(r);

  bench::print_bench(std::cout, r);
  std::cout << std::flush;
  if (!a.json.empty()) {
    bench::write_result_file(r, a.json);
    std::cerr << "hayate bench: wrote " << a.json << "\n";
  }
  int failed = int(r.runs.size()) - r.summary.runs_ok;
  HAYATE_CHECK(failed == 0, failed, " of ", r.runs.size(), " runs failed (see the table)");
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand(
      "bench",
      "the article's experiment: one request at a time, greedy, EOS ignored; per-run table, "
      "mean of runs 3..N, decode ms/token, GB/s of weight streaming");
  add_model_options(cmd, a->model);
  cmd->add_option("--prompts", a->prompts,
                  "same (the article's prompt x runs), varied (its eleven different prompts) "
                  "or a file: one prompt per line, or a JSON array")
      ->capture_default_str();
  cmd->add_option("--runs", a->runs, "timed requests (default 10 for same, one per prompt else)");
  cmd->add_option("--max-length", a->max_length,
                  "prompt + new tokens, HF semantics (the article: 128)")
      ->capture_default_str();
  cmd->add_option("--max-new-tokens", a->max_new_tokens, "new tokens per request (overrides "
                  "--max-length)");
  cmd->add_flag("--chat,!--no-chat", a->chat,
                "wrap each prompt in the chat template (default off: the article tokenized the "
                "plain prompt, 11 tokens with BOS)");
  cmd->add_flag("--respect-eos", a->respect_eos, "stop at EOS (default: ignore it)");
  cmd->add_option("--warmup", a->warmup, "untimed requests before run 1")->capture_default_str();
  cmd->add_option("--summary-from", a->summary_from, "first run of the summary mean")
      ->capture_default_str();
  cmd->add_option("--json", a->json, "write the full result (docs/bench_schema.md) to FILE");
  cmd->add_option("--commit", a->commit, "record this commit instead of the built-in one");
  cmd->add_flag("--no-ids", a->no_ids, "leave generated ids out of the JSON");
  cmd->add_option("--print-config", a->print_config,
                  "print a dummy architecture's config.json (e.g. llama-3.1-8b) and exit");
  cmd->callback([a] { run_bench_command(*a); });
}

}  // namespace hayate
