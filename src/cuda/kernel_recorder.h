// Every kernel the device runs between start() and stop(), with its device
// start and end times, from CUPTI's activity records (graph launches
// included): what `hayate profile` attributes to the ops of a step.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hayate::cuda {

struct KernelRecord {
  std::string name;  // demangled, without the argument list
  uint64_t start_ns = 0, end_ns = 0;
};

class KernelRecorder {
 public:
  // Starts recording; nullptr (and why) when CUPTI is missing from this build
  // or refuses (a driver without activity support, another profiler attached).
  static std::unique_ptr<KernelRecorder> start(std::string* why_not);
  ~KernelRecorder();
  KernelRecorder(const KernelRecorder&) = delete;
  KernelRecorder& operator=(const KernelRecorder&) = delete;
  // Waits for the device's records and stops; records sorted by start.
  std::vector<KernelRecord> stop();

 private:
  KernelRecorder() = default;
  bool stopped_ = false;
};

}  // namespace hayate::cuda
