#include "cuda/device_info.h"

#include <cuda_runtime.h>

#include <cctype>
#include <fstream>
#include <string>

#include "core/check.h"
#include "cuda/launch.h"

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

}  // namespace hayate::cuda
