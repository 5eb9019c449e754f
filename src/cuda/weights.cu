// Weight upload: parts of the mapped checkpoint go to the GPU as they are
// when already in T, else through a staging buffer and a conversion kernel;
// dummy weights are generated on the GPU from (seed, stream, index).
#include <algorithm>
#include <cstring>
#include <span>
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

// Bytes of one weight on the GPU (FP8: codes, then the row scales).
size_t weight_bytes(const WeightSource& w, size_t elem_size) {
  if (!w.fp8) return aligned(size_t(w.numel()) * elem_size);
  return aligned(size_t(w.numel())) + aligned(size_t(w.shape[0]) * sizeof(float));
}

size_t device_weight_bytes(const Model& m, size_t elem_size) {
  size_t total = 0;
  for (const WeightSource& w : m.weights) total += weight_bytes(w, elem_size);
  return total;
}

// Bytes a weight's load moves from the host: its file data, or for dummy
// weights the device data generated.
static uint64_t source_bytes(const WeightSource& w, size_t elem_size) {
  if (w.is_dummy()) return uint64_t(w.numel()) * (w.fp8 ? 1 : elem_size);
  uint64_t b = 0;
  for (std::span<const uint8_t> part : w.parts) b += part.size();
  return b;
}

// One FP8 weight into codes [rows, cols] and scale [rows]: an F8E4M3 file
// weight as it is, else rows converted (file data) or generated (dummy) in
// fp32 and quantized per row, a staging buffer's worth of rows at a time.
static void upload_fp8(const Model& m, const WeightSource& w, uint8_t* codes, float* scale,
                       DeviceBuffer& raw, DeviceBuffer& f32, cudaStream_t s) {
  const size_t rows = size_t(w.shape[0]), cols = size_t(w.shape[1]);
  if (w.dtype == DType::F8E4M3) {
    HAYATE_CHECK(w.scales.size() == rows, "weight ", w.name, ": ", w.scales.size(),
                 " scales for ", rows, " rows");
    size_t done = 0;
    for (std::span<const uint8_t> part : w.parts) {
      HAYATE_CHECK(done + part.size() <= rows * cols, "weight ", w.name, ": parts exceed its shape");
      HAYATE_CUDA_CHECK(cudaMemcpyAsync(codes + done, part.data(), part.size(),
                                        cudaMemcpyHostToDevice, s));
      done += part.size();
    }
    HAYATE_CHECK(done == rows * cols, "weight ", w.name, ": parts hold ", done, " of ",
                 rows * cols, " elements");
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(scale, w.scales.data(), rows * sizeof(float),
                                      cudaMemcpyHostToDevice, s));
    HAYATE_CUDA_CHECK(cudaStreamSynchronize(s));  // w.scales is host memory we do not own
    return;
  }
  if (!f32.bytes()) f32 = DeviceBuffer(kStagingBytes);
  const size_t chunk = std::max<size_t>(1, kStagingBytes / (cols * sizeof(float)));
  HAYATE_CHECK(chunk * cols * sizeof(float) <= kStagingBytes, "weight ", w.name, ": a row of ",
               cols, " floats exceeds the staging buffer");
  // File data: the rows of all parts, in order, as one byte range.
  const size_t es = dtype_size(w.dtype);
  size_t part = 0, part_off = 0;  // where the next row's bytes start
  for (size_t r0 = 0; r0 < rows; r0 += chunk) {
    const size_t n = std::min(chunk, rows - r0);
    if (w.is_dummy()) {
      fill_dummy(f32.as<float>(), n * cols, m.seed, w.dummy_stream, w.dummy_scale,
                 w.dummy_offset, r0 * cols, s);
    } else {
      if (!raw.bytes()) raw = DeviceBuffer(kStagingBytes);
      size_t copied = 0;  // bytes of these n rows, gathered across part boundaries
      while (copied < n * cols * es) {
        HAYATE_CHECK(part < w.parts.size(), "weight ", w.name, ": parts end before its rows");
        const size_t take = std::min(n * cols * es - copied, w.parts[part].size() - part_off);
        HAYATE_CUDA_CHECK(cudaMemcpyAsync(raw.as<char>() + copied, w.parts[part].data() + part_off,
                                          take, cudaMemcpyHostToDevice, s));
        copied += take;
        part_off += take;
        if (part_off == w.parts[part].size()) ++part, part_off = 0;
      }
      convert(raw.as(), int(w.dtype), n * cols, f32.as<float>(), s);
    }
    quantize_weight_rows(f32.as<float>(), int(n), int(cols), codes + r0 * cols, scale + r0, s);
    // The staging buffers are reused by the next chunk's host copies.
    if (!w.is_dummy()) HAYATE_CUDA_CHECK(cudaStreamSynchronize(s));
  }
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
  std::unordered_map<std::string, Fp8Linear> fp8_by_name;
  DeviceBuffer staging, staging_f32;
  char* next = dw.storage.template as<char>();
  for (const WeightSource& w : m.weights) {
    T* dst = reinterpret_cast<T*>(next);
    const size_t n = size_t(w.numel());
    loaded += source_bytes(w, sizeof(T));
    if (w.fp8) {
      HAYATE_CHECK(w.shape.size() == 2, "weight ", w.name, ": FP8 weights are matrices");
      uint8_t* codes = reinterpret_cast<uint8_t*>(next);
      float* scale = reinterpret_cast<float*>(next + aligned(n));
      next += weight_bytes(w, sizeof(T));
      upload_fp8(m, w, codes, scale, staging, staging_f32, s);
      fp8_by_name[w.name] = Fp8Linear{codes, scale, w.input_scale};
      if (progress && loaded < total) progress(loaded, total);
      continue;
    }
    next += aligned(n * sizeof(T));
    by_name[w.name] = dst;
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

  auto get = [&](const std::string& name) -> const T* {
    if (fp8_by_name.count(name)) return nullptr;  // the layer's Fp8Linear
    auto it = by_name.find(name);
    HAYATE_CHECK(it != by_name.end(), "weight ", name, " is missing");
    return it->second;
  };
  auto get8 = [&](const std::string& name) {
    auto it = fp8_by_name.find(name);
    return it == fp8_by_name.end() ? Fp8Linear{} : it->second;
  };
  const ModelConfig& c = m.config;
  dw.embed = get("embed");
  dw.final_norm = get("final_norm");
  dw.lm_head = get(m.lm_head().name);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = cat("layers.", l, ".");
    dw.layers.push_back({get(p + "attn_norm"), get(p + "wqkv"), get(p + "wo"), get(p + "ffn_norm"),
                         get(p + "w_gate_up"), get(p + "w_down"), get8(p + "wqkv"),
                         get8(p + "wo"), get8(p + "w_gate_up"), get8(p + "w_down"),
                         c.qkv_bias ? get(p + "bqkv") : nullptr,
                         c.qk_norm ? get(p + "q_norm") : nullptr,
                         c.qk_norm ? get(p + "k_norm") : nullptr});
  }
  size_t n_fp8 = fp8_by_name.size();
  dw.fp8 = n_fp8 > 0;
  HAYATE_CHECK(n_fp8 == 0 || n_fp8 == size_t(4 * c.num_layers),
               "the cuda backend runs FP8 in every layer's linear weights or in none; this "
               "model has ", n_fp8, " of ", 4 * c.num_layers,
               " in FP8 (quantization_config's ignore list): run it with --backend cpu");
  for (const WeightSource& w : m.weights)
    if (w.name != "embed") dw.streamed_bytes += double(weight_bytes(w, sizeof(T)));
  if (dw.lm_head == dw.embed) dw.streamed_bytes += double(m.weight("embed").numel()) * sizeof(T);
  return dw;
}

template DeviceWeights<half> upload_weights<half>(
    const Model&, cudaStream_t, const std::function<void(uint64_t, uint64_t)>&);
template DeviceWeights<__nv_bfloat16> upload_weights<__nv_bfloat16>(
    const Model&, cudaStream_t, const std::function<void(uint64_t, uint64_t)>&);

}  // namespace hayate::cuda
