#include "server/log.h"

#include <unistd.h>

#include <ctime>

#include "core/check.h"

namespace hayate::server {

namespace {

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::kTrace: return "TRACE";
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarning: return "WARNING";
    case LogLevel::kError: return "ERROR";
    default: return "CRITICAL";
  }
}

// "INFO 12-01 23:10:04 " (local time, as vLLM's formatter).
std::string prefix(LogLevel l) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%m-%d %H:%M:%S", &tm);
  return cat(level_name(l), " ", buf, " ");
}

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Text for a log line: control characters escaped, so a prompt cannot forge lines.
std::string escaped(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c == '"' || c == '\\') (out += '\\') += char(c);
    else if (c < 0x20 || c == 0x7f) out += cat("\\x", "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]);
    else out += char(c);
  }
  return out;
}

}  // namespace

LogLevel parse_log_level(const std::string& name) {
  const std::pair<const char*, LogLevel> levels[] = {
      {"trace", LogLevel::kTrace},     {"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo},
      {"warning", LogLevel::kWarning}, {"error", LogLevel::kError}, {"critical", LogLevel::kCritical}};
  for (const auto& [n, l] : levels)
    if (name == n) return l;
  fail(cat("--log-level: unknown level '", name,
           "' (expected trace, debug, info, warning, error or critical)"));
}

void Log::line(LogLevel l, std::string_view text) {
  if (!enabled(l)) return;
  std::string out = prefix(l);
  out.append(text);
  out += '\n';
  std::lock_guard lock(m_);
  std::fwrite(out.data(), 1, out.size(), out_);
  std::fflush(out_);
}

std::string format_access(const AccessRecord& r) {
  std::string out = cat(r.remote.empty() ? "-" : r.remote, " \"", escaped(r.method), " ",
                        escaped(r.path), " ", escaped(r.version), "\" ", r.status);
  if (r.prompt_tokens >= 0) out += cat(" prompt_tokens=", r.prompt_tokens);
  if (r.completion_tokens >= 0) out += cat(" completion_tokens=", r.completion_tokens);
  if (r.ttft_s >= 0.0) out += cat(" ttft_ms=", fixed(r.ttft_s * 1e3, 1));
  out += cat(" duration_ms=", fixed(r.duration_s * 1e3, 1));
  if (!r.request_id.empty()) out += cat(" request_id=", escaped(r.request_id));
  if (!r.prompt.empty()) out += cat(" prompt=\"", escaped(r.prompt), "\"");
  return out;
}

std::string format_stats(const StatsLine& s) {
  return cat("Avg prompt throughput: ", fixed(s.prompt_tps, 1),
             " tokens/s, Avg generation throughput: ", fixed(s.generation_tps, 1),
             " tokens/s, Running: ", s.running, " reqs, Waiting: ", s.waiting,
             " reqs, KV cache usage: ", fixed(s.kv_usage * 100.0, 1), "%");
}

LoadProgress::LoadProgress(bool enabled, std::FILE* out)
    : enabled_(enabled), tty_(isatty(fileno(out)) == 1), out_(out) {}

void LoadProgress::update(uint64_t done, uint64_t total) {
  if (!enabled_ || finished_ || total == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (done_ == 0 && total_ == 0) start_ = last_ = now;
  done_ = done;
  total_ = total;
  end_ = now;
  const double s = std::chrono::duration<double>(now - start_).count();
  const double gb = double(done) / 1e9, all = double(total) / 1e9;
  const std::string rate = s > 0.0 ? fixed(gb / s, 2) : "-";
  if (tty_) {
    const int width = 30;
    const int fill = int(double(width) * double(done) / double(total));
    std::string bar(size_t(fill), '#');
    bar.resize(size_t(width), '.');
    std::fprintf(out_, "\rloading weights [%s] %5.1f%% %.2f/%.2f GB %s GB/s", bar.c_str(),
                 100.0 * double(done) / double(total), gb, all, rate.c_str());
    std::fflush(out_);
  } else if (std::chrono::duration<double>(now - last_).count() >= 2.0) {
    last_ = now;
    std::fprintf(out_, "%sloading weights: %.2f of %.2f GB (%.0f%%), %s GB/s\n",
                 prefix(LogLevel::kInfo).c_str(), gb, all, 100.0 * double(done) / double(total),
                 rate.c_str());
    std::fflush(out_);
  }
}

void LoadProgress::finish() {
  if (!enabled_ || finished_ || total_ == 0) return;
  finished_ = true;
  const double s = std::chrono::duration<double>(end_ - start_).count();
  const double gb = double(done_) / 1e9;
  std::fprintf(out_, "%s%sloaded weights: %.2f GB in %.2f s (%s GB/s)\n", tty_ ? "\n" : "",
               prefix(LogLevel::kInfo).c_str(), gb, s, s > 0.0 ? fixed(gb / s, 2).c_str() : "-");
  std::fflush(out_);
}

}  // namespace hayate::server
