// `hayate report` over load results: `bench --mode throughput` (offline,
// hayate-bench-throughput) and `bench --mode serve` (a client against an
// OpenAI endpoint, hayate-bench-serve). One row per result: workload, req/s,
// output and total tok/s, TTFT and TPOT (median and p99, ms).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hayate::bench {

// The schema name of a result file's JSON ("" when it has none).
std::string schema_of(const nlohmann::json& j);
// True for the two load schemas this table reads.
bool is_load_result(const nlohmann::json& j);

// Throws Error naming `sources[i]` when a result lacks a field the table needs.
std::string load_comparison(const std::vector<nlohmann::json>& results,
                            const std::vector<std::string>& sources, bool markdown);

}  // namespace hayate::bench
