// Weights on the GPU: dummy weights generated in place from the counter-based
// RNG (the CPU backend computes the same values from core/rng.h), file weights
// converted to the compute dtype, and the read-bandwidth probe.
#include "core/rng.h"
#include "cuda/kernels/common.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

// ---- kernels -------------------------------------------------------------------

template <typename T>
__global__ void fill_dummy_kernel(T* __restrict__ dst, size_t n, uint64_t seed, uint64_t stream,
                                  float scale, float offset, uint64_t first) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    // Same expression as weight_to_f32 on the host; __fmul_rn/__fadd_rn keep
    // nvcc from contracting it into an fma that the host does not do.
    dst[i] = from_f32<T>(__fadd_rn(offset, __fmul_rn(scale, uniform_pm1(seed, stream, first + i))));
  }
}

template <typename T>
__global__ void convert_kernel(const void* __restrict__ src, int src_dtype, size_t n,
                               T* __restrict__ dst) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float v;
    if (src_dtype == 0) v = static_cast<const float*>(src)[i];
    else if (src_dtype == 1) v = __half2float(static_cast<const half*>(src)[i]);
    else v = __bfloat162float(static_cast<const __nv_bfloat16*>(src)[i]);
    dst[i] = from_f32<T>(v);
  }
}

// Every thread keeps 8 independent 16-byte loads in flight per iteration.
__global__ void read_probe_kernel(const uint4* __restrict__ buf, size_t n16, float* sink) {
  constexpr int kInFlight = 8;
  uint32_t x = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (; i + (kInFlight - 1) * stride < n16; i += kInFlight * stride) {
    uint4 v[kInFlight];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) v[k] = load_stream(buf + i + k * stride);
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) x ^= v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
  }
  for (; i < n16; i += stride) {
    const uint4 a = load_stream(buf + i);
    x ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (x == 0x12345678u) *sink = float(x);  // practically never: keeps the loads alive
}

// ---- launchers -------------------------------------------------------------------

template <typename T>
void fill_dummy(T* dst, size_t n, uint64_t seed, uint64_t stream, float scale, float offset,
                uint64_t first, cudaStream_t s) {
  launch({std::min(ceil_div(n, 256), 132u * 64), 256, 0, s}, fill_dummy_kernel<T>, dst, n, seed,
         stream, scale, offset, first);
}

template <typename T>
void convert(const void* src, int src_dtype, size_t n, T* dst, cudaStream_t s) {
  launch({std::min(ceil_div(n, 256), 132u * 64), 256, 0, s}, convert_kernel<T>, src, src_dtype, n, dst);
}

void read_probe(const void* buf, size_t bytes, float* sink, cudaStream_t s) {
  int device = 0, sms = 0;
  HAYATE_CUDA_CHECK(cudaGetDevice(&device));
  HAYATE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  launch({unsigned(sms) * 8, 256, 0, s}, read_probe_kernel, static_cast<const uint4*>(buf), bytes / 16, sink);
}

bool kernels_supported(int device) {
  HAYATE_CUDA_CHECK(cudaSetDevice(device));
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, fill_dummy_kernel<half>);
  cudaGetLastError();  // a missing image is an answer here, not a fault
  return e == cudaSuccess;
}

template void fill_dummy<half>(half*, size_t, uint64_t, uint64_t, float, float, uint64_t, cudaStream_t);
template void fill_dummy<__nv_bfloat16>(__nv_bfloat16*, size_t, uint64_t, uint64_t, float, float,
                                        uint64_t, cudaStream_t);
// fp32: FP8 weights are quantized from fp32 values (weights.cu).
template void fill_dummy<float>(float*, size_t, uint64_t, uint64_t, float, float, uint64_t,
                                cudaStream_t);
template void convert<float>(const void*, int, size_t, float*, cudaStream_t);
template void convert<half>(const void*, int, size_t, half*, cudaStream_t);
template void convert<__nv_bfloat16>(const void*, int, size_t, __nv_bfloat16*, cudaStream_t);

}  // namespace hayate::cuda
