// What the bench records about the binary and the process.
#pragma once

#include <optional>
#include <string>

namespace hayate::bench {

// The git commit this binary was built from (embedded at build time; ends in
// "-dirty" when tracked files differed from HEAD; "unknown" without git).
std::string build_commit();
std::string hayate_version();  // the project version, e.g. "0.1"
std::string host_name();

// Seconds since this process started, from /proc/self/stat (Linux; about
// 10 ms resolution), so "start to first token" includes dynamic loading and
// everything before main. nullopt where /proc is unavailable.
std::optional<double> seconds_since_process_start();

}  // namespace hayate::bench
