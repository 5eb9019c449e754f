#include "cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/fp8.h"
#include "core/hot_loop.h"

namespace hayate::cpu {

// Work (multiply-adds) below which an op runs on one thread: a parallel
// region costs a barrier, and on a loaded 2-core machine a barrier waiting for
// a descheduled thread costs milliseconds.
constexpr int64_t kParallelWork = int64_t(1) << 20;

void embedding(std::span<const int32_t> tokens, const float* table, int vocab, int hidden,
               float* out) {
  for (size_t t = 0; t < tokens.size(); ++t) {
    int32_t id = tokens[t];
    HAYATE_CHECK(id >= 0 && id < vocab, "token id ", id, " at index ", t,
                 " is outside the vocabulary [0, ", vocab, ")");
    const float* row = table + int64_t(id) * hidden;
    std::copy(row, row + hidden, out + int64_t(t) * hidden);
  }
}

void embedding_slice(std::span<const int32_t> tokens, const float* table, int row0, int rows,
                     int hidden, float* out) {
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int64_t r = int64_t(tokens[t]) - row0;
    float* o = out + int64_t(t) * hidden;
    if (r >= 0 && r < rows)
      std::copy_n(table + r * hidden, hidden, o);
    else
      std::fill_n(o, hidden, 0.0f);
  }
}

void rmsnorm(const float* x, const float* w, float* out, int n, int dim, float eps) {
  for (int t = 0; t < n; ++t) {
    const float* xr = x + int64_t(t) * dim;
    float* yr = out + int64_t(t) * dim;
    float ss = 0.0f;
    for (int i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    float inv = 1.0f / std::sqrt(ss / float(dim) + eps);
    // HF multiplies the normalised activation by the weight after the cast
    // back to the input dtype; in fp32 that is the same product.
    for (int i = 0; i < dim; ++i) yr[i] = w[i] * (xr[i] * inv);
  }
}

// Dot product: nearly all of the backend's time. `omp simd` vectorises it
// (partial sums per lane, a fixed order for a given build). Its two reads of
// `len` floats are bounded by callers whose buffer sizes are checked.
HAYATE_HOT_LOOP static float dot(const float* a, const float* b, int len) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < len; ++i) s += a[i] * b[i];
  return s;
}

// y[t, o0:o1] = W[o0:o1] . x[t] for all n tokens: the block's weight rows
// are read once and reused while they sit in cache, and each token's outputs
// are one contiguous run. Unchecked like dot: under ASan a checked store here
// costs a shadow lookup per output (the LM head at batch 128 is 16M stores,
// several seconds a step in the sanitizer build); matmul checks nothing
// either, its callers size the buffers.
// Four tokens at a time share each weight row's loads, and their four sums
// are independent chains (one dot's chain of dependent adds runs at a
// fraction of the multiply-add rate); each sum is dot's, in dot's order.
HAYATE_HOT_LOOP static void matmul_rows(const float* W, const float* x, float* y, int n, int out,
                                        int in, int o0, int o1) {
  int t = 0;
  for (; t + 4 <= n; t += 4) {
    const float *x0 = x + int64_t(t) * in, *x1 = x0 + in, *x2 = x1 + in, *x3 = x2 + in;
    float* yt = y + int64_t(t) * out;
    for (int o = o0; o < o1; ++o) {
      const float* w = W + int64_t(o) * in;
      float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
      for (int i = 0; i < in; ++i) {
        s0 += w[i] * x0[i];
        s1 += w[i] * x1[i];
        s2 += w[i] * x2[i];
        s3 += w[i] * x3[i];
      }
      yt[o] = s0;
      yt[out + o] = s1;
      yt[2 * int64_t(out) + o] = s2;
      yt[3 * int64_t(out) + o] = s3;
    }
  }
  for (; t < n; ++t) {
    const float* xt = x + int64_t(t) * in;
    float* yt = y + int64_t(t) * out;
    for (int o = o0; o < o1; ++o) yt[o] = dot(W + int64_t(o) * in, xt, in);
  }
}

void matmul(const float* W, const float* x, float* y, int n, int out, int in) {
  // A block of kRows output features is one thread's work.
  constexpr int kRows = 16;
  const int blocks = (out + kRows - 1) / kRows;
#pragma omp parallel for schedule(static) if (int64_t(n) * out * in >= kParallelWork)
  for (int b = 0; b < blocks; ++b)
    matmul_rows(W, x, y, n, out, in, b * kRows, std::min(out, (b + 1) * kRows));
}

void add_bias(float* x, const float* b, int n, int dim) {
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < dim; ++i) x[int64_t(t) * dim + i] += b[i];
}

void qk_norm(float* qkv, const float* q_w, const float* k_w, int n, int n_heads, int n_kv_heads,
             int head_dim, float eps) {
  const int64_t row = int64_t(n_heads + 2 * n_kv_heads) * head_dim;
  for (int t = 0; t < n; ++t) {
    float* q = qkv + t * row;
    rmsnorm(q, q_w, q, n_heads, head_dim, eps);
    rmsnorm(q + int64_t(n_heads) * head_dim, k_w, q + int64_t(n_heads) * head_dim, n_kv_heads,
            head_dim, eps);
  }
}

void rope(float* x, int n, int n_heads, int head_dim, int pos0, const float* inv_freq) {
  const int half = head_dim / 2;
  std::vector<float> cos_t(half), sin_t(half);
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < half; ++i) {
      // fp32 angle like HF (inv_freq @ position_ids in float32); cos/sin of
      // that float are then exact to rounding.
      float angle = float(pos0 + t) * inv_freq[i];
      cos_t[i] = float(std::cos(double(angle)));
      sin_t[i] = float(std::sin(double(angle)));
    }
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (int64_t(t) * n_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        float a = v[i], b = v[i + half];
        v[i] = a * cos_t[i] - b * sin_t[i];
        v[i + half] = b * cos_t[i] + a * sin_t[i];
      }
    }
  }
}

void attention(const float* q, const float* k_cache, const float* v_cache, float* out, int n,
               int pos0, int n_heads, int n_kv_heads, int head_dim) {
  const int group = n_heads / n_kv_heads;
  const int kv_dim = n_kv_heads * head_dim;
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const int64_t work = int64_t(n) * n_heads * (pos0 + n) * head_dim;
#pragma omp parallel if (work >= kParallelWork)
  {
    std::vector<float> scores(size_t(pos0) + size_t(n));
#pragma omp for collapse(2) schedule(static)
    for (int t = 0; t < n; ++t) {
      for (int h = 0; h < n_heads; ++h) {
        const int len = pos0 + t + 1;  // causal: positions [0, pos0 + t]
        const float* qh = q + (int64_t(t) * n_heads + h) * head_dim;
        const int64_t kv_off = int64_t(h / group) * head_dim;
        float mx = -INFINITY;
        for (int s = 0; s < len; ++s) {
          scores[s] = dot(qh, k_cache + int64_t(s) * kv_dim + kv_off, head_dim) * scale;
          mx = std::max(mx, scores[s]);
        }
        float sum = 0.0f;
        for (int s = 0; s < len; ++s) {
          scores[s] = std::exp(scores[s] - mx);
          sum += scores[s];
        }
        const float inv = 1.0f / sum;
        float* oh = out + (int64_t(t) * n_heads + h) * head_dim;
        std::fill(oh, oh + head_dim, 0.0f);
        for (int s = 0; s < len; ++s) {
          const float p = scores[s] * inv;
          const float* vs = v_cache + int64_t(s) * kv_dim + kv_off;
          for (int d = 0; d < head_dim; ++d) oh[d] += p * vs[d];
        }
      }
    }
  }
}

void silu_mul(const float* gu, float* out, int n, int inter) {
  for (int t = 0; t < n; ++t) {
    const float* g = gu + int64_t(t) * 2 * inter;
    const float* u = g + inter;
    float* o = out + int64_t(t) * inter;
    for (int j = 0; j < inter; ++j) o[j] = g[j] / (1.0f + std::exp(-g[j])) * u[j];
  }
}

void quantize_fp8(float* x, int n, int dim, float static_scale) {
#pragma omp parallel for schedule(static)
  for (int t = 0; t < n; ++t) fp8_fake_quantize_row(x + size_t(t) * dim, size_t(dim), static_scale);
}

void add(float* x, const float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] += y[i];
}

void copy_blocks(float* pool, int layers, int blocks, int64_t block_elems, const int32_t* pairs,
                 int n) {
  for (int c = 0; c < n; ++c)
    for (int l = 0; l < layers; ++l) {
      float* layer = pool + size_t(l) * size_t(blocks) * size_t(block_elems);
      std::copy_n(layer + size_t(pairs[2 * c]) * size_t(block_elems), size_t(block_elems),
                  layer + size_t(pairs[2 * c + 1]) * size_t(block_elems));
    }
}

}  // namespace hayate::cpu
