// The batched CUDA backend against the CPU: direct steps (mixed chunked
// prefill and decode, shuffled block tables, decode graphs) vs the fp32 paged
// CPU backend and the single-sequence CPU backend's logits; then the Engine
// over the GPU backend: batched ids equal single-request ids, also across
// preemption with a tiny pool. The batched sampler (sampling_batched.cu)
// against the host sampler: on random logits, on the step's own logits (both
// sampler modes), and sampled requests batched vs alone through the Engine.
// Model: dummy:tiny with the vocabulary cut to 512 ids (as the engine tests),
// fp16 on the GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "cpu/cpu_backend.h"
#include "cpu/cpu_paged_backend.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_batch_backend.h"
#include "cuda/ops.h"
#include "engine/engine.h"
#include "engine/sampling.h"
#include "gpu/gpu_test_util.h"
#include "model/model.h"

namespace hayate {
namespace {

constexpr int kVocab = 512;
constexpr int kMaxLen = 256;

class BatchBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (cuda_device_count() == 0) return;
    model_ = new Model(load_model("dummy:tiny", 7, HAYATE_ASSETS_DIR));
    // Same weights, fewer vocabulary rows (dummy values depend on the index only).
    model_->config.vocab_size = kVocab;
    model_->config.eos_ids = {};
    for (WeightSource& w : model_->weights)
      if (w.name == "embed" || w.name == "lm_head") w.shape[0] = kVocab;
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  }

  static BatchBackendOptions options(int num_blocks, int max_seqs = 8, int max_len = kMaxLen) {
    BatchBackendOptions o;
    o.num_blocks = num_blocks;
    o.block_size = 16;
    o.max_model_len = max_len;
    o.max_num_seqs = max_seqs;
    o.max_num_batched_tokens = 256;
    o.dtype = DType::F16;
    return o;
  }

  static std::unique_ptr<Backend> single_cpu(int max_len = kMaxLen) {
    BackendOptions o;
    o.max_context = max_len;
    return make_cpu_backend(*model_, o);
  }

  static int32_t argmax(std::span<const float> v) {
    return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
  }

  // The GPU's greedy id must be the CPU's, unless the CPU's top-2 margin is
  // within 16-bit rounding (1e-2 of the logit scale); then the two must be that close.
  static void check_pick(int32_t gid, std::span<const float> c, const std::string& where) {
    const int32_t want = argmax(c);
    if (gid == want) return;
    ASSERT_GE(gid, 0);
    ASSERT_LT(gid, kVocab);
    const float scale = std::fabs(*std::max_element(
        c.begin(), c.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }));
    EXPECT_LT(c[size_t(want)] - c[size_t(gid)], 1e-2f * scale)
        << where << ": " << gid << " vs " << want;
  }

  static Model* model_;
};

Model* BatchBackendTest::model_ = nullptr;

// Norm-wise relative error of GPU logits row j against the fp32 reference.
double rel_err(const std::vector<float>& gpu, size_t j, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t v = 0; v < ref.size(); ++v) {
    const double d = gpu[j * ref.size() + v] - ref[v];
    num += d * d;
    den += double(ref[v]) * ref[v];
  }
  return std::sqrt(num / den);
}

// Whether `id` is the host sampler's pick from logits `l` (engine/sampling.h),
// up to rounding: 0 = the host's id; 1 = another id, but the draw lands within
// `tol` (a share of the kept mass) of that id's interval, allowing a top-p or
// min-p cut within `tol` of its threshold (the device sums weights in float,
// the host in double; through the engine, fp16 logits against fp32 ones);
// greedy: a logit gap within tol of the logit scale. 2 = a real mismatch.
int judge(std::span<const float> l, const SamplingParams& p, uint64_t step, int32_t id,
          double tol) {
  const int32_t want = sample_token(l, p, step);
  if (id == want) return 0;
  const size_t V = l.size();
  if (id < 0 || size_t(id) >= V) return 2;
  if (p.greedy()) {
    float scale = 0.0f;
    for (float x : l) scale = std::max(scale, std::fabs(x));
    return l[size_t(want)] - l[size_t(id)] <= tol * scale ? 1 : 2;
  }
  // The host's order (logit / T descending, ties by id) and its probabilities over the top-k.
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  auto scaled = [&](int32_t i) { return l[size_t(i)] / p.temperature; };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return scaled(a) > scaled(b); });
  const size_t k = p.top_k > 0 ? std::min(size_t(p.top_k), V) : V;
  std::vector<double> prob(k), cum(k);
  double total = 0.0;
  for (size_t i = 0; i < k; ++i)
    total += prob[i] = std::exp(double(scaled(order[i])) - double(scaled(order[0])));
  for (size_t i = 0; i < k; ++i) cum[i] = (i ? cum[i - 1] : 0.0) + (prob[i] /= total);
  const size_t pos = size_t(std::find(order.begin(), order.begin() + long(k), id) - order.begin());
  if (pos == k) return 2;  // outside the top-k
  // Ends of the kept prefix that rounding allows: top-p's, then min-p's.
  std::vector<size_t> ends_p, ends_m;
  for (size_t n = 1; n <= k; ++n) {
    if (p.top_p >= 1.0f
            ? n == k
            : (n == 1 || cum[n - 2] < p.top_p + tol) && (n == k || cum[n - 1] >= p.top_p - tol))
      ends_p.push_back(n);
    if (p.min_p <= 0.0f ? n == k
                        : prob[n - 1] >= (p.min_p - tol) * prob[0] &&
                              (n == k || prob[n] < (p.min_p + tol) * prob[0]))
      ends_m.push_back(n);
  }
  const double u = uniform01(p.seed, step, 0);
  for (size_t a : ends_p)
    for (size_t b : ends_m) {
      const size_t n = std::min(a, b);
      if (pos >= n) continue;
      const double mass = cum[n - 1], target = u * mass;
      const double lo = pos ? cum[pos - 1] : 0.0, hi = cum[pos];
      const double dist = target < lo ? lo - target : target >= hi ? target - hi : 0.0;
      if (dist <= tol * mass) return 1;
    }
  return 2;
}

// Per-row sampling parameters: a mix of every filter (row % 4 == 0: greedy when
// `with_greedy`), fresh seeds and steps.
SamplingParams random_params(std::mt19937_64& rng, int row, int vocab, bool with_greedy) {
  const float temps[] = {0.5f, 0.8f, 1.0f, 1.3f}, top_ps[] = {1.0f, 0.95f, 0.7f, 0.3f};
  const float min_ps[] = {0.0f, 0.0f, 0.02f, 0.1f};
  const int top_ks[] = {0, 1, 7, 40, 300, vocab + 3};
  SamplingParams p;
  if (with_greedy && row % 4 == 0) return p;
  p.temperature = temps[rng() % 4];
  p.top_p = top_ps[rng() % 4];
  p.min_p = min_ps[rng() % 4];
  p.top_k = top_ks[rng() % 6];
  p.seed = rng();
  return p;
}

// sample_batched alone, on fresh random logits [max_rows, vocab]: a shuffled
// subset of rows (n = 1, max_rows and between), each with its own parameters,
// seed and step, against the host sampler; rows not sampled keep their poison.
TEST(BatchedSamplerTest, MatchesHostSamplerPerRow) {
  HAYATE_REQUIRE_GPU();
  const uint64_t seed = cuda::test::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  constexpr int kRows = 12;
  int draws = 0, near = 0;
  for (int vocab : {128256, 512, 7}) {
    std::vector<float> l = cuda::test::random_vec(size_t(kRows) * vocab, rng, -4.0f, 4.0f);
    for (int i = 0; i < kRows * std::min(vocab / 8, 50); ++i)  // a few likely tokens per row
      l[rng() % l.size()] += 6.0f;
    cuda::test::Dev<float> dl(l);
    cuda::test::Dev<char> ws(cuda::batched_sampling_workspace_bytes(vocab, kRows));
    cuda::batched_sampling_init(ws.get(), vocab, kRows, nullptr);
    for (int n : {1, kRows, 5, kRows}) {
      std::vector<int32_t> rows(kRows);
      std::iota(rows.begin(), rows.end(), 0);
      std::shuffle(rows.begin(), rows.end(), rng);
      rows.resize(size_t(n));
      std::vector<SamplingParams> ps;
      std::vector<cuda::StepState> st;
      for (int b = 0; b < n; ++b) {
        ps.push_back(random_params(rng, b, vocab, false));
        const SamplingParams& p = ps.back();
        st.push_back({0, 0, p.seed, rng() % 1000, p.temperature, p.top_p, p.min_p, p.top_k});
      }
      cuda::test::Dev<int32_t> drows(rows), out(kRows);  // out poisoned: -1
      cuda::test::Dev<cuda::StepState> dst(st);
      cuda::sample_batched(dl.get(), vocab, drows.get(), dst.get(), n, kRows, ws.get(), out.get(),
                           nullptr);
      const std::vector<int32_t> got = out.download();
      for (int r = 0; r < kRows; ++r) {
        const auto it = std::find(rows.begin(), rows.end(), r);
        if (it == rows.end()) {
          EXPECT_EQ(got[size_t(r)], -1) << "row " << r << " was not sampled but written";
          continue;
        }
        const size_t b = size_t(it - rows.begin());
        const int v = judge(std::span(l).subspan(size_t(r) * vocab, size_t(vocab)), ps[b],
                            st[b].step, got[size_t(r)], 1e-5);
        EXPECT_NE(v, 2) << "vocab " << vocab << " n " << n << " row " << r << " T "
                        << ps[b].temperature << " top_k " << ps[b].top_k << " top_p " << ps[b].top_p
                        << " min_p " << ps[b].min_p << ": got " << got[size_t(r)] << ", host "
                        << sample_token(std::span(l).subspan(size_t(r) * vocab, size_t(vocab)),
                                        ps[b], st[b].step);
        ++draws;
        near += v == 1;
      }
    }
  }
  EXPECT_LE(near, draws / 4) << "of " << draws << " draws off the host's id within rounding";
}

// Both samplers on the same rows [n, 128256] (n = 1 .. 256, T = 1, no filter:
// the walk covers each row): the same sort order and the same walk, so the
// same ids exactly; and their times (device events), printed for the docs.
TEST(BatchedSamplerTest, SameIdsAsPerRowSamplerAndTimes) {
  HAYATE_REQUIRE_GPU();
  const uint64_t seed = cuda::test::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  constexpr int kVocab128k = 128256, kMax = 256;
  std::vector<float> row = cuda::test::random_vec(kVocab128k, rng, -4.0f, 4.0f);
  cuda::test::Dev<float> logits(size_t(kMax) * kVocab128k);
  for (int r = 0; r < kMax; ++r) {
    std::rotate(row.begin(), row.begin() + 1000, row.end());  // rows differ
    HAYATE_CUDA_CHECK(cudaMemcpy(logits.get() + size_t(r) * kVocab128k, row.data(),
                                 row.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  std::vector<cuda::StepState> st(kMax);
  std::vector<int32_t> rows(kMax);
  for (int r = 0; r < kMax; ++r) {
    st[size_t(r)] = {0, 0, rng(), uint64_t(r), 1.0f, 1.0f, 0.0f, 0};
    rows[size_t(r)] = r;
  }
  cuda::test::Dev<cuda::StepState> dst(st);
  cuda::test::Dev<int32_t> drows(rows), a(kMax), b(kMax);
  cuda::test::Dev<char> ws(cuda::batched_sampling_workspace_bytes(kVocab128k, kMax));
  cuda::test::Dev<char> ws1(cuda::sampling_workspace_bytes(kVocab128k));
  HAYATE_CUDA_CHECK(cudaMemset(ws1.get(), 0, ws1.size()));
  cuda::batched_sampling_init(ws.get(), kVocab128k, kMax, nullptr);
  cudaEvent_t e[3];
  for (cudaEvent_t& x : e) HAYATE_CUDA_CHECK(cudaEventCreate(&x));
  for (int n : {1, 8, 64, 256}) {
    a.poison();
    b.poison();
    for (int rep = 0; rep < 2; ++rep) {  // the second is timed (the first loads the modules)
      HAYATE_CUDA_CHECK(cudaEventRecord(e[0]));
      for (int r = 0; r < n; ++r)
        cuda::sample(logits.get() + size_t(r) * kVocab128k, kVocab128k, dst.get() + r, false,
                     ws1.get(), a.get() + r, nullptr, false);
      HAYATE_CUDA_CHECK(cudaEventRecord(e[1]));
      cuda::sample_batched(logits.get(), kVocab128k, drows.get(), dst.get(), n, kMax, ws.get(),
                           b.get(), nullptr);
      HAYATE_CUDA_CHECK(cudaEventRecord(e[2]));
    }
    HAYATE_CUDA_CHECK(cudaEventSynchronize(e[2]));
    float rows_ms = 0.0f, batched_ms = 0.0f;
    HAYATE_CUDA_CHECK(cudaEventElapsedTime(&rows_ms, e[0], e[1]));
    HAYATE_CUDA_CHECK(cudaEventElapsedTime(&batched_ms, e[1], e[2]));
    std::printf("sampling %3d rows of %d: one by one %8.1f us, batched %8.1f us\n", n, kVocab128k,
                rows_ms * 1e3f, batched_ms * 1e3f);
    const std::vector<int32_t> ga = a.download(), gb = b.download();
    for (int r = 0; r < kMax; ++r) {
      if (r >= n) {
        EXPECT_EQ(gb[size_t(r)], -1) << "n " << n << " row " << r << " written";
        continue;
      }
      EXPECT_GE(ga[size_t(r)], 0);
      EXPECT_EQ(gb[size_t(r)], ga[size_t(r)]) << "n " << n << " row " << r;
    }
  }
  for (cudaEvent_t x : e) HAYATE_CUDA_CHECK(cudaEventDestroy(x));
}

// One sequence of the direct-step test: its prompt, the chunk size its prompt
// goes in, and its (shuffled) blocks.
struct Seq {
  std::vector<int32_t> tokens;  // prompt, then generated ids (teacher forced: the CPU's)
  int prompt_len = 0, chunk = 0, done = 0;
  std::vector<int32_t> table;
  std::unique_ptr<Backend> oracle;  // single-sequence CPU backend fed the same tokens
};

// Both matmul paths of the decode graphs: cuBLAS everywhere, and batched
// GEMVs for every bucket of this test (max 8 seqs; bucket 1 = the fused
// single-stream GEMVs, reached when only one sequence is left) and for the
// eager steps' products of up to 8 rows.
class BatchStepsTest : public BatchBackendTest,
                       public ::testing::WithParamInterface<DecodeMatmul> {};

TEST_P(BatchStepsTest, StepsMatchCpuPagedAndSingleSequence) {
  std::unique_ptr<BatchBackend> gpu = make_cuda_batch_backend(*model_, options(80), GetParam());
  std::unique_ptr<BatchBackend> cpu = make_cpu_paged_backend(*model_, options(80));
  ASSERT_EQ(gpu->num_blocks(), 80);
  std::mt19937 rng(1234);
  std::vector<int32_t> blocks(80);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);  // tables point all over the pool

  const int lens[] = {1, 9, 16, 37, 70, 130}, chunks[] = {1, 4, 16, 64, 23, 48};
  std::vector<Seq> seqs(6);
  int next_block = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Seq& s = seqs[i];
    s.prompt_len = lens[i];
    s.chunk = chunks[i];
    for (int t = 0; t < s.prompt_len; ++t) s.tokens.push_back(int32_t(rng() % kVocab));
    const int need = (s.prompt_len + 24 + 15) / 16;
    s.table.assign(blocks.begin() + next_block, blocks.begin() + next_block + need);
    next_block += need;
    s.oracle = single_cpu();
  }
  const SamplingParams greedy;
  int graph_steps = 0, mixed_steps = 0, single_steps = 0;
  for (int step = 0; step < 40; ++step) {
    Batch b;
    std::vector<size_t> idx;
    for (size_t i = 0; i < seqs.size(); ++i) {
      Seq& s = seqs[i];
      if (int(s.tokens.size()) >= s.prompt_len + 20) continue;  // finished
      BatchSeq bs;
      bs.seq_id = i;
      bs.start_pos = s.done;
      const int n = s.done < s.prompt_len ? std::min(s.chunk, s.prompt_len - s.done) : 1;
      bs.tokens = std::span<const int32_t>(s.tokens.data() + s.done, size_t(n));
      bs.block_table = s.table;
      bs.sample = s.done + n >= s.prompt_len;
      bs.sampling = &greedy;
      bs.sample_step = uint64_t(s.tokens.size() - size_t(s.prompt_len));
      b.seqs.push_back(bs);
      b.num_tokens += n;
      idx.push_back(i);
    }
    if (b.seqs.empty()) break;
    (b.all_decode() ? graph_steps : mixed_steps)++;
    if (b.all_decode() && b.seqs.size() == 1) ++single_steps;
    std::vector<int32_t> g(b.seqs.size(), -1), c(b.seqs.size(), -1);
    gpu->step(b, g);
    const std::vector<float> glog = cuda_batch_last_logits(*gpu);
    cpu->step(b, c);
    int sampled_j = 0;
    for (size_t j = 0; j < b.seqs.size(); ++j) {
      Seq& s = seqs[idx[j]];
      const BatchSeq& bs = b.seqs[j];
      std::vector<float> ref(kVocab);
      s.oracle->forward(bs.tokens, bs.start_pos, ref, false);
      s.done += int(bs.tokens.size());
      if (!bs.sample) continue;
      const std::string where = "step " + std::to_string(step) + " seq " + std::to_string(idx[j]);
      // The paged CPU backend is the single-sequence one, batched: identical ids.
      EXPECT_EQ(c[j], argmax(ref)) << where;
      // GPU logits close to the fp32 reference (norm-wise), ids equal up to near-ties.
      EXPECT_LT(rel_err(glog, size_t(sampled_j), ref), 2e-2) << where << ": logits differ";
      check_pick(g[j], ref, where);
      ++sampled_j;
      s.tokens.push_back(c[j]);  // teacher forcing: both continue from the CPU's id
    }
  }
  EXPECT_GT(graph_steps, 5) << "decode graphs were not exercised";
  EXPECT_GE(mixed_steps, 3) << "chunked prefill was not exercised";
  EXPECT_GT(single_steps, 0) << "the batch-1 graph was not exercised";
}

INSTANTIATE_TEST_SUITE_P(Matmul, BatchStepsTest,
                         ::testing::Values(DecodeMatmul::kCublas, DecodeMatmul::kGemv),
                         [](const ::testing::TestParamInfo<DecodeMatmul>& i) {
                           return std::string(i.param == DecodeMatmul::kGemv ? "Gemv" : "Cublas");
                         });

// Contexts past one decode partition (512 keys with max_model_len 2048): the
// split-KV decode kernel and its combine, in graph replays of bucket 2.
TEST_F(BatchBackendTest, LongContextDecodeSplitsOverKvLength) {
  constexpr int kLong = 2048;
  BatchBackendOptions o = options(160, 4, kLong);
  o.max_num_batched_tokens = 512;  // a 256-token chunk plus a decode
  std::unique_ptr<BatchBackend> gpu = make_cuda_batch_backend(*model_, o);
  std::mt19937 rng(5);
  const int lens[] = {1100, 5};
  std::vector<std::vector<int32_t>> toks(2), tables(2);
  std::vector<std::unique_ptr<Backend>> oracle;
  for (int i = 0; i < 2; ++i) {
    for (int t = 0; t < lens[i]; ++t) toks[size_t(i)].push_back(int32_t(rng() % kVocab));
    for (int b = 0; b < 75; ++b) tables[size_t(i)].push_back(int32_t(i == 0 ? 159 - b : b));
    oracle.push_back(single_cpu(kLong));
  }
  const SamplingParams greedy;
  std::vector<int> done(2, 0);
  for (int step = 0; step < 14; ++step) {
    Batch b;
    for (int i = 0; i < 2; ++i) {
      const int len = int(toks[size_t(i)].size()), d = done[size_t(i)];
      BatchSeq s;
      s.seq_id = uint64_t(i);
      s.start_pos = d;
      const int n = d < lens[i] ? std::min(256, len - d) : 1;
      s.tokens = std::span<const int32_t>(toks[size_t(i)].data() + d, size_t(n));
      s.block_table = tables[size_t(i)];
      s.sample = d + n == len;
      s.sampling = &greedy;
      b.seqs.push_back(s);
      b.num_tokens += n;
    }
    std::vector<int32_t> g(2, -1);
    gpu->step(b, g);
    const std::vector<float> glog = cuda_batch_last_logits(*gpu);
    size_t j = 0;
    for (int i = 0; i < 2; ++i) {
      const BatchSeq& s = b.seqs[size_t(i)];
      std::vector<float> ref(kVocab);
      oracle[size_t(i)]->forward(s.tokens, s.start_pos, ref, false);
      done[size_t(i)] += int(s.tokens.size());
      if (!s.sample) continue;
      const std::string where = "step " + std::to_string(step) + " seq " + std::to_string(i);
      EXPECT_LT(rel_err(glog, j++, ref), 2e-2) << where;
      check_pick(g[size_t(i)], ref, where);
      toks[size_t(i)].push_back(argmax(ref));
    }
  }
  EXPECT_GT(done[0], 1100 + 5) << "the long sequence never decoded";
}

TEST_F(BatchBackendTest, SampledIdsStayInTheTopK) {
  std::unique_ptr<BatchBackend> gpu = make_cuda_batch_backend(*model_, options(40));
  std::unique_ptr<Backend> oracle = single_cpu();
  std::vector<int32_t> prompt = {5, 17, 300, 42, 7, 99, 12};
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 5;
  p.seed = 77;
  std::vector<int32_t> table = {3, 9, 1};
  std::vector<float> ref(kVocab);
  oracle->forward(prompt, 0, ref, false);
  // Two identical sequences in one batch, different steps: each draw must be
  // one of the oracle's top 6 (5 plus one for rounding at the boundary).
  std::vector<int32_t> table2 = {4, 10, 2};
  Batch b;
  for (int k = 0; k < 2; ++k) {
    BatchSeq s;
    s.seq_id = uint64_t(k);
    s.tokens = prompt;
    s.block_table = k == 0 ? table : table2;
    s.sample = true;
    s.sampling = &p;
    s.sample_step = uint64_t(k);
    b.seqs.push_back(s);
    b.num_tokens += int(prompt.size());
  }
  std::vector<int32_t> order(kVocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int a, int c) { return ref[size_t(a)] > ref[size_t(c)]; });
  std::vector<int32_t> top(order.begin(), order.begin() + 6);
  for (int rep = 0; rep < 4; ++rep) {
    std::vector<int32_t> out(2, -1);
    gpu->step(b, out);
    for (int32_t id : out) EXPECT_NE(std::find(top.begin(), top.end(), id), top.end()) << id;
  }
}

TEST_F(BatchBackendTest, BadInputIsAnError) {
  std::unique_ptr<BatchBackend> gpu = make_cuda_batch_backend(*model_, options(20));
  std::vector<int32_t> toks = {1, 2, 3}, table = {0};
  SamplingParams p;
  Batch b;
  BatchSeq s;
  s.tokens = toks;
  s.block_table = table;
  s.sample = true;
  s.sampling = &p;
  b.seqs.push_back(s);
  b.num_tokens = 3;
  std::vector<int32_t> out(1);
  std::vector<int32_t> bad_tok = {1, kVocab, 3};
  b.seqs[0].tokens = bad_tok;
  EXPECT_THROW(gpu->step(b, out), Error);
  b.seqs[0].tokens = toks;
  std::vector<int32_t> bad_table = {20};
  b.seqs[0].block_table = bad_table;
  EXPECT_THROW(gpu->step(b, out), Error);
  b.seqs[0].block_table = table;
  b.seqs[0].start_pos = kMaxLen - 1;
  EXPECT_THROW(gpu->step(b, out), Error);
  b.seqs[0].start_pos = 0;
  gpu->step(b, out);  // still usable
  EXPECT_GE(out[0], 0);
}

// The sampler inside the backend, in each mode (HAYATE_BATCH_SAMPLER): every
// pick of a step, greedy and not, against the host sampler over that step's own
// logits. Eight sequences: one eager prefill step (m = 8, rows in batch order),
// decode steps through the bucket-8 graph (logits row = sequence slot), then
// one sequence alone (m = 1, bucket 1).
// Sets an environment variable for its lifetime (the lead may run the whole
// suite with HAYATE_BATCH_SAMPLER=rows; it is restored for the later tests).
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (old) old_ = old;
    EXPECT_EQ(setenv(name, value, 1), 0);
  }
  ~EnvGuard() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

class BatchSamplerModeTest : public BatchBackendTest,
                             public ::testing::WithParamInterface<const char*> {};

TEST_P(BatchSamplerModeTest, PicksMatchHostSamplerOnTheStepsLogits) {
  std::unique_ptr<BatchBackend> gpu;
  {
    EnvGuard env("HAYATE_BATCH_SAMPLER", GetParam());
    gpu = make_cuda_batch_backend(*model_, options(40, 8));
  }
  const uint64_t seed = cuda::test::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " sampler " << GetParam());
  std::mt19937_64 rng(seed);
  constexpr int kSeqs = 8;
  std::vector<std::vector<int32_t>> toks(kSeqs), tables(kSeqs);
  std::vector<SamplingParams> ps;
  std::vector<int> prompt_len(kSeqs);
  for (int i = 0; i < kSeqs; ++i) {
    prompt_len[size_t(i)] = 1 + int(rng() % 20);
    for (int t = 0; t < prompt_len[size_t(i)]; ++t)
      toks[size_t(i)].push_back(int32_t(rng() % kVocab));
    for (int b = 0; b < 3; ++b) tables[size_t(i)].push_back(int32_t(39 - 3 * i - b));
    ps.push_back(random_params(rng, i, kVocab, true));
  }
  int draws = 0, near = 0, non_greedy = 0;
  std::vector<int> done(kSeqs, 0);
  for (int step = 0; step < 12; ++step) {
    Batch b;
    for (int i = 0; i < kSeqs; ++i) {
      if (step >= 8 && i != 3) continue;  // the last steps: sequence 3 alone
      BatchSeq s;
      s.seq_id = uint64_t(i);
      s.start_pos = done[size_t(i)];
      s.tokens = std::span<const int32_t>(toks[size_t(i)]).subspan(size_t(done[size_t(i)]));
      s.block_table = tables[size_t(i)];
      s.sample = true;
      s.sampling = &ps[size_t(i)];
      s.sample_step = uint64_t(toks[size_t(i)].size() - size_t(prompt_len[size_t(i)]));
      b.seqs.push_back(s);
      b.num_tokens += int(s.tokens.size());
    }
    std::vector<int32_t> out(b.seqs.size(), -1);
    gpu->step(b, out);
    const std::vector<float> glog = cuda_batch_last_logits(*gpu);
    for (size_t j = 0; j < b.seqs.size(); ++j) {
      const int i = int(b.seqs[j].seq_id);
      const SamplingParams& p = ps[size_t(i)];
      const int v = judge(std::span(glog).subspan(j * kVocab, kVocab), p, b.seqs[j].sample_step,
                          out[j], 1e-5);
      EXPECT_NE(v, 2) << "step " << step << " seq " << i << " T " << p.temperature << " top_k "
                      << p.top_k << " top_p " << p.top_p << " min_p " << p.min_p << ": got "
                      << out[j];
      ++draws;
      near += v == 1;
      non_greedy += !p.greedy();
      done[size_t(i)] += int(b.seqs[j].tokens.size());
      toks[size_t(i)].push_back(out[j] >= 0 && out[j] < kVocab ? out[j] : 0);
    }
  }
  EXPECT_GT(non_greedy, 40) << "too few non-greedy draws";
  EXPECT_LE(near, draws / 4) << "of " << draws << " draws off the host's id within rounding";
}

INSTANTIATE_TEST_SUITE_P(Sampler, BatchSamplerModeTest,
                         ::testing::Values("batched", "rows", "auto"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

TEST_F(BatchBackendTest, BadSamplerModeIsAnError) {
  EnvGuard env("HAYATE_BATCH_SAMPLER", "fast");
  EXPECT_THROW(make_cuda_batch_backend(*model_, options(20)), Error);
}

// ---- through the Engine ------------------------------------------------------------

std::map<RequestId, std::vector<int32_t>> run_engine(
    BatchBackend& backend, const std::vector<std::vector<int32_t>>& prompts, int max_tokens,
    int max_seqs, uint64_t* preemptions, const std::vector<SamplingParams>& params = {}) {
  EngineOptions eo;
  eo.max_num_seqs = max_seqs;
  eo.max_num_batched_tokens = 64;  // prompts go in chunks, mixed with decodes
  Engine engine(backend, nullptr, eo);
  std::map<RequestId, std::vector<int32_t>> out;
  std::vector<RequestId> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineRequest r;
    r.prompt = prompts[i];
    if (i < params.size()) r.sampling = params[i];
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    auto* sink = &out;
    r.on_event = [sink](const EngineEvent& e) {
      auto& v = (*sink)[e.id];
      v.insert(v.end(), e.token_ids.begin(), e.token_ids.end());
    };
    ids.push_back(engine.submit(std::move(r)));
  }
  engine.run_until_idle();
  if (preemptions) *preemptions = engine.stats().preemptions_total;
  std::map<RequestId, std::vector<int32_t>> by_index;
  for (size_t i = 0; i < ids.size(); ++i) by_index[i] = out[ids[i]];
  return by_index;
}

TEST_F(BatchBackendTest, EngineBatchedEqualsSingleAcrossPreemption) {
  std::mt19937 rng(99);
  const int lens[] = {3, 20, 45, 70, 12, 33};
  std::vector<std::vector<int32_t>> prompts;
  for (int n : lens) {
    std::vector<int32_t> p;
    for (int t = 0; t < n; ++t) p.push_back(int32_t(rng() % kVocab));
    prompts.push_back(p);
  }
  const int kTokens = 24;
  // Alone: one request at a time on a roomy pool.
  std::unique_ptr<BatchBackend> roomy = make_cuda_batch_backend(*model_, options(64, 4));
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) alone.push_back(run_engine(*roomy, {p}, kTokens, 4, nullptr)[0]);
  // Together on 14 blocks of 16: four sequences need up to 24, so the engine preempts.
  std::unique_ptr<BatchBackend> tiny = make_cuda_batch_backend(*model_, options(14, 4, 14 * 16));
  uint64_t preemptions = 0;
  auto together = run_engine(*tiny, prompts, kTokens, 4, &preemptions);
  EXPECT_GT(preemptions, 0u) << "the pool was meant to run out";
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(int(alone[i].size()), kTokens) << "request " << i;
    EXPECT_EQ(together[i], alone[i]) << "request " << i;
    // And both follow the fp32 single-sequence CPU backend (up to near-ties).
    std::unique_ptr<Backend> oracle = single_cpu();
    std::vector<float> ref(kVocab);
    oracle->forward(prompts[i], 0, ref, false);
    for (int t = 0; t < kTokens; ++t) {
      check_pick(alone[i][size_t(t)], ref,
                 "request " + std::to_string(i) + " id " + std::to_string(t));
      const int32_t id = alone[i][size_t(t)];
      oracle->forward(std::span(&id, 1), int(prompts[i].size()) + t, ref, false);
    }
  }
}

// Sampled requests (each its own temperature / top-k / top-p / min-p / seed,
// one greedy) batched on a tiny pool (preemption) vs each alone, through the
// batched sampler. A draw depends only on (seed, step) and the row's logits,
// but logits of different batch shapes (graph buckets, matmul paths) differ
// by rounding, so a pair may part
// at a draw near an interval's edge: there both ids must be plausible, and at
// least one request must match all the way. Every id of both runs follows the
// host sampler over the fp32 CPU oracle's logits (teacher forced) within 2 %
// of the kept mass, but for a few (fp16 logits against fp32 ones).
TEST_F(BatchBackendTest, EngineSampledBatchedEqualsSingle) {
  std::mt19937_64 rng(4321);
  const int lens[] = {3, 20, 45, 70, 12, 33};
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SamplingParams> ps;
  for (int n : lens) {
    std::vector<int32_t> p;
    for (int t = 0; t < n; ++t) p.push_back(int32_t(rng() % kVocab));
    prompts.push_back(p);
    ps.push_back(random_params(rng, int(ps.size()) + 1, kVocab, true));  // request 3: greedy
  }
  const int kTokens = 24;
  std::unique_ptr<BatchBackend> roomy, tiny;
  {
    EnvGuard env("HAYATE_BATCH_SAMPLER", "batched");  // auto may take rows at this vocab
    roomy = make_cuda_batch_backend(*model_, options(64, 4));
    tiny = make_cuda_batch_backend(*model_, options(14, 4, 14 * 16));
  }
  std::vector<std::vector<int32_t>> alone;
  for (size_t i = 0; i < prompts.size(); ++i)
    alone.push_back(run_engine(*roomy, {prompts[i]}, kTokens, 4, nullptr, {ps[i]})[0]);
  uint64_t preemptions = 0;
  auto together = run_engine(*tiny, prompts, kTokens, 4, &preemptions, ps);
  EXPECT_GT(preemptions, 0u) << "the pool was meant to run out";
  int parted = 0, draws = 0, off = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t>* runs[] = {&alone[i], &together[i]};
    std::vector<int> verdict[2];
    for (int r = 0; r < 2; ++r) {
      const std::vector<int32_t>& ids = *runs[r];
      ASSERT_EQ(int(ids.size()), kTokens) << "request " << i << " run " << r;
      std::unique_ptr<Backend> oracle = single_cpu();
      std::vector<float> ref(kVocab);
      oracle->forward(prompts[i], 0, ref, false);
      for (int t = 0; t < kTokens; ++t) {
        verdict[r].push_back(judge(ref, ps[i], uint64_t(t), ids[size_t(t)], 2e-2));
        off += verdict[r].back() == 2;
        ++draws;
        oracle->forward(std::span(&ids[size_t(t)], 1), int(prompts[i].size()) + t, ref, false);
      }
    }
    const auto at = std::mismatch(alone[i].begin(), alone[i].end(), together[i].begin());
    if (at.first == alone[i].end()) continue;
    const size_t t = size_t(at.first - alone[i].begin());
    ++parted;
    EXPECT_NE(verdict[0][t], 2) << "request " << i << " parts at id " << t;
    EXPECT_NE(verdict[1][t], 2) << "request " << i << " parts at id " << t;
  }
  EXPECT_LT(parted, int(prompts.size())) << "no request matched its lone run";
  EXPECT_LE(off, draws / 20) << "ids off the host sampler over fp32 logits";
  std::printf("sampled engine run: %d of %zu requests parted from their lone run\n", parted,
              prompts.size());
}

}  // namespace
}  // namespace hayate
