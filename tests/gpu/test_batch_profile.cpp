// profile_step() on the GPU: every kernel of a step attributed to an op of
// the cost model (engine/step_profile.h), the persistent kernel's phases from
// its timestamps, the times adding up, and the step computing what step()
// computes. Fixture: batch_fixture.h.
#include <algorithm>
#include <cstring>
#include <set>

#include "core/check.h"
#include "engine/step_profile.h"
#include "gpu/batch_fixture.h"
#include "model/model.h"

namespace hayate::batch_test {
namespace {

// `n` sequences of 20 prefilled tokens, decoding one token each at position 20.
struct Decode {
  std::vector<std::vector<int32_t>> tables, tokens;
  Batch batch;
  SamplingParams greedy;
};

void prefill(BatchBackend& be, Decode& d, int n) {
  d.tables.resize(size_t(n));
  d.tokens.resize(size_t(n));
  std::vector<int32_t> sink(1);
  for (int s = 0; s < n; ++s) {
    d.tables[size_t(s)] = {2 * s, 2 * s + 1};
    std::vector<int32_t> prompt(20);
    for (int t = 0; t < 20; ++t) prompt[size_t(t)] = (7 * s + 3 * t) % kVocab;
    Batch b;
    b.seqs.push_back({uint64_t(s), prompt, 0, d.tables[size_t(s)]});
    b.num_tokens = 20;
    be.step(b, sink);
    d.tokens[size_t(s)] = {int32_t((11 * s + 5) % kVocab)};
  }
  for (int s = 0; s < n; ++s) {
    BatchSeq q{uint64_t(s), d.tokens[size_t(s)], 20, d.tables[size_t(s)], true};
    q.sampling = &d.greedy;
    d.batch.seqs.push_back(q);
  }
  d.batch.num_tokens = n;
}

void expect_attributed(const StepTimes& t, const std::vector<OpCost>& costs) {
  ASSERT_TRUE(t.measured) << t.why;
  double sum = 0;
  std::set<std::string> names;
  for (const OpTime& o : t.ops) {
    EXPECT_NE(o.name, "other") << "a kernel of no op's kind";
    sum += o.ms;
    names.insert(o.name);
  }
  EXPECT_NEAR(sum, t.kernel_ms, 1e-6 * t.kernel_ms + 1e-9);
  EXPECT_LE(t.kernel_ms, t.span_ms * 1.0001);  // one stream: kernels do not overlap
  for (const OpCost& c : costs) {
    EXPECT_TRUE(names.count(c.name)) << "no time for " << c.name;
  }
  for (const OpTime& o : t.ops) {
    if (o.name != "entry_exit") {
      EXPECT_GT(o.ms, 0.0) << o.name;
    }
  }
}

TEST_F(BatchBackendTest, ProfileAttributesEveryKernelOfADecodeStep) {
  for (int n : {1, 5}) {
    std::unique_ptr<BatchBackend> gpu = make_cuda_batch_backend(*model_, options(16), DecodeMatmul::kAuto);
    Decode d;
    prefill(*gpu, d, n);
    std::vector<int32_t> plain(static_cast<size_t>(n)), profiled(static_cast<size_t>(n));
    gpu->step(d.batch, plain);
    const StepTimes t = gpu->profile_step(d.batch, profiled);
    EXPECT_EQ(plain, profiled) << "the profiled step computes what step() does";
    std::vector<OpCost> costs = step_costs(model_->config, StepDtypes{2, 2, 4}, d.batch);
    if (t.persistent) {
      EXPECT_EQ(n, 1);
      costs = fuse_persistent(costs);
      bool barrier = false;
      for (const OpTime& o : t.ops) barrier |= o.name == op::kBarrier;
      EXPECT_TRUE(barrier) << "the persistent kernel's barrier waits";
    }
    expect_attributed(t, costs);
    EXPECT_FALSE(t.plan.empty());
  }
}

TEST_F(BatchBackendTest, ProfileAttributesEveryKernelOfAMixedStep) {
  std::unique_ptr<BatchBackend> gpu = make_cuda_batch_backend(*model_, options(16), DecodeMatmul::kAuto);
  Decode d;
  prefill(*gpu, d, 3);
  std::vector<int32_t> chunk(40), table{10, 11, 12};
  for (int t = 0; t < 40; ++t) chunk[size_t(t)] = (13 * t + 1) % kVocab;
  BatchSeq p{99, chunk, 0, table, true};
  p.sampling = &d.greedy;
  d.batch.seqs.push_back(p);
  d.batch.num_tokens += 40;
  std::vector<int32_t> out(4);
  const StepTimes t = gpu->profile_step(d.batch, out);
  EXPECT_FALSE(t.persistent);
  expect_attributed(t, step_costs(model_->config, StepDtypes{2, 2, 4}, d.batch));
}

// FP8 weights (W8A8), with 16-bit and e4m3 KV pools, on the batched path:
// the quantizing norm and SiLU*mul, the attention output's quantization and
// the FP8 GEMMs (the small hand GEMM at these rows) all go to their ops, and
// the plan names each product's kernel.
TEST_F(BatchBackendTest, ProfileAttributesEveryKernelOfAnFp8DecodeStep) {
  Model m = *model_;
  apply_quantization(m, "fp8");
  for (const KvCacheDtype kv : {KvCacheDtype::kAuto, KvCacheDtype::kFp8}) {
    SCOPED_TRACE(kv == KvCacheDtype::kFp8 ? "e4m3 KV" : "16-bit KV");
    BatchBackendOptions o = options(16);
    o.kv_cache_dtype = kv;
    std::unique_ptr<BatchBackend> gpu = make_cuda_batch_backend(m, o, DecodeMatmul::kCublas);
    Decode d;
    prefill(*gpu, d, 5);
    std::vector<int32_t> plain(5), profiled(5);
    gpu->step(d.batch, plain);
    const StepTimes t = gpu->profile_step(d.batch, profiled);
    EXPECT_EQ(plain, profiled);
    EXPECT_FALSE(t.persistent);
    StepDtypes dt{2, 2, 4};
    dt.linear = 1;
    dt.kv = kv == KvCacheDtype::kFp8 ? 1 : 0;
    expect_attributed(t, step_costs(m.config, dt, d.batch));
    // The plan names the kernel of each FP8 product at these rows.
    const auto mm = std::find_if(t.plan.begin(), t.plan.end(),
                                 [](const auto& e) { return e.first == "matmul"; });
    ASSERT_NE(mm, t.plan.end());
    for (const char* op : {"qkv ", "o ", "gate_up ", "down "}) {
      const size_t at = mm->second.find(cat(": ", op)) != std::string::npos
                            ? mm->second.find(cat(": ", op))
                            : mm->second.find(cat(", ", op));
      ASSERT_NE(at, std::string::npos) << op << "missing from: " << mm->second;
      const std::string kernel = mm->second.substr(at + 2 + std::strlen(op), 8);
      EXPECT_TRUE(kernel.rfind("cuBLASLt", 0) == 0 || kernel.rfind("wgmma", 0) == 0 ||
                  kernel.rfind("mma.sync", 0) == 0)
          << op << "runs \"" << kernel << "\" in: " << mm->second;
    }
  }
}

}  // namespace
}  // namespace hayate::batch_test
