// What the engine needs from a model backend (cpu or cuda). One sequence,
// one KV cache: forward(tokens, pos) writes KV entries for positions
// [pos, pos + n) and reads [0, pos + n); calling it with a smaller pos
// rewinds the sequence, so one backend serves request after request.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/dtype.h"
#include "engine/sampling.h"
#include "model/config.h"

namespace hayate {

struct Model;

struct BackendOptions {
  int max_context = 0;           // KV capacity in tokens; 0 = min(config max, 8192)
  DType dtype = DType::F16;      // compute/weight dtype on the GPU (cpu is always fp32)
  int device = 0;
};

// Times a region of work on the backend's device: CUDA events on the
// backend's stream for cuda, the steady clock for cpu.
class RegionTimer {
 public:
  virtual ~RegionTimer() = default;
  virtual void start() = 0;
  virtual double stop_ms() = 0;  // waits for the device, returns milliseconds since start()
};

struct DeviceInfo {
  std::string name = "cpu";
  std::string driver_version;   // e.g. "580.95.05"
  std::string cuda_runtime;     // e.g. "13.0"
  int sm_count = 0;
  double memory_gb = 0.0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual const ModelConfig& config() const = 0;
  virtual int max_context() const = 0;

  // Runs `tokens` at positions [pos, pos + n). Writes logits (fp32) to
  // `logits`: n rows of vocab_size when all_logits, else the last row only.
  virtual void forward(std::span<const int32_t> tokens, int pos, std::span<float> logits,
                       bool all_logits) = 0;

  // forward() then picks the next token; `step` seeds the draw. The default
  // samples on the host; the CUDA backend samples on the device and returns
  // only the id.
  virtual int32_t forward_sample(std::span<const int32_t> tokens, int pos,
                                 const SamplingParams& params, uint64_t step);

  virtual std::unique_ptr<RegionTimer> make_timer();  // default: steady clock
  virtual DeviceInfo device_info() const { return {}; }
  // Measured device read bandwidth in GB/s (a large on-device copy), 0 on cpu.
  virtual double measure_read_bandwidth_gbs() { return 0.0; }
  // Bytes of weights one decode step reads (every weight once, lm_head included).
  virtual double weight_bytes_per_token() const = 0;
};

// Makes the backend called `name` ("cpu" or "cuda"); throws Error when it is
// unknown or not built (cuda without nvcc), or when no GPU is present.
std::unique_ptr<Backend> make_backend(const std::string& name, const Model& model,
                                      const BackendOptions& options);

// True when this build has the CUDA backend and a GPU is visible.
bool cuda_available();

}  // namespace hayate
