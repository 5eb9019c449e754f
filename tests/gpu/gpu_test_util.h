// Helpers for the gpu tests: device vectors, fresh random inputs, poisoned
// outputs, and the atol + rtol * |ref| comparison against the CPU twin.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/buffer.h"
#include "cuda/launch.h"

namespace hayate::cuda::test {

// A fresh seed per run (printed on failure through SCOPED_TRACE by callers).
inline uint64_t fresh_seed() { return std::random_device{}() * 0x9e3779b97f4a7c15ull + 1; }

inline std::vector<float> random_vec(size_t n, std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

template <typename T> inline T to_t(float f);
template <> inline half to_t(float f) { return __float2half_rn(f); }
template <> inline __nv_bfloat16 to_t(float f) { return __float2bfloat16_rn(f); }
template <typename T> inline float from_t(T v);
template <> inline float from_t(half v) { return __half2float(v); }
template <> inline float from_t(__nv_bfloat16 v) { return __bfloat162float(v); }

// Rounds values to T in place (so the reference sees exactly what the GPU reads).
template <typename T>
void round_to(std::vector<float>& v) {
  for (float& x : v) x = from_t<T>(to_t<T>(x));
}

// A device copy of host data; poison() fills it with NaN bytes (0xff) so an
// element the kernel failed to write cannot pass.
template <typename E>
class Dev {
 public:
  explicit Dev(size_t n) : n_(n), buf_(std::max<size_t>(n, 1) * sizeof(E)) { poison(); }
  explicit Dev(const std::vector<E>& host) : Dev(host.size()) { upload(host); }
  void upload(const std::vector<E>& host) {
    HAYATE_CUDA_CHECK(cudaMemcpy(buf_.as(), host.data(), host.size() * sizeof(E), cudaMemcpyHostToDevice));
  }
  void poison() { HAYATE_CUDA_CHECK(cudaMemset(buf_.as(), 0xff, buf_.bytes())); }
  std::vector<E> download() const {
    HAYATE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<E> host(n_);
    HAYATE_CUDA_CHECK(cudaMemcpy(host.data(), buf_.as(), n_ * sizeof(E), cudaMemcpyDeviceToHost));
    return host;
  }
  E* get() const { return buf_.as<E>(); }
  size_t size() const { return n_; }

 private:
  size_t n_;
  DeviceBuffer buf_;
};

// T vectors from float values (rounded).
template <typename T>
Dev<T> dev_t(const std::vector<float>& v) {
  std::vector<T> t(v.size());
  for (size_t i = 0; i < v.size(); ++i) t[i] = to_t<T>(v[i]);
  return Dev<T>(t);
}
template <typename T>
std::vector<float> download_f(const Dev<T>& d) {
  std::vector<T> t = d.download();
  std::vector<float> f(t.size());
  for (size_t i = 0; i < t.size(); ++i) f[i] = from_t<T>(t[i]);
  return f;
}

// Every element within atol + rtol * |ref| (NaN fails).
inline void expect_close(const std::vector<float>& got, const std::vector<float>& ref, float atol,
                         float rtol, const char* what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const bool ok = std::fabs(got[i] - ref[i]) <= atol + rtol * std::fabs(ref[i]);  // NaN: false
    if (!ok && bad++ == 0) first = i;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << ref.size() << " elements off; first at "
                     << first << ": got " << got[first] << ", want " << ref[first];
}

inline bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// The base of the kernel test fixtures: skips without a GPU, and gives each
// test a fresh seed (tests print it with SCOPED_TRACE) and a generator.
class SeededGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
    seed_ = fresh_seed();
    rng_.seed(seed_);
  }
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace hayate::cuda::test

#define HAYATE_REQUIRE_GPU()                                              \
  do {                                                                    \
    if (!::hayate::cuda::test::have_gpu()) GTEST_SKIP() << "no CUDA GPU"; \
  } while (0)
