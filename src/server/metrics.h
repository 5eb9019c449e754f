// /metrics in Prometheus text format (version 0.0.4). Gauges and token
// counters come from the engine's stats at scrape time; latency histograms
// are observed by the server as events arrive. Every series carries vLLM's
// model_name label. Each metric is exported under hayate: and, where vLLM
// has the same metric, also under its vllm: name, always (no flag), so
// dashboards built for vLLM work unchanged.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace hayate::server {

// Cumulative buckets as Prometheus wants them: bucket i counts values <= bounds[i].
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // `labels`: label pairs without braces (model_name="m"), put before le.
  void render(std::string& out, const std::string& name, const std::string& help,
              const std::string& labels) const;
  uint64_t count() const;

 private:
  mutable std::mutex mutex_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last one is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  Histogram ttft;         // seconds from arrival to the first generated token
  Histogram itl;          // seconds between consecutive generated tokens
  Histogram e2e;          // seconds from arrival to the final event
  // Final events by finish reason: stop, length, abort.
  std::array<std::atomic<uint64_t>, 3> finished{};
  std::atomic<uint64_t> rejected_queue_full{0};  // 503 for a full queue
  std::atomic<uint64_t> client_disconnects{0};   // streams aborted by the client going away

  // The whole exposition. `in_flight` counts requests the server holds.
  std::string render(const EngineStats& s, int in_flight, int max_model_len,
                     const std::string& model_name) const;
};

}  // namespace hayate::server
