#include "bench/build_info.h"

#include <time.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "bench/build_commit.h"

namespace hayate::bench {

std::string build_commit() { return HAYATE_BUILD_COMMIT; }

std::string hayate_version() { return HAYATE_VERSION; }

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

std::optional<double> seconds_since_process_start() {
  std::ifstream in("/proc/self/stat");
  if (!in) return std::nullopt;
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Field 2 (comm) may hold spaces and parentheses: fields resume after the
  // last ')'. starttime is field 22, the 20th after comm, in clock ticks
  // since boot.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  unsigned long long start_ticks = 0;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return std::nullopt;
    if (i == 22) start_ticks = std::stoull(field);
  }
  long ticks_per_s = sysconf(_SC_CLK_TCK);
  timespec now{};
  if (ticks_per_s <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) != 0) return std::nullopt;
  double since_boot = double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
  double age = since_boot - double(start_ticks) / double(ticks_per_s);
  if (age < 0.0) return std::nullopt;
  return age;
}

}  // namespace hayate::bench
