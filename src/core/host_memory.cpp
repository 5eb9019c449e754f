#include "core/host_memory.h"

#include <charconv>
#include <iomanip>
#include <sstream>

#include "core/check.h"
#include "core/mapped_file.h"

namespace hayate {
namespace {

// The kB value of the line "<key>: <n> kB", or -1 when absent or malformed.
int64_t meminfo_kb(std::string_view text, std::string_view key) {
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ':')
      continue;
    std::string_view v = line.substr(key.size() + 1);
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    int64_t kb = -1;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), kb);
    if (ec != std::errc() || kb < 0 || std::string_view(p, v.data() + v.size()) != " kB") return -1;
    return kb;
  }
  return -1;
}

std::string gb(uint64_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << double(bytes) / 1e9 << " GB";
  return s.str();
}

}  // namespace

uint64_t parse_meminfo_available(std::string_view meminfo) {
  const int64_t avail = meminfo_kb(meminfo, "MemAvailable"), swap = meminfo_kb(meminfo, "SwapFree");
  if (avail < 0 || swap < 0) return 0;
  return (uint64_t(avail) + uint64_t(swap)) * 1024;
}

uint64_t host_memory_available() {
  try {
    return parse_meminfo_available(read_text_file("/proc/meminfo"));
  } catch (const Error&) {
    return 0;  // no /proc: unknown
  }
}

void check_host_memory(uint64_t need, uint64_t available, std::string_view what) {
  HAYATE_CHECK(available == 0 || need <= available, what, " needs ", gb(need),
               " of host memory; this machine has ", gb(available),
               " available (MemAvailable + SwapFree)");
}

}  // namespace hayate
