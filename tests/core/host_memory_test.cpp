#include "core/host_memory.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/check.h"

namespace hayate {
namespace {

constexpr const char* kMeminfo =
    "MemTotal:       24608132 kB\n"
    "MemFree:        19876544 kB\n"
    "MemAvailable:   20123456 kB\n"
    "Buffers:          123456 kB\n"
    "SwapTotal:       2097148 kB\n"
    "SwapFree:        1048576 kB\n"
    "HugePages_Total:       0\n";

TEST(HostMemory, MeminfoAvailableIsMemAvailablePlusSwapFree) {
  EXPECT_EQ(parse_meminfo_available(kMeminfo), (20123456ull + 1048576ull) * 1024);
  EXPECT_EQ(parse_meminfo_available("SwapFree: 0 kB\nMemAvailable: 1 kB\n"), 1024u);
}

TEST(HostMemory, MeminfoWithoutEitherLineOrMalformedIsUnknown) {
  EXPECT_EQ(parse_meminfo_available(""), 0u);
  EXPECT_EQ(parse_meminfo_available("MemAvailable:   20123456 kB\n"), 0u);  // no SwapFree
  EXPECT_EQ(parse_meminfo_available("SwapFree: 1 kB\n"), 0u);
  EXPECT_EQ(parse_meminfo_available("MemAvailable: lots kB\nSwapFree: 1 kB\n"), 0u);
  EXPECT_EQ(parse_meminfo_available("MemAvailable: 5 MB\nSwapFree: 1 kB\n"), 0u);
  // A key that only starts like ours is another key.
  EXPECT_EQ(parse_meminfo_available("MemAvailableX: 5 kB\nSwapFree: 1 kB\n"), 0u);
}

TEST(HostMemory, ThisMachinesMeminfoReads) {
  // Linux always has both lines; a machine whose /proc is hidden reads as unknown (0).
  const uint64_t a = host_memory_available();
  if (std::ifstream("/proc/meminfo")) {
    EXPECT_GT(a, 0u);
  }
}

TEST(HostMemory, CheckRefusesOnlyWhatCannotFit) {
  EXPECT_NO_THROW(check_host_memory(10, 10, "x"));
  EXPECT_NO_THROW(check_host_memory(uint64_t(1) << 50, 0, "x"));  // unknown: not refused
  try {
    check_host_memory(282'300'000'000ull, 19'300'000'000ull, "the cpu backend (dummy:big)");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "the cpu backend (dummy:big) needs 282.3 GB of host memory; this machine has "
                 "19.3 GB available (MemAvailable + SwapFree)");
  }
}

}  // namespace
}  // namespace hayate
