// Weight upload: parts of the mapped checkpoint go to the GPU as they are
// when already in T, else through a staging buffer and a conversion kernel;
// dummy weights are generated on the GPU from (seed, stream, index).
#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>

#include "core/check.h"
#include "cuda/launch.h"
#include "cuda/ops.h"
#include "cuda/weights.h"

namespace hayate::cuda {

namespace {

constexpr size_t kAlign = 256;
constexpr size_t kStagingBytes = size_t(64) << 20;

size_t aligned(size_t b) { return (b + kAlign - 1) / kAlign * kAlign; }

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<half>() { return DType::F16; }
template <> constexpr DType dtype_of<__nv_bfloat16>() { return DType::BF16; }

}  // namespace

size_t device_weight_bytes(const Model& m, size_t elem_size) {
  size_t total = 0;
  for (const WeightSource& w : m.weights) total += aligned(size_t(w.numel()) * elem_size);
  return total;
}

// Bytes a weight's load moves from the host: its file data, or for dummy
// weights the device data generated.
static uint64_t source_bytes(const WeightSource& w, size_t elem_size) {
  if (w.is_dummy()) return uint64_t(w.numel()) * elem_size;
  uint64_t b = 0;
  for (std::span<const uint8_t> part : w.parts) b += part.size();
  return b;
}

template <typename T>
DeviceWeights<T> upload_weights(const Model& m, cudaStream_t s,
                                const std::function<void(uint64_t, uint64_t)>& progress) {
  uint64_t total = 0, loaded = 0;
  for (const WeightSource& w : m.weights) total += source_bytes(w, sizeof(T));
  if (progress) progress(0, total);
  DeviceWeights<T> dw;
  dw.storage = DeviceBuffer(device_weight_bytes(m, sizeof(T)));
  std::unordered_map<std::string, const T*> by_name;
  DeviceBuffer staging;
  char* next = dw.storage.template as<char>();
  for (const WeightSource& w : m.weights) {
    T* dst = reinterpret_cast<T*>(next);
    const size_t n = size_t(w.numel());
    next += aligned(n * sizeof(T));
    by_name[w.name] = dst;
    loaded += source_bytes(w, sizeof(T));
    if (w.is_dummy()) {
      fill_dummy(dst, n, m.seed, w.dummy_stream, w.dummy_scale, w.dummy_offset, 0, s);
      if (progress && loaded < total) progress(loaded, total);
      continue;
    }
    const size_t es = dtype_size(w.dtype);
    size_t done = 0;
    for (std::span<const uint8_t> part : w.parts) {
      HAYATE_CHECK(part.size() % es == 0, "weight ", w.name, ": part of ", part.size(), " bytes");
      const size_t count = part.size() / es;
      HAYATE_CHECK(done + count <= n, "weight ", w.name, ": parts exceed its shape");
      if (w.dtype == dtype_of<T>()) {
        HAYATE_CUDA_CHECK(cudaMemcpyAsync(dst + done, part.data(), part.size(), cudaMemcpyHostToDevice, s));
      } else {
        if (!staging.bytes()) staging = DeviceBuffer(kStagingBytes);
        for (size_t off = 0; off < count;) {
          const size_t c = std::min(count - off, kStagingBytes / es);
          HAYATE_CUDA_CHECK(cudaMemcpyAsync(staging.as(), part.data() + off * es, c * es,
                                            cudaMemcpyHostToDevice, s));
          convert(staging.as(), int(w.dtype), c, dst + done + off, s);
          // The staging buffer is reused: wait before the next copy overwrites it.
          HAYATE_CUDA_CHECK(cudaStreamSynchronize(s));
          off += c;
        }
      }
      done += count;
    }
    HAYATE_CHECK(done == n, "weight ", w.name, ": parts hold ", done, " of ", n, " elements");
    if (progress && loaded < total) progress(loaded, total);
  }
  HAYATE_CUDA_CHECK(cudaStreamSynchronize(s));
  if (progress) progress(total, total);  // after the sync: dummy fills run asynchronously

  auto get = [&](const std::string& name) {
    auto it = by_name.find(name);
    HAYATE_CHECK(it != by_name.end(), "weight ", name, " is missing");
    return it->second;
  };
  const ModelConfig& c = m.config;
  dw.embed = get("embed");
  dw.final_norm = get("final_norm");
  dw.lm_head = get(m.lm_head().name);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = cat("layers.", l, ".");
    dw.layers.push_back({get(p + "attn_norm"), get(p + "wqkv"), get(p + "wo"), get(p + "ffn_norm"),
                         get(p + "w_gate_up"), get(p + "w_down")});
  }
  for (const WeightSource& w : m.weights)
    if (w.name != "embed") dw.streamed_bytes += double(w.numel()) * sizeof(T);
  if (dw.lm_head == dw.embed) dw.streamed_bytes += double(m.weight("embed").numel()) * sizeof(T);
  return dw;
}

template DeviceWeights<half> upload_weights<half>(
    const Model&, cudaStream_t, const std::function<void(uint64_t, uint64_t)>&);
template DeviceWeights<__nv_bfloat16> upload_weights<__nv_bfloat16>(
    const Model&, cudaStream_t, const std::function<void(uint64_t, uint64_t)>&);

}  // namespace hayate::cuda
