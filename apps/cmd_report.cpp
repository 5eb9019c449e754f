// `hayate report`: the article's comparison table over bench results (hayate
// and the HF baselines, same JSON schema), the load table over throughput and
// serve results, and optionally their chart (tools/plot_report.py).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "apps/common.h"
#include "bench/load_report.h"
#include "bench/result.h"
#include "bench/table.h"
#include "core/check.h"

namespace hayate {

namespace {

struct ReportArgs {
  std::vector<std::string> files;
  bool markdown = false;
  std::string png;
  std::string plot_script;
  std::string python = "python3";
};

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

// tools/plot_report.py: in hayate's data folder (next to the binary, or
// HAYATE_HOME), else under the working directory.
std::string find_plot_script(const std::string& given) {
  namespace fs = std::filesystem;
  if (!given.empty()) {
    HAYATE_CHECK(fs::is_regular_file(given), "--plot-script: '", given, "' not found");
    return given;
  }
  std::vector<fs::path> candidates;
  try {
    candidates.push_back(fs::path(hayate_home()) / "tools/plot_report.py");
  } catch (const Error&) {
    // no data folder: the working directory may still hold tools/
  }
  candidates.push_back(fs::path("tools/plot_report.py"));
  std::error_code ec;
  for (const auto& c : candidates)
    if (fs::is_regular_file(c, ec)) return c.lexically_normal().string();
  fail("--png: tools/plot_report.py not found (install with cmake --install, run from the "
       "repository root, or pass --plot-script)");
}

bool has_matplotlib(const std::string& python) {
  const std::string probe = shell_quote(python) + " -c 'import matplotlib' >/dev/null 2>&1";
  return std::system(probe.c_str()) == 0;
}

void draw_png(const ReportArgs& given) {
  ReportArgs a = given;
  std::string script = find_plot_script(a.plot_script);
  // scripts/setup.sh installs Debian's python3-matplotlib for /usr/bin/python3;
  // a python3 earlier on PATH (pyenv, a venv) may lack it.
  if (a.python == "python3" && !has_matplotlib(a.python) && has_matplotlib("/usr/bin/python3"))
    a.python = "/usr/bin/python3";
  int rc = std::system(("command -v " + shell_quote(a.python) + " >/dev/null 2>&1").c_str());
  HAYATE_CHECK(rc == 0, "--png: ", a.python, " is not installed here (the chart needs python3 with "
               "matplotlib; the text table above is complete)");
  HAYATE_CHECK(has_matplotlib(a.python), "--png: ", a.python, " has no matplotlib here (the chart "
               "needs it: scripts/setup.sh installs python3-matplotlib; the text table above is "
               "complete)");
  std::string cmd = shell_quote(a.python) + " " + shell_quote(script) + " --out " +
                    shell_quote(a.png);
  for (const auto& f : a.files) cmd += " " + shell_quote(f);
  std::cout << std::flush;
  rc = std::system(cmd.c_str());
  HAYATE_CHECK(rc == 0, "--png: ", script, " failed (exit status ", rc, ")");
  std::cerr << "hayate report: wrote " << a.png << "\n";
}

// The file's JSON when it is a `hayate profile` (schema hayate-profile/1).
std::optional<nlohmann::json> read_profile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;  // read_result_file says why
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_object() && j.value("schema", "") == "hayate-profile/1") return j;
  return std::nullopt;
}

void run_report(const ReportArgs& a) {
  HAYATE_CHECK(!a.files.empty(), "report: give one or more result files from hayate bench --json "
               "or tools/hf_baseline.py");
  // Article results and load results (throughput, serve) make two tables.
  std::vector<bench::BenchResult> results;
  std::vector<nlohmann::json> load;
  std::vector<std::string> load_files;
  for (const auto& f : a.files) {
    if (const std::optional<nlohmann::json> p = read_profile(f)) {  // hayate profile --json
      std::cout << profile_chart(*p);
      continue;
    }
    std::ifstream in(f, std::ios::binary);
    HAYATE_CHECK(in, f, ": cannot read");
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
    HAYATE_CHECK(!j.is_discarded(), f, ": not valid JSON");
    if (bench::is_load_result(j)) {
      load.push_back(std::move(j));
      load_files.push_back(f);
    } else {
      results.push_back(bench::read_result_file(f));
    }
  }
  if (results.empty() && load.empty()) return;
  if (!results.empty()) std::cout << bench::comparison(results, a.markdown);
  if (!results.empty() && !load.empty()) std::cout << "\n";
  if (!load.empty()) std::cout << bench::load_comparison(load, load_files, a.markdown);
  if (!a.png.empty()) draw_png(a);
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand(
      "report", "the article's comparison table over bench results (hayate and HF baselines)");
  cmd->add_option("files", a->files,
                  "result JSON files (hayate bench --json in any --mode, tools/hf_baseline.py)")
      ->required();
  cmd->add_flag("--markdown", a->markdown, "print the table as markdown");
  cmd->add_option("--png", a->png, "also draw per-run times per engine (tools/plot_report.py)");
  cmd->add_option("--plot-script", a->plot_script, "path of tools/plot_report.py");
  cmd->add_option("--python", a->python, "python with matplotlib")->capture_default_str();
  cmd->callback([a] { run_report(*a); });
}

}  // namespace hayate
