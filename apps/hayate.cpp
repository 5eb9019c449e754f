// hayate: a thin main. Each subcommand registers itself from cmd_*.cpp.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "apps/common.h"
#include "core/check.h"

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// "unknown option --max-model-lenn (did you mean --max-model-len?)": the
// nearest option of the command that was given, by edit distance.
int unknown_options(const CLI::App& app, const CLI::ExtrasError& e) {
  const CLI::App* cmd = &app;
  for (const CLI::App* sub : app.get_subcommands()) cmd = sub;
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd->get_options()) {
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
    for (const std::string& n : o->get_snames()) names.push_back("-" + n);
  }
  std::string msg = e.what();
  std::istringstream words(msg.substr(msg.find(':') + 1));
  bool any = false;
  for (std::string w; words >> w;) {
    if (w.empty() || w[0] != '-') continue;
    const std::string flag = w.substr(0, w.find('='));
    std::string best;
    size_t best_d = std::max<size_t>(3, flag.size() / 3) + 1;
    for (const std::string& n : names)
      if (size_t d = edit_distance(flag, n); d < best_d) best_d = d, best = n;
    std::fprintf(stderr, "hayate %s: error: unknown option %s%s\n", cmd->get_name().c_str(),
                 flag.c_str(), best.empty() ? "" : (" (did you mean " + best + "?)").c_str());
    any = true;
  }
  if (!any) std::fprintf(stderr, "hayate: error: %s\n", e.what());
  std::fprintf(stderr, "run 'hayate %s --help' for the options\n", cmd->get_name().c_str());
  return 2;
}

// vLLM's two-letter short flag -tp, which CLI11 cannot name (its short names
// are one letter): spelled out before parsing.
std::vector<char*> vllm_short_flags(int argc, char** argv) {
  static char tp[] = "--tensor-parallel-size";
  std::vector<char*> out(argv, argv + argc);
  for (char*& a : out)
    if (std::string_view(a) == "-tp") a = tp;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hayate: fast Llama inference on one GPU, and the benchmark that proves it"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "hayate 0.1");
  hayate::add_generate_command(app);
  hayate::add_perplexity_command(app);
  hayate::add_tokenize_command(app);
  hayate::add_bench_command(app);
  hayate::add_report_command(app);
  hayate::add_serve_command(app);
  hayate::add_chat_command(app);
  hayate::add_profile_command(app);
  try {
    std::vector<char*> args = vllm_short_flags(argc, argv);
    app.parse(int(args.size()), args.data());
  } catch (const CLI::ExtrasError& e) {
    return unknown_options(app, e);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const hayate::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "hayate: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "hayate: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
