#include "bench/table.h"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <set>
#include <sstream>

#include "core/check.h"

namespace hayate::bench {

// Display width of UTF-8 text: counts code points, two for CJK and
// full-width ones, so Japanese prompts and paths line up in a terminal.
static size_t display_width(const std::string& s) {
  size_t w = 0;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    uint32_t cp = c;
    size_t len = 1;
    if (c >= 0xf0) { len = 4; cp = c & 0x07u; }
    else if (c >= 0xe0) { len = 3; cp = c & 0x0fu; }
    else if (c >= 0xc0) { len = 2; cp = c & 0x1fu; }
    for (size_t k = 1; k < len && i + k < s.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3fu);
    bool wide = (cp >= 0x1100 && cp <= 0x115f) || (cp >= 0x2e80 && cp <= 0xa4cf) ||
                (cp >= 0xac00 && cp <= 0xd7a3) || (cp >= 0xf900 && cp <= 0xfaff) ||
                (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff60) ||
                (cp >= 0xffe0 && cp <= 0xffe6) || (cp >= 0x20000 && cp <= 0x3fffd);
    w += wide ? 2 : 1;
    i += len;
  }
  return w;
}

void Table::add_column(std::string header, Align align) {
  HAYATE_CHECK(rows_.empty(), "Table: add every column before the first row");
  headers_.push_back(std::move(header));
  aligns_.push_back(align);
}

void Table::add_row(std::vector<std::string> cells) {
  HAYATE_CHECK(cells.size() == headers_.size(), "Table: row has ", cells.size(), " cells, expected ",
               headers_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::text() const {
  std::vector<size_t> width(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) {
    width[c] = display_width(headers_[c]);
    for (const auto& row : rows_) width[c] = std::max(width[c], display_width(row[c]));
  }
  std::ostringstream out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c) {
      std::string pad(width[c] - display_width(cells[c]), ' ');
      if (c) out << "  ";
      if (aligns_[c] == Align::kRight) out << pad << cells[c];
      else if (c + 1 < cells.size()) out << cells[c] << pad;
      else out << cells[c];
    }
    out << "\n";
  };
  line(headers_);
  for (const auto& row : rows_) line(row);
  return out.str();
}

std::string Table::markdown() const {
  std::ostringstream out;
  auto line = [&](const std::vector<std::string>& cells) {
    out << "|";
    for (const auto& cell : cells) {
      std::string escaped;
      for (char ch : cell) {
        if (ch == '|') escaped += "\\|";
        else escaped += ch;
      }
      out << " " << escaped << " |";
    }
    out << "\n";
  };
  line(headers_);
  out << "|";
  for (auto a : aligns_) out << (a == Align::kRight ? "---:|" : "---|");
  out << "\n";
  for (const auto& row : rows_) line(row);
  return out.str();
}

std::string fmt(std::optional<double> v, int decimals) {
  if (!v) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, *v);
  return buf;
}

static std::string fmt_ratio(std::optional<double> v) {
  return v ? fmt(v, 2) + "x" : "-";
}

static std::string fmt_gb(double bytes) { return fmt(bytes / 1e9, 2) + " GB"; }

void print_bench(std::ostream& out, const BenchResult& r) {
  const auto& w = r.workload;
  out << "hayate bench: " << r.model.spec << " " << r.model.dtype << " on " << r.backend << " ("
      << r.system.device;
  if (!r.system.driver.empty()) out << ", driver " << r.system.driver;
  if (!r.system.cuda.empty()) out << ", CUDA " << r.system.cuda;
  out << "), trial " << w.trial << ", " << w.runs << " runs";
  if (w.max_length) out << ", max_length " << *w.max_length;
  if (w.max_new_tokens) out << ", max_new_tokens " << *w.max_new_tokens;
  out << (w.chat_template ? ", chat template" : ", plain prompt")
      << (w.ignore_eos ? ", EOS ignored" : ", EOS respected") << "\n";
  out << "timed: " << w.timed_region << " (" << w.timer << ")\n\n";

  Table t;
  t.add_column("run");
  t.add_column("seconds");
  t.add_column("prompt tok");
  t.add_column("new tok");
  t.add_column("tok/s");
  t.add_column("prefill ms");
  t.add_column("decode ms/tok");
  t.add_column("note", Table::Align::kLeft);
  for (const auto& run : r.runs) {
    if (!run.ok()) {
      t.add_row({std::to_string(run.run), "-", std::to_string(run.prompt_tokens), "-", "-", "-", "-",
                 "failed: " + run.error});
      continue;
    }
    t.add_row({std::to_string(run.run), fmt(run.seconds, 3), std::to_string(run.prompt_tokens),
               std::to_string(run.new_tokens), fmt(run.tokens_per_s(), 1), fmt(run.prefill_ms, 2),
               fmt(run.decode_ms_per_token, 3), run.finish == "stop" ? "stopped at EOS" : ""});
  }
  out << t.text() << "\n";

  const Summary& s = r.summary;
  if (s.runs_ok == 0) {
    out << "no run succeeded\n";
    return;
  }
  out << "summary (the article's figure, mean of runs " << w.summary_from_run << ".." << w.runs
      << "): " << (s.mean_s ? fmt(s.mean_s, 3) + " s per request" : "- (too few runs)") << "\n";
  out << "runs: median " << fmt(s.median_s, 3) << " s, min " << fmt(s.min_s, 3) << " s, max "
      << fmt(s.max_s, 3) << " s, first " << fmt(s.first_s, 3) << " s; slowest after run 1: "
      << fmt_ratio(s.max_over_median_after_first) << " the median\n";
  out << "decode: " << fmt(s.decode_ms_per_token, 3) << " ms/token (median)";
  if (s.floor_ms_per_token) out << "; floor " << fmt(s.floor_ms_per_token, 3) << " ms/token";
  out << "\n";
  out << "prefill: " << fmt(s.prefill_ms, 2) << " ms to the first token (median)\n";
  if (r.model.weight_bytes_per_token) {
    out << "weight streaming: " << fmt_gb(*r.model.weight_bytes_per_token) << " per token";
    if (s.achieved_gbs) out << ", achieved " << fmt(s.achieved_gbs, 1) << " GB/s";
    if (r.startup.read_bandwidth_gbs && *r.startup.read_bandwidth_gbs > 0.0) {
      out << " = " << fmt(s.bandwidth_share ? std::optional<double>(*s.bandwidth_share * 100.0)
                                            : std::nullopt,
                          1)
          << "% of the measured read bandwidth " << fmt(r.startup.read_bandwidth_gbs, 1)
          << " GB/s";
    } else {
      out << " (no device bandwidth on this backend)";
    }
    out << "\n";
  }
  if (s.floor_request_s)
    out << "floor per request: " << fmt(s.floor_request_s, 3) << " s (weights / bandwidth x new "
        << "tokens) vs measured " << fmt(s.mean_s ? s.mean_s : s.median_s, 3) << " s\n";
  out << "start to first token: " << fmt(r.startup.first_token_s, 2) << " s since process start"
      << " (tokenizer " << fmt(r.startup.tokenizer_s, 2) << " s, model and backend "
      << fmt(r.startup.load_s, 2) << " s)\n";
  for (const auto& n : r.notes) out << "note: " << n << "\n";
}

// ---- comparison --------------------------------------------------------------

static std::string joined_distinct(const std::vector<BenchResult>& results,
                                   std::string (*get)(const BenchResult&)) {
  std::vector<std::string> seen;
  for (const auto& r : results) {
    std::string v = get(r);
    if (v.empty()) continue;
    if (std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
  }
  std::string out;
  for (const auto& v : seen) {
    if (!out.empty()) out += ", ";
    out += v;
  }
  return out.empty() ? "-" : out;
}

std::vector<std::string> setup_lines(const std::vector<BenchResult>& results) {
  return {
      "GPU: " + joined_distinct(results, [](const BenchResult& r) { return r.system.device; }),
      "driver: " + joined_distinct(results, [](const BenchResult& r) { return r.system.driver; }),
      "CUDA: " + joined_distinct(results, [](const BenchResult& r) { return r.system.cuda; }),
      "torch: " + joined_distinct(results, [](const BenchResult& r) { return r.system.torch; }),
      "transformers: " +
          joined_distinct(results, [](const BenchResult& r) { return r.system.transformers; }),
      "model: " + joined_distinct(results, [](const BenchResult& r) { return r.model.spec; }),
      "dtype: " + joined_distinct(results, [](const BenchResult& r) { return r.model.dtype; }),
      "hayate commit: " + joined_distinct(results, [](const BenchResult& r) {
        return r.engine == "hayate" ? r.commit : std::string();
      }),
  };
}

static const BenchResult* find_engine(const std::vector<const BenchResult*>& trial,
                                      const std::string& engine) {
  for (const auto* r : trial)
    if (r->engine == engine && r->summary.mean_s) return r;
  return nullptr;
}

static std::optional<double> speedup(const BenchResult* base, const BenchResult& r) {
  if (!base || !base->summary.mean_s || !r.summary.mean_s || *r.summary.mean_s <= 0.0)
    return std::nullopt;
  return *base->summary.mean_s / *r.summary.mean_s;
}

std::string comparison(const std::vector<BenchResult>& results, bool markdown) {
  HAYATE_CHECK(!results.empty(), "report: no results");
  std::ostringstream out;
  for (const auto& line : setup_lines(results)) out << (markdown ? "- " : "") << line << "\n";
  out << "\n";

  // Trials in first-seen order; rows keep the order the files were given.
  std::vector<std::string> trials;
  for (const auto& r : results)
    if (std::find(trials.begin(), trials.end(), r.workload.trial) == trials.end())
      trials.push_back(r.workload.trial);

  Table t;
  t.add_column("trial", Table::Align::kLeft);
  t.add_column("engine", Table::Align::kLeft);
  t.add_column("runs");
  t.add_column("mean s (runs 3..N)");
  t.add_column("median s");
  t.add_column("max s");
  t.add_column("first run s");
  t.add_column("vs eager");
  t.add_column("vs compile");
  t.add_column("start to 1st token s");
  for (const auto& trial : trials) {
    std::vector<const BenchResult*> rows;
    for (const auto& r : results)
      if (r.workload.trial == trial) rows.push_back(&r);
    const BenchResult* eager = find_engine(rows, "hf-eager");
    const BenchResult* compiled = find_engine(rows, "hf-compile");
    for (const auto* r : rows) {
      const Summary& s = r->summary;
      std::string runs = std::to_string(s.runs_ok);
      if (s.runs_ok != int(r->runs.size()) || int(r->runs.size()) != r->workload.runs)
        runs.append("/").append(std::to_string(r->workload.runs));
      auto first = r->startup.first_token_s ? r->startup.first_token_s
                                            : r->startup.first_request_done_s;
      t.add_row({trial, engine_label(r->engine, r->model), runs, fmt(s.mean_s, 3), fmt(s.median_s, 3), fmt(s.max_s, 3),
                 fmt(s.first_s, 3), fmt_ratio(speedup(eager, *r)), fmt_ratio(speedup(compiled, *r)),
                 fmt(first, 1)});
    }
  }
  out << (markdown ? t.markdown() : t.text());
  out << "\nmean s: the article's figure, mean of runs 3..N per request. vs eager / vs compile: "
         "mean of hf-eager (hf-compile) over this row's mean, same trial. start to 1st token: "
         "process start to the first token (hayate) or to the end of the first request (HF).\n";
  for (const auto& r : results)
    for (const auto& n : r.notes) out << (markdown ? "- " : "") << r.engine << " " << r.workload.trial
                                      << ": " << n << "\n";
  return out.str();
}

}  // namespace hayate::bench
