#include "cuda/device_info.h"

#include <cuda_runtime.h>

#include <cctype>
#include <chrono>
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

// The host clock from a point where the stream is idle: with steps launched
// ahead of their results, an event recorded at stop_ms() would also count a
// step already queued behind the region's last one.
class StreamTimer final : public RegionTimer {
 public:
  explicit StreamTimer(cudaStream_t s) : s_(s) {}
  void start() override {
    HAYATE_CUDA_CHECK(cudaStreamSynchronize(s_));
    t0_ = std::chrono::steady_clock::now();
  }
  double stop_ms() override {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_)
        .count();
  }

 private:
  cudaStream_t s_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace

std::unique_ptr<RegionTimer> make_stream_timer(cudaStream_t s) {
  return std::make_unique<StreamTimer>(s);
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
