#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/result.h"
#include "bench/table.h"
#include "core/check.h"

namespace hayate::bench {
namespace {

using nlohmann::json;

// A result of `engine` in `trial` whose runs take `secs` each.
BenchResult make(const std::string& engine, const std::string& trial, std::vector<double> secs) {
  BenchResult r;
  r.engine = engine;
  r.backend = engine == "hayate" ? "cuda" : "torch";
  r.commit = engine == "hayate" ? "c0ffee" : "";
  r.system.device = "NVIDIA H200";
  r.system.cuda = "13.0";
  if (engine != "hayate") {
    r.system.torch = "2.11.0";
    r.system.transformers = "5.17.0";
  }
  r.model.spec = "dummy:llama-3.1-8b";
  r.model.dtype = "float16";
  r.workload.trial = trial;
  r.workload.runs = int(secs.size());
  for (size_t i = 0; i < secs.size(); ++i) {
    RunRecord run;
    run.run = int(i) + 1;
    run.prompt_tokens = 11;
    run.new_tokens = 117;
    run.seconds = secs[i];
    r.runs.push_back(run);
  }
  r.summary = summarize(r);
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

const std::string* line_with(const std::vector<std::string>& lines, const std::string& a,
                             const std::string& b) {
  for (const auto& l : lines)
    if (l.find(a) != std::string::npos && l.find(b) != std::string::npos) return &l;
  return nullptr;
}

TEST(Table, TextAlignsColumnsAndMarkdownHasSeparator) {
  Table t;
  t.add_column("name", Table::Align::kLeft);
  t.add_column("s");
  t.add_row({"犬", "1.5"});
  t.add_row({"longer", "10.25"});
  auto lines = lines_of(t.text());
  ASSERT_EQ(lines.size(), 3u);
  // "犬" is two columns wide: every line has the same display width.
  EXPECT_EQ(lines[1], "犬        1.5");
  EXPECT_EQ(lines[2], "longer  10.25");
  auto md = lines_of(t.markdown());
  ASSERT_EQ(md.size(), 4u);
  EXPECT_EQ(md[0], "| name | s |");
  EXPECT_EQ(md[1], "|---|---:|");
  EXPECT_EQ(md[2], "| 犬 | 1.5 |");
  EXPECT_THROW(t.add_row({"only one"}), Error);
}

TEST(Table, Fmt) {
  EXPECT_EQ(fmt(std::nullopt, 3), "-");
  EXPECT_EQ(fmt(0.5, 3), "0.500");
}

TEST(Report, SpeedUpsOverEagerAndCompilePerTrial) {
  std::vector<BenchResult> rs = {
      make("hayate", "same", {5.0, 0.6, 0.5, 0.5}),
      make("hf-eager", "same", {4.0, 3.2, 3.0, 3.0}),
      make("hf-compile", "same", {155.0, 60.0, 0.85, 0.85}),
      make("hf-eager", "varied", {4.0, 3.6, 3.6}),
      make("hayate", "varied", {0.5, 0.45, 0.45}),
  };
  auto lines = lines_of(comparison(rs, /*markdown=*/false));
  const std::string* hayate_same = line_with(lines, "same", "hayate");
  ASSERT_NE(hayate_same, nullptr);
  EXPECT_NE(hayate_same->find("0.500"), std::string::npos);  // mean of runs 3..4
  EXPECT_NE(hayate_same->find("6.00x"), std::string::npos);  // 3.0 / 0.5
  EXPECT_NE(hayate_same->find("1.70x"), std::string::npos);  // 0.85 / 0.5
  const std::string* eager_same = line_with(lines, "same", "hf-eager");
  ASSERT_NE(eager_same, nullptr);
  EXPECT_NE(eager_same->find("1.00x"), std::string::npos);
  // Speed-ups never cross trials: varied has no compile row, so "-" there.
  const std::string* hayate_varied = line_with(lines, "varied", "hayate");
  ASSERT_NE(hayate_varied, nullptr);
  EXPECT_NE(hayate_varied->find("8.00x"), std::string::npos);  // 3.6 / 0.45
  EXPECT_NE(hayate_varied->find(" -"), std::string::npos);
  EXPECT_NE(line_with(lines, "GPU: NVIDIA H200", ""), nullptr);
  EXPECT_NE(line_with(lines, "torch: 2.11.0", ""), nullptr);
  EXPECT_NE(line_with(lines, "hayate commit: c0ffee", ""), nullptr);
}

// fp16 and fp8 rows of one trial side by side: the FP8 row is labelled.
TEST(Report, Fp8RowsAreLabelled) {
  BenchResult fp16 = make("hayate", "same", {0.5, 0.5, 0.46, 0.46});
  BenchResult fp8 = make("hayate", "same", {0.3, 0.3, 0.25, 0.25});
  fp8.model.quantization = "fp8";
  fp8.model.kv_cache_dtype = "fp8";
  auto lines = lines_of(comparison({fp16, fp8}, /*markdown=*/false));
  const std::string* row8 = line_with(lines, "hayate fp8 kv8", "0.250");
  ASSERT_NE(row8, nullptr);
  const std::string* row16 = line_with(lines, "hayate ", "0.460");
  ASSERT_NE(row16, nullptr);
  EXPECT_EQ(row16->find("fp8"), std::string::npos);
  // Results from before FP8 read as "none" / "auto".
  json j = to_json(fp16);
  j["model"].erase("quantization");
  j["model"].erase("kv_cache_dtype");
  const BenchResult old = result_from_json(j, "old");
  EXPECT_EQ(old.model.quantization, "none");
  EXPECT_EQ(old.model.kv_cache_dtype, "auto");
  EXPECT_EQ(result_from_json(to_json(fp8), "fp8").model.quantization, "fp8");
}

TEST(Report, MarkdownTable) {
  std::vector<BenchResult> rs = {make("hf-eager", "same", {3, 3, 3}),
                                 make("hayate", "same", {1, 1, 0.5})};
  auto lines = lines_of(comparison(rs, /*markdown=*/true));
  const std::string* hayate = line_with(lines, "| same | hayate |", "");
  ASSERT_NE(hayate, nullptr);
  EXPECT_NE(hayate->find("| 6.00x |"), std::string::npos);
  EXPECT_NE(line_with(lines, "|---|---|", ""), nullptr);
  EXPECT_NE(line_with(lines, "- GPU: NVIDIA H200", ""), nullptr);
}

TEST(Report, PartialRunsAreShown) {
  BenchResult r = make("hf-compile", "varied", {78.0, 19.0, 17.0, 13.0});
  r.workload.runs = 11;  // the rest were skipped for time
  r.runs[3].error = "timeout";
  r.summary = summarize(r);
  auto lines = lines_of(comparison({r}, false));
  const std::string* row = line_with(lines, "varied", "hf-compile");
  ASSERT_NE(row, nullptr);
  EXPECT_NE(row->find("3/11"), std::string::npos);
}

TEST(Report, PrintBenchShowsTheFloorNextToTheFigure) {
  BenchResult r = make("hayate", "same", {0.6, 0.5, 0.5, 0.5});
  for (auto& run : r.runs) {
    run.prefill_ms = 9.0;
    run.decode_ms_per_token = 4.2;
  }
  r.model.weight_bytes_per_token = 16.06e9;
  r.startup.read_bandwidth_gbs = 4080.0;
  r.summary = summarize(r);
  std::ostringstream out;
  print_bench(out, r);
  auto lines = lines_of(out.str());
  EXPECT_NE(line_with(lines, "mean of runs 3..4", "0.500 s per request"), nullptr);
  EXPECT_NE(line_with(lines, "decode: 4.200 ms/token", "floor 3.936 ms/token"), nullptr);
  EXPECT_NE(line_with(lines, "16.06 GB per token", "% of the measured read bandwidth 4080.0"),
            nullptr);
}

}  // namespace
}  // namespace hayate::bench
