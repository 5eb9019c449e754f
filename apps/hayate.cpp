// hayate: a thin main. Each subcommand registers itself from cmd_*.cpp.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "apps/common.h"
#include "core/check.h"

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
  hayate::add_profile_command(app);
  try {
    app.parse(argc, argv);
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
