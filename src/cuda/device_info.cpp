#include "cuda/device_info.h"

#include <cuda_runtime.h>

#include <cctype>
#include <cstdio>
#include <functional>
#include <fstream>
#include <string>

#include "core/check.h"
#include "cuda/buffer.h"
#include "cuda/launch.h"
#include "cuda/ops.h"
#include "cuda/stream_timing.h"

namespace hayate::cuda {
namespace {

// The kernel module's version from /proc (e.g. "580.95.05"); where that file
// is missing (containers), the driver API version instead.
std::string nvidia_driver_version() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string word, prev;
  while (f >> word) {
    if (prev == "Module" && !word.empty() && std::isdigit(static_cast<unsigned char>(word[0])))
      return word;
    if (word == "Module") prev = word;
  }
  int v = 0;
  cudaDriverGetVersion(&v);
  return cat("cuda driver api ", v / 1000, ".", (v % 1000) / 10);
}

}  // namespace

DeviceInfo device_info(int device) {
  cudaDeviceProp prop{};
  HAYATE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceInfo d;
  d.name = prop.name;
  d.driver_version = nvidia_driver_version();
  int rt = 0;
  HAYATE_CUDA_CHECK(cudaRuntimeGetVersion(&rt));
  d.cuda_runtime = cat(rt / 1000, ".", (rt % 1000) / 10);
  d.sm_count = prop.multiProcessorCount;
  d.memory_gb = double(prop.totalGlobalMem) / 1e9;
  return d;
}

namespace {

class EventTimer final : public RegionTimer {
 public:
  explicit EventTimer(cudaStream_t s) : s_(s) {
    HAYATE_CUDA_CHECK(cudaEventCreate(&a_));
    HAYATE_CUDA_CHECK(cudaEventCreate(&b_));
  }
  ~EventTimer() override {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  void start() override { HAYATE_CUDA_CHECK(cudaEventRecord(a_, s_)); }
  double stop_ms() override {
    HAYATE_CUDA_CHECK(cudaEventRecord(b_, s_));
    HAYATE_CUDA_CHECK(cudaEventSynchronize(b_));
    float ms = 0;
    HAYATE_CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
    return ms;
  }

 private:
  cudaStream_t s_;
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

}  // namespace

std::unique_ptr<RegionTimer> make_event_timer(cudaStream_t s) {
  return std::make_unique<EventTimer>(s);
}

double measure_read_bandwidth_gbs(cudaStream_t s) {
  const size_t bytes = size_t(4) << 30;
  DeviceBuffer buf(bytes), dst(bytes / 2), sink(64);
  HAYATE_CUDA_CHECK(cudaMemsetAsync(buf.as(), 1, bytes, s));
  auto median_ms = [&](const std::function<void()>& body) {
    return double(median_ms_on_stream(s, 2, 10, body));
  };
  const double read_ms = median_ms([&] { read_probe(buf.as(), bytes, sink.as<float>(), s); });
  const double copy_ms = median_ms([&] {
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(dst.as(), buf.as(), bytes / 2, cudaMemcpyDeviceToDevice, s));
  });
  const double read_gbs = double(bytes) / read_ms / 1e6;
  std::fprintf(stderr,
               "hayate: read bandwidth %.0f GB/s (read-only kernel, 4 GiB); device copy %.0f GB/s "
               "read+written (%.0f GB/s read)\n",
               read_gbs, double(bytes) / copy_ms / 1e6, double(bytes) / 2 / copy_ms / 1e6);
  return read_gbs;
}

}  // namespace hayate::cuda
