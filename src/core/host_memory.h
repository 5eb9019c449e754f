// How much host memory a run may still take, so that a model the machine
// cannot hold is a one-line error before any allocation, not the kernel's
// OOM killer halfway through the load.
#pragma once

#include <cstdint>
#include <string_view>

namespace hayate {

// MemAvailable + SwapFree of `meminfo` (the text of /proc/meminfo), in bytes;
// 0 when either line is missing (unknown: nothing is refused).
uint64_t parse_meminfo_available(std::string_view meminfo);

// parse_meminfo_available of this machine's /proc/meminfo; 0 where it cannot be read.
uint64_t host_memory_available();

// Throws Error "<what> needs N GB of host memory; this machine has M GB available ..." when
// need > available > 0.
void check_host_memory(uint64_t need, uint64_t available, std::string_view what);

}  // namespace hayate
