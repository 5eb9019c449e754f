// Paged attention lab: the decode attention of the batched backend at the
// shapes that matter (Llama-3.1-8B: 32 heads, 8 kv heads, head_dim 128, fp16,
// KV blocks of 16 tokens scattered at random over the pool), checked against
// the CPU reference (cpu::attention on the gathered K/V rows) with poisoned
// outputs, and timed with CUDA events: median of 30 launches, rotating over
// disjoint copies of the KV data so that most launches stream from HBM (the
// smallest shapes still fit in L2; said so in the output). Prints us, GB/s of
// KV read and the share of the read-bandwidth probe. Variants: v1 (the
// kernel before this lab, copied below, with the backend's split choice for
// max_model_len 8192: 16 splits of 512), v2 (src/cuda/paged_attention.cu)
// over a sweep of its knobs (full sweep only), the tensor-core kernel
// (paged_decode_mma.cu, the default at head_dim 128; --quick runs it, v2's
// defaults and its variants), and the one-pass short-context kernel
// (paged_decode_short.cu) where every row has at most 128 keys. Also times the paged prefill
// attention (chunked prefill of 1024-token prompts). See NOTES.md, "Paged attention".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cpu/ops.h"
#include "cuda/buffer.h"
#include "cuda/kernels/common.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"
#include "cuda/paged_attention.cuh"
#include "lab_timing.h"

namespace hayate::cuda {
namespace {

using T = half;
constexpr int kHeads = 32, kKvHeads = 8, kHd = 128, kBs = 16, kSplits = 16, kPart = 512;
constexpr int kKvDim = kKvHeads * kHd, kQDim = kHeads * kHd;

// ---- v1: the decode kernel as it was (commit 4fdadef) ----------------------------
namespace v1 {
__device__ __forceinline__ const int32_t* table_of(const PagedMeta& m, int seq, int max_blocks) {
  return m.block_tables + size_t(seq) * max_blocks;
}
template <typename T>
__device__ __forceinline__ const T* kv_row(const T* pool, const int32_t* table, int p, int bs,
                                           int kv_dim) {
  return pool + (size_t(table[p / bs]) * bs + p % bs) * kv_dim;
}
constexpr int kDecodeWarps = 4;
// E consecutive 16-bit values to floats; E = 4 (head_dim 128) as one 8-byte
// load (aligned: kv_dim is a multiple of 32 and the lane offset of 4 elements).
template <typename T, int E>
__device__ __forceinline__ void load_row(const T* p, float (&f)[E]) {
  if constexpr (E == 4) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    const uint32_t w[2] = {u.x, u.y};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const T* h = reinterpret_cast<const T*>(&w[i]);
      f[2 * i] = to_f32(h[0]);
      f[2 * i + 1] = to_f32(h[1]);
    }
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e) f[e] = to_f32(p[e]);
  }
}

// Block (row i, kv head, split): 4 warps share the split's keys round-robin;
// lane owns E = HD / 32 dims of each of the group's G query heads, so a key's
// K and V rows are read once for the whole group. Writes the split's
// normalised output and (m, l), or, when the split is the only one, the
// final output directly.
template <typename T, int HD>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    paged_decode_kernel(const float* __restrict__ q, const T* __restrict__ k_pool,
                        const T* __restrict__ v_pool, PagedShape sh, PagedMeta meta,
                        const int32_t* __restrict__ rows, int n_splits, int part,
                        float* __restrict__ part_o, float* __restrict__ part_ml,
                        T* __restrict__ out) {
  constexpr int E = HD / 32;
  const int i = blockIdx.x, kh = blockIdx.y, sp = blockIdx.z;
  const int row = rows[i], len = meta.tok_pos[row] + 1;
  const int k0 = sp * part, k1 = min(len, k0 + part);
  if (k0 >= len) return;
  const int G = sh.n_heads / sh.n_kv_heads, kv_dim = sh.n_kv_heads * HD, q_dim = sh.n_heads * HD;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t* table = table_of(meta, meta.tok_seq[row], sh.max_blocks);
  const float scale = rsqrtf(float(HD));

  float qr[kPagedMaxGroup][E], acc[kPagedMaxGroup][E], m[kPagedMaxGroup], l[kPagedMaxGroup];
#pragma unroll
  for (int g = 0; g < kPagedMaxGroup; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      qr[g][e] = g < G ? q[size_t(row) * q_dim + (kh * G + g) * HD + lane * E + e] * scale : 0.0f;
      acc[g][e] = 0.0f;
    }
  }
  for (int k = k0 + warp; k < k1; k += kDecodeWarps) {
    const T* kr = kv_row(k_pool, table, k, sh.block_size, kv_dim) + kh * HD + lane * E;
    const T* vr = kv_row(v_pool, table, k, sh.block_size, kv_dim) + kh * HD + lane * E;
    float kf[E], vf[E];
    load_row<T, E>(kr, kf);
    load_row<T, E>(vr, vf);
#pragma unroll
    for (int g = 0; g < kPagedMaxGroup; ++g) {
      if (g >= G) break;
      float s = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) s += qr[g][e] * kf[e];
      s = warp_sum(s);
      const float m_new = fmaxf(m[g], s);
      const float corr = __expf(m[g] - m_new), p = __expf(s - m_new);
      l[g] = l[g] * corr + p;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[g][e] = acc[g][e] * corr + p * vf[e];
      m[g] = m_new;
    }
  }

  // Merge the 4 warps' states.
  __shared__ float s_acc[kDecodeWarps][kPagedMaxGroup][HD];
  __shared__ float s_ml[kDecodeWarps][kPagedMaxGroup][2];
#pragma unroll
  for (int g = 0; g < kPagedMaxGroup; ++g) {
    if (g >= G) break;
#pragma unroll
    for (int e = 0; e < E; ++e) s_acc[warp][g][lane * E + e] = acc[g][e];
    if (lane == 0) {
      s_ml[warp][g][0] = m[g];
      s_ml[warp][g][1] = l[g];
    }
  }
  __syncthreads();  // every warp's state is in shared memory
  const bool single = n_splits == 1 || len <= part;
  for (int j = threadIdx.x; j < G * HD; j += blockDim.x) {
    const int g = j / HD, dim = j % HD;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) M = fmaxf(M, s_ml[w][g][0]);
    float L = 0.0f, O = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float f = s_ml[w][g][1] > 0.0f ? __expf(s_ml[w][g][0] - M) : 0.0f;
      L += s_ml[w][g][1] * f;
      O += s_acc[w][g][dim] * f;
    }
    const int h = kh * G + g;
    if (single) {
      out[size_t(row) * q_dim + h * HD + dim] = from_f32<T>(O / L);
    } else {
      const size_t at = (size_t(i) * sh.n_heads + h) * n_splits + sp;
      part_o[at * HD + dim] = O / L;
      if (dim == 0) {
        part_ml[at * 2] = M;
        part_ml[at * 2 + 1] = L;
      }
    }
  }
}

// Block (row i, head h), thread = dim: weights each split by l * exp(m - M).
template <typename T>
__global__ void paged_decode_combine_kernel(PagedShape sh, PagedMeta meta,
                                            const int32_t* __restrict__ rows, int n_splits,
                                            int part, const float* __restrict__ part_o,
                                            const float* __restrict__ part_ml,
                                            T* __restrict__ out) {
  const int i = blockIdx.x, h = blockIdx.y, dim = threadIdx.x, HD = sh.head_dim;
  const int row = rows[i], len = meta.tok_pos[row] + 1;
  const int used = (len + part - 1) / part;
  if (n_splits == 1 || used == 1) return;  // the decode kernel wrote the output
  const size_t base = (size_t(i) * sh.n_heads + h) * n_splits;
  float M = -INFINITY;
  for (int sp = 0; sp < used; ++sp) M = fmaxf(M, part_ml[(base + sp) * 2]);
  float L = 0.0f, O = 0.0f;
  for (int sp = 0; sp < used; ++sp) {
    const float w = part_ml[(base + sp) * 2 + 1] * __expf(part_ml[(base + sp) * 2] - M);
    L += w;
    O += w * part_o[(base + sp) * HD + dim];
  }
  out[size_t(row) * sh.n_heads * HD + h * HD + dim] = from_f32<T>(O / L);
}

}  // namespace v1

void v1_decode(const float* q, const T* kp, const T* vp, PagedShape sh, PagedMeta meta,
               const int32_t* rows, int n_rows, float* part_o, float* part_ml, T* out,
               cudaStream_t s) {
  launch({dim3(unsigned(n_rows), unsigned(sh.n_kv_heads), unsigned(kSplits)), v1::kDecodeWarps * 32,
          0, s},
         v1::paged_decode_kernel<T, kHd>, q, kp, vp, sh, meta, rows, kSplits, kPart, part_o,
         part_ml, out);
  launch({dim3(unsigned(n_rows), unsigned(sh.n_heads)), unsigned(kHd), 0, s},
         v1::paged_decode_combine_kernel<T>, sh, meta, rows, kSplits, kPart,
         static_cast<const float*>(part_o), static_cast<const float*>(part_ml), out);
}

template <typename V>
V* upload(DeviceBuffer& buf, const std::vector<V>& h) {
  buf = DeviceBuffer(std::max<size_t>(h.size() * sizeof(V), 16));
  HAYATE_CUDA_CHECK(cudaMemcpy(buf.as(), h.data(), h.size() * sizeof(V), cudaMemcpyHostToDevice));
  return buf.as<V>();
}

std::vector<float> download_f(const T* d, size_t n) {
  std::vector<T> h(n);
  HAYATE_CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = __half2float(h[i]);
  return f;
}

// One problem: `lens` [S] keys per sequence (one decode row each, or for
// prefill `chunk` query rows ending at the last key), `copies` disjoint sets
// of block tables over one pool filled with random K/V.
struct Problem {
  std::vector<int> lens;
  int copies = 1, max_blocks = 0, num_blocks = 0;
  DeviceBuffer k, v, q, out, part_o, part_ml, pos, seq, rows, tables, tiles;
  std::vector<float> hq;                      // [T, q_dim]
  std::vector<std::vector<int32_t>> htables;  // per copy [S * max_blocks]
  std::vector<int32_t> hpos, hseq;
  int n_tokens = 0, n_tiles = 0;
  double kv_bytes = 0;  // K+V bytes one launch must read (each key once)
};

// decode: every sequence contributes its last position as one row.
// prefill: sequence s contributes rows for positions [lens[s] - chunk, lens[s]).
Problem make_problem(const std::vector<int>& lens, int chunk, size_t min_total_bytes, uint64_t seed,
                     cudaStream_t st) {
  Problem p;
  p.lens = lens;
  const int S = int(lens.size());
  int per_copy = 0;
  for (int l : lens) {
    p.max_blocks = std::max(p.max_blocks, (l + kBs - 1) / kBs);
    per_copy += (l + kBs - 1) / kBs;
    p.kv_bytes += double(l) * 2 * kKvDim * sizeof(T);
  }
  const size_t copy_bytes = size_t(per_copy) * kBs * kKvDim * sizeof(T) * 2;
  p.copies = int(std::clamp<size_t>(min_total_bytes / copy_bytes, 1, 256));
  p.num_blocks = per_copy * p.copies;
  std::mt19937 rng{uint32_t(seed)};
  std::vector<int32_t> perm(size_t(p.num_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  size_t next = 0;
  for (int c = 0; c < p.copies; ++c) {
    std::vector<int32_t> t(size_t(S) * p.max_blocks, 0);
    for (int s = 0; s < S; ++s)
      for (int j = 0; j < (lens[size_t(s)] + kBs - 1) / kBs; ++j)
        t[size_t(s) * p.max_blocks + j] = perm[next++];
    p.htables.push_back(std::move(t));
  }
  for (int s = 0; s < S; ++s) {
    const int rows = chunk > 0 ? std::min(chunk, lens[size_t(s)]) : 1;
    for (int r = 0; r < rows; ++r) {
      if (chunk > 0 && r % paged_prefill_tile_tokens(kHeads / kKvHeads) == 0) ++p.n_tiles;
      p.hpos.push_back(lens[size_t(s)] - rows + r);
      p.hseq.push_back(s);
    }
  }
  p.n_tokens = int(p.hpos.size());
  std::vector<int32_t> tiles, ident(size_t(p.n_tokens));
  std::iota(ident.begin(), ident.end(), 0);
  const int tt = paged_prefill_tile_tokens(kHeads / kKvHeads);
  for (int r = 0; r < p.n_tokens;) {
    int n = 1;
    while (n < tt && r + n < p.n_tokens && p.hseq[size_t(r + n)] == p.hseq[size_t(r)]) ++n;
    tiles.push_back(r);
    tiles.push_back(n);
    r += n;
  }
  p.n_tiles = int(tiles.size() / 2);
  const size_t pool = size_t(p.num_blocks) * kBs * kKvDim;
  p.k = DeviceBuffer(pool * sizeof(T));
  p.v = DeviceBuffer(pool * sizeof(T));
  fill_dummy<T>(p.k.as<T>(), pool, seed, 1, 1.0f, 0.0f, 0, st);
  fill_dummy<T>(p.v.as<T>(), pool, seed, 2, 1.0f, 0.0f, 0, st);
  p.hq.resize(size_t(p.n_tokens) * kQDim);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);  // sharp enough softmax to matter
  for (float& x : p.hq) x = u(rng);
  upload(p.q, p.hq);
  upload(p.pos, p.hpos);
  upload(p.seq, p.hseq);
  upload(p.rows, ident);
  upload(p.tiles, tiles);
  upload(p.tables, p.htables[0]);
  p.out = DeviceBuffer(size_t(p.n_tokens) * kQDim * sizeof(T));
  p.part_o = DeviceBuffer(size_t(p.n_tokens) * kHeads * kSplits * kHd * sizeof(float));
  p.part_ml = DeviceBuffer(size_t(p.n_tokens) * kHeads * kSplits * 2 * sizeof(float));
  HAYATE_CUDA_CHECK(cudaStreamSynchronize(st));
  return p;
}

// CPU reference for every row (copy 0's tables): gather the row's sequence
// K/V into [len, kv_dim] and run cpu::attention on that one query.
std::vector<float> reference(const Problem& p) {
  const size_t pool = size_t(p.num_blocks) * kBs * kKvDim;
  const std::vector<float> K = download_f(p.k.as<T>(), pool), V = download_f(p.v.as<T>(), pool);
  std::vector<float> ref(size_t(p.n_tokens) * kQDim);
  auto one = [&](int r) {
    const int s = p.hseq[size_t(r)], len = p.hpos[size_t(r)] + 1;
    std::vector<float> kc(size_t(len) * kKvDim), vc(size_t(len) * kKvDim);
    for (int t = 0; t < len; ++t) {
      const size_t src =
          (size_t(p.htables[0][size_t(s) * p.max_blocks + t / kBs]) * kBs + t % kBs) * kKvDim;
      std::copy_n(K.data() + src, kKvDim, kc.data() + size_t(t) * kKvDim);
      std::copy_n(V.data() + src, kKvDim, vc.data() + size_t(t) * kKvDim);
    }
    cpu::attention(p.hq.data() + size_t(r) * kQDim, kc.data(), vc.data(),
                   ref.data() + size_t(r) * kQDim, 1, len - 1, kHeads, kKvHeads, kHd);
  };
  const int nt = int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> workers;
  for (int w = 0; w < nt; ++w)
    workers.emplace_back([&, w] {
      for (int r = w; r < p.n_tokens; r += nt) one(r);
    });
  for (auto& t : workers) t.join();
  return ref;
}

// Poisons out (NaN), runs `fn` once on copy 0, compares: |d| <= 2e-3 + 1e-2 |ref|.
bool check(Problem& p, const std::vector<float>& ref, const std::function<void()>& fn,
           const char* what) {
  HAYATE_CUDA_CHECK(cudaMemset(p.out.as(), 0xff, p.out.bytes()));
  HAYATE_CUDA_CHECK(cudaMemcpy(p.tables.as(), p.htables[0].data(),
                               p.htables[0].size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  fn();
  HAYATE_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = download_f(p.out.as<T>(), ref.size());
  double worst = 0;
  size_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::fabs(double(got[i]) - ref[i]);
    if (!(d <= 2e-3 + 1e-2 * std::fabs(ref[i]))) ++bad;
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
  }
  if (bad)
    std::printf("  CHECK FAILED %s: %zu of %zu bad, worst |d| %.3g\n", what, bad, ref.size(),
                worst);
  return bad == 0;
}

// All tables of all copies on the device: copy c at offset c * S * max_blocks.
struct Rotation {
  DeviceBuffer all;
  int stride = 0;
};
Rotation rotation(const Problem& p) {
  Rotation r;
  std::vector<int32_t> h;
  for (const auto& t : p.htables) h.insert(h.end(), t.begin(), t.end());
  r.stride = int(p.htables[0].size());
  upload(r.all, h);
  return r;
}

int run(int argc, char** argv) {
  // --quick: the default and its variants only; --only NAME: one decode case,
  // no prefill (e.g. under ncu, whose first profiled launch is then that
  // case's first check run).
  bool sweep = true;
  std::string only;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--quick") {
      sweep = false;
    } else if (arg == "--only" && a + 1 < argc) {
      only = argv[++a];
      sweep = false;
    } else {
      std::fprintf(stderr, "usage: paged_attn_lab [--quick] [--only CASE]\n");
      return 2;
    }
  }
  cudaStream_t st;
  HAYATE_CUDA_CHECK(cudaStreamCreate(&st));
  cudaDeviceProp prop{};
  HAYATE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  paged_attention_init();
  double read_gbs = 0;
  {
    const size_t probe_bytes = size_t(4) << 30;
    DeviceBuffer probe(probe_bytes), sink(64);
    HAYATE_CUDA_CHECK(cudaMemset(probe.as(), 1, probe_bytes));
    const double ms =
        median_ms(st, 10, [&](int) { read_probe(probe.as(), probe_bytes, sink.as<float>(), st); });
    read_gbs = probe_bytes / ms / 1e6;
  }
  std::printf("device %s, %d SMs, L2 %d MB; read probe %.0f GB/s\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, read_gbs);
  const PagedShape sh0{kHeads, kKvHeads, kHd, kBs, 0};
  int failures = 0;

  // Decode. Mixed: different lengths in one batch, not multiples of 16,
  // crossing split edges, length 1.
  struct Case {
    const char* name;
    std::vector<int> lens;
  };
  std::vector<Case> cases = {{"1x128", std::vector<int>(1, 128)},
                             {"64x200", std::vector<int>(64, 200)},
                             {"64x1536", std::vector<int>(64, 1536)},
                             {"256x200", std::vector<int>(256, 200)},
                             {"64x4000", std::vector<int>(64, 4000)},
                             {"mixed7", {1, 17, 129, 511, 513, 1600, 8190}},
                             // Short contexts (the batch-1 article shape decodes at 12..128 keys):
                             // split kernel vs one pass, from bucket 1 to 256.
                             {"1x64", std::vector<int>(1, 64)},
                             {"8x100", std::vector<int>(8, 100)},
                             {"64x100", std::vector<int>(64, 100)},
                             {"256x100", std::vector<int>(256, 100)},
                             // Max load (issue 5): 1024 and 512 rows at 128..256 keys.
                             {"1024x192", std::vector<int>(1024, 192)},
                             {"512x256", std::vector<int>(512, 256)}};
  // The default (tensor cores, paged_decode_mma.cu), v2 with its defaults
  // (mma off), the mma kernel at 4 blocks/SM, with helper blocks instead of
  // big_splits slots per pair, and with no many-pairs split; the full sweep
  // adds v2's knobs.
  std::vector<PagedDecodeTuning> tunes = {PagedDecodeTuning{}};
  {
    PagedDecodeTuning v2;
    v2.mma = false;
    tunes.push_back(v2);
    PagedDecodeTuning m4;
    m4.mma_blocks = 4;
    tunes.push_back(m4);
    PagedDecodeTuning helpers;  // many pairs: helper blocks instead of split slots
    helpers.mma_helpers = true;
    tunes.push_back(helpers);
    PagedDecodeTuning one;  // many pairs: no split at all
    one.big_splits = 1;
    tunes.push_back(one);
    PagedDecodeTuning split;  // many pairs, rows in one split: the split kernel, not the stream one
    split.stream_pairs = 1 << 30;
    split.stream_short_keys = 0;
    tunes.push_back(split);
    PagedDecodeTuning stream_all;  // the stream kernel from many_pairs (264) on, any length
    stream_all.stream_pairs = 0;
    tunes.push_back(stream_all);
    for (int mp : {128, 64}) {  // many pairs: max load's 128..256-key rows in 2 or 3 parts
      PagedDecodeTuning cut;
      cut.big_min_part = mp;
      tunes.push_back(cut);
    }
  }
  if (sweep)
    for (int tb : {264, 528, 1056, 2112})
      for (int mp : {128, 256})
        for (int u : {2, 4})
          for (bool pf : {false, true}) {
            PagedDecodeTuning t{tb, mp, u, pf, 1 << 30};
            t.mma = false;
            tunes.push_back(t);
          }
  // The many-pairs regime of the default (only batches of >= 33 rows use it).
  if (sweep)
    for (int bsp : {1, 2, 4, 8})
      for (int bmp : {1024, 2048}) {
        PagedDecodeTuning t;
        t.big_splits = bsp;
        t.big_min_part = bmp;
        t.mma = false;
        tunes.push_back(t);
      }
  if (!only.empty()) {
    std::erase_if(cases, [&](const Case& c) { return c.name != only; });
    if (cases.empty()) {
      std::fprintf(stderr, "paged_attn_lab: no decode case named %s\n", only.c_str());
      return 2;
    }
  }
  std::printf("\n== decode (fp16, 32 q heads / 8 kv heads, head_dim 128, block 16) ==\n");
  for (const Case& c : cases) {
    Problem p = make_problem(c.lens, 0, size_t(1) << 30, 7 + c.lens.size(), st);
    const std::vector<float> ref = reference(p);
    Rotation rot = rotation(p);
    PagedShape sh = sh0;
    sh.max_blocks = p.max_blocks;
    auto meta = [&](int i) {
      return PagedMeta{p.pos.as<int32_t>(), p.seq.as<int32_t>(),
                       rot.all.as<int32_t>() + size_t(i % p.copies) * rot.stride};
    };
    const int n = p.n_tokens;
    const bool l2 = p.kv_bytes * p.copies < 3.0 * prop.l2CacheSize;
    std::printf("%s: %d rows, KV %.1f MB per launch, %d copies%s\n", c.name, n, p.kv_bytes / 1e6,
                p.copies, l2 ? " (fits in L2: not an HBM figure)" : "");
    auto report = [&](const std::string& what, double ms) {
      const double gbs = p.kv_bytes / ms / 1e6;
      std::printf("  %-46s %9.1f us %7.0f GB/s %5.1f %%\n", what.c_str(), ms * 1e3, gbs,
                  100.0 * gbs / read_gbs);
    };
    auto v1fn = [&](int i) {
      v1_decode(p.q.as<float>(), p.k.as<T>(), p.v.as<T>(), sh, meta(i), p.rows.as<int32_t>(), n,
                p.part_o.as<float>(), p.part_ml.as<float>(), p.out.as<T>(), st);
    };
    if (!check(
            p, ref, [&] { v1fn(0); }, "v1"))
      ++failures;
    report("v1 (16 splits of 512)", median_ms(st, 30, v1fn));
    for (size_t t = 0; t < tunes.size(); ++t) {
      const PagedDecodeTuning tu = tunes[t];
      auto fn = [&](int i) {
        paged_attention_decode_tuned(p.q.as<float>(), p.k.as<T>(), p.v.as<T>(), sh, meta(i),
                                     p.rows.as<int32_t>(), n, kSplits, tu, p.part_o.as<float>(),
                                     p.part_ml.as<float>(), p.out.as<T>(), st);
      };
      const std::string name =
          (t == 0 ? std::string("default ") : std::string()) +
          (tu.mma ? "mma" + std::string(tu.mma_blocks >= 4 ? "4 " : " ") +
                        (tu.mma_helpers ? "helpers " : "") +
                        (tu.stream_pairs >= (1 << 30) && tu.stream_short_keys == 0 ? "no-stream "
                         : tu.stream_pairs == 0       ? "stream-from-264 "
                                                      : "")
                  : std::string("v2 ")) +
          "tb " + std::to_string(tu.target_blocks) + " mp " + std::to_string(tu.min_part) + " u " +
          std::to_string(tu.unroll) + (tu.prefetch ? " pf" : "") +
          (tu.many_pairs < (1 << 30)
               ? " big " + std::to_string(tu.big_splits) + "/" + std::to_string(tu.big_min_part)
               : std::string());
      if (!check(
              p, ref, [&] { fn(0); }, name.c_str()))
        ++failures;
      report(name, median_ms(st, 30, fn));
    }
    if (*std::max_element(c.lens.begin(), c.lens.end()) <= paged_decode_short_max_keys(kHd)) {
      auto fn = [&](int i) {
        paged_attention_decode_short(p.q.as<float>(), p.k.as<T>(), p.v.as<T>(), sh, meta(i),
                                     p.rows.as<int32_t>(), n, p.out.as<T>(), st);
      };
      if (!check(
              p, ref, [&] { fn(0); }, "one-pass short"))
        ++failures;
      report("one-pass short (no split)", median_ms(st, 30, fn));
    }
    // The backend's own entry point (what cuda_batch_backend.cu calls).
    if (!check(
            p, ref,
            [&] {
              paged_attention_decode(p.q.as<float>(), p.k.as<T>(), p.v.as<T>(), sh, meta(0),
                                     p.rows.as<int32_t>(), n, kSplits, 0, p.part_o.as<float>(),
                                     p.part_ml.as<float>(), p.out.as<T>(), st);
            },
            "paged_attention_decode"))
      ++failures;
  }

  // Prefill: chunks of the 1024-token prompts as the scheduler cuts them
  // (--max-num-batched-tokens 8192: 8 whole prompts per step), and a small
  // checked case with chunked (non-zero start) rows.
  if (!only.empty()) {
    std::printf("\n%s\n", failures ? "SOME CHECKS FAILED" : "all checks passed");
    return failures ? 1 : 0;
  }
  std::printf("\n== prefill (causal, same shapes) ==\n");
  struct PCase {
    const char* name;
    std::vector<int> lens;
    int chunk;
    bool check;
  };
  for (const PCase& c :
       {PCase{"3 seqs: rows 0..36, 200..299, 900..999", {37, 300, 1000}, 100, true},
        PCase{"8 x 1024 prompts", std::vector<int>(8, 1024), 1024, false},
        PCase{"8 x 512 chunk at 512..1023", std::vector<int>(8, 1024), 512, false},
        PCase{"128 x 128 prompts (max-load-128's prefill step)", std::vector<int>(128, 128), 128,
              false}}) {
    Problem p = make_problem(c.lens, c.chunk, 0, 99, st);
    PagedShape sh = sh0;
    sh.max_blocks = p.max_blocks;
    const PagedMeta meta{p.pos.as<int32_t>(), p.seq.as<int32_t>(), p.tables.as<int32_t>()};
    double flops = 0;  // QK and PV: 4 HD flops per (query head, visible key)
    for (int r = 0; r < p.n_tokens; ++r) flops += 4.0 * kHd * kHeads * (p.hpos[size_t(r)] + 1);
    auto fn = [&](int) {
      paged_attention_prefill(p.q.as<float>(), p.k.as<T>(), p.v.as<T>(), sh, meta,
                              p.tiles.as<int2>(), p.n_tiles, p.out.as<T>(), st);
    };
    if (c.check && !check(
                       p, reference(p), [&] { fn(0); }, "prefill"))
      ++failures;
    const double ms = median_ms(st, 10, fn);
    std::printf("  %-52s %9.1f us %7.1f TFLOP/s\n", c.name, ms * 1e3, flops / ms / 1e9);
  }
  std::printf("\n%s\n", failures ? "SOME CHECKS FAILED" : "all checks passed");
  return failures ? 1 : 0;
}

}  // namespace
}  // namespace hayate::cuda

int main(int argc, char** argv) {
  return hayate::cuda::run(argc, argv);
}
