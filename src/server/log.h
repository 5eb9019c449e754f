// What `hayate serve` prints while it runs, in the shape vLLM users read:
// one access-log line per request, engine stats every 10 s while busy, and
// load progress (a bar redrawn in place on a terminal, plain lines otherwise).
// Every line goes to one stream (stdout) under one lock, prefixed with its
// level and the time, as vLLM's logger does ("INFO 12-01 23:10:04 ...").
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

namespace hayate::server {

// uvicorn's levels (vLLM's --uvicorn-log-level); access and stats lines are info.
enum class LogLevel { kTrace, kDebug, kInfo, kWarning, kError, kCritical };

// trace|debug|info|warning|error|critical; throws Error naming the choices.
LogLevel parse_log_level(const std::string& name);

struct LogOptions {
  LogLevel level = LogLevel::kInfo;
  bool log_requests = false;  // also log each request's prompt (vLLM's --enable-log-requests)
  bool stats = true;          // periodic engine stats (off: vLLM's --disable-log-stats)
  double stats_interval_s = 10.0;
  std::FILE* out = stdout;    // where the lines go
};

class Log {
 public:
  explicit Log(LogLevel level, std::FILE* out = stdout) : level_(level), out_(out) {}
  bool enabled(LogLevel l) const { return l >= level_; }
  // Writes "LEVEL MM-DD HH:MM:SS text\n" when `l` is enabled.
  void line(LogLevel l, std::string_view text);

 private:
  LogLevel level_;
  std::FILE* out_;
  std::mutex m_;
};

// One request as the access log reports it.
struct AccessRecord {
  std::string remote;       // ip:port
  std::string method, path, version;
  int status = 0;
  std::string request_id;   // X-Request-Id (echoed or made)
  int prompt_tokens = -1;   // -1: not a generation request
  int completion_tokens = -1;
  double ttft_s = -1.0;     // -1: no token was generated
  double duration_s = 0.0;
  std::string prompt;       // with --log-requests only (truncated)
};
std::string format_access(const AccessRecord& r);

// Engine figures over one stats interval, as vLLM's periodic line.
struct StatsLine {
  double prompt_tps = 0.0, generation_tps = 0.0;
  int running = 0, waiting = 0;
  double kv_usage = 0.0;  // 0..1
};
std::string format_stats(const StatsLine& s);

// Weights loading: a bar redrawn with '\r' on a terminal, else a plain line
// at most every 2 s and at the end; bytes, GB/s and elapsed time.
class LoadProgress {
 public:
  LoadProgress(bool enabled, std::FILE* out = stdout);
  void update(uint64_t done, uint64_t total);
  void finish();  // the closing line (bytes, seconds to the last update, GB/s), once

 private:
  bool enabled_, tty_, finished_ = false;
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_, last_, end_;  // end_: the latest update
  uint64_t done_ = 0, total_ = 0;
};

}  // namespace hayate::server
