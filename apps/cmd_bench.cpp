// Placeholder until its issue lands: the command exists and says so.
#include "apps/common.h"
#include "core/check.h"

namespace hayate {

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "not built yet");
  cmd->callback([] { fail("'bench' is not implemented yet"); });
}

}  // namespace hayate
