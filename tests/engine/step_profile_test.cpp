// The step's cost model and the attribution of kernels to its ops
// (engine/step_profile.h), on a two-layer model of small shapes whose bytes
// and FLOPs are written out here by hand.
#include "engine/step_profile.h"

#include <gtest/gtest.h>

namespace hayate {
namespace {

ModelConfig small() {
  ModelConfig c;
  c.vocab_size = 100;
  c.hidden_size = 8;
  c.intermediate_size = 16;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 4;
  return c;
}

const OpCost& find(const std::vector<OpCost>& ops, const std::string& name) {
  for (const OpCost& o : ops)
    if (o.name == name) return o;
  ADD_FAILURE() << "no op " << name;
  return ops.front();
}

// Two sequences: one decoding at position 5, one prefilling 3 tokens from 2.
struct Step {
  std::vector<int32_t> a{7}, b{1, 2, 3}, table{0, 1};
  SamplingParams greedy;
  Batch batch;
  Step() {
    BatchSeq d{1, a, 5, table, true}, p{2, b, 2, table, true};
    d.sampling = p.sampling = &greedy;
    batch.seqs = {d, p};
    batch.num_tokens = 4;
  }
};

TEST(StepCosts, CountBytesAndFlopsFromTheShapes) {
  Step s;
  const StepDtypes dt{2, 2, 4};
  const std::vector<OpCost> ops = step_costs(small(), dt, s.batch);
  const double N = 4, D = 8, I = 16, qkv = 2 * 4 + 2 * 4, V = 100, L = 2, m = 2;
  const OpCost& q = find(ops, op::kQkv);
  EXPECT_EQ(q.calls, 2);
  EXPECT_TRUE(q.per_layer);
  EXPECT_DOUBLE_EQ(q.bytes_read, L * (qkv * D * 2 + N * D * 2));
  EXPECT_DOUBLE_EQ(q.bytes_written, L * N * qkv * 2);
  EXPECT_DOUBLE_EQ(q.flops, L * 2 * N * qkv * D);
  // o_proj and down accumulate into the fp32 residual: it is read and written.
  const OpCost& down = find(ops, op::kDown);
  EXPECT_DOUBLE_EQ(down.bytes_read, L * (D * I * 2 + N * I * 2 + N * D * 4));
  EXPECT_DOUBLE_EQ(down.bytes_written, L * N * D * 4);
  // Attention: keys 6 + 5 read (each sequence's rows once), (query, key) pairs 6 + (3+4+5).
  const OpCost& att = find(ops, op::kAttention);
  EXPECT_DOUBLE_EQ(att.bytes_read, L * ((6 + 5) * 2 * 4 * 2 + N * 8 * 4));
  EXPECT_DOUBLE_EQ(att.flops, L * 4 * (6 + 12) * 8);
  // One logits row per sampling sequence.
  const OpCost& lm = find(ops, op::kLmHead);
  EXPECT_FALSE(lm.per_layer);
  EXPECT_DOUBLE_EQ(lm.flops, 2 * m * V * D);
  EXPECT_DOUBLE_EQ(lm.bytes_written, m * V * 4);
  EXPECT_DOUBLE_EQ(floor_ms(lm, 1.0, {}), 1e3 * (lm.bytes_read + lm.bytes_written) / 1e9);
  EXPECT_DOUBLE_EQ(floor_ms(lm, 0.0, {1.0, 0.0}), 1e3 * lm.flops / 1e12);
}

// FP8 linears (W8A8) move one byte per weight and per input element; the
// LM head stays 16-bit; an e4m3 pool halves the K/V bytes.
TEST(StepCosts, Fp8LinearsAndPoolsCountOneByte) {
  Step s;
  StepDtypes dt{2, 2, 4};
  dt.linear = 1;
  dt.kv = 1;
  const std::vector<OpCost> ops = step_costs(small(), dt, s.batch);
  const double N = 4, D = 8, I = 16, qkv = 2 * 4 + 2 * 4, V = 100, L = 2;
  EXPECT_DOUBLE_EQ(find(ops, op::kQkv).bytes_read, L * (qkv * D * 1 + N * D * 1));
  EXPECT_DOUBLE_EQ(find(ops, op::kDown).bytes_read, L * (D * I * 1 + N * I * 1 + N * D * 4));
  EXPECT_DOUBLE_EQ(find(ops, op::kLmHead).bytes_read, V * D * 2 + 2 * D * 2);
  EXPECT_DOUBLE_EQ(find(ops, op::kAttention).bytes_read, L * ((6 + 5) * 2 * 4 * 1 + N * 8 * 4));
  EXPECT_DOUBLE_EQ(find(ops, op::kRopeKv).bytes_written, L * (N * 8 * 4 + 2 * N * 4 * 1));
  // The linears' math floors take the FP8 rate; the LM head and attention
  // the 16-bit one.
  const MatmulRates rates{1.0, 4.0};
  for (const char* name : {op::kQkv, op::kOProj, op::kGateUp, op::kDown}) {
    const OpCost& c = find(ops, name);
    EXPECT_TRUE(c.fp8) << name;
    EXPECT_DOUBLE_EQ(floor_ms(c, 0.0, rates), 1e3 * c.flops / 4e12) << name;
  }
  for (const char* name : {op::kLmHead, op::kAttention}) {
    const OpCost& c = find(ops, name);
    EXPECT_FALSE(c.fp8) << name;
    EXPECT_DOUBLE_EQ(floor_ms(c, 0.0, rates), 1e3 * c.flops / 1e12) << name;
  }
  const std::vector<OpCost> f = fuse_persistent(ops);
  EXPECT_TRUE(find(f, op::kQkv).fp8);
  EXPECT_TRUE(find(f, op::kGateUp).fp8);
  EXPECT_FALSE(find(f, op::kLmHead).fp8);
  // 16-bit linears: every op at the one rate.
  for (const OpCost& c : step_costs(small(), StepDtypes{2, 2, 4}, s.batch))
    EXPECT_FALSE(c.fp8) << c.name;
}

TEST(StepCosts, PersistentPhasesDropTheFusedIntermediates) {
  Step s;
  const std::vector<OpCost> ops = step_costs(small(), StepDtypes{2, 2, 4}, s.batch);
  const std::vector<OpCost> f = fuse_persistent(ops);
  for (const OpCost& o : f) {
    EXPECT_NE(o.name, op::kAttnNorm);
    EXPECT_NE(o.name, op::kRopeKv);
    EXPECT_NE(o.name, op::kSiluMul);
    EXPECT_NE(o.name, op::kFinalNorm);
  }
  const OpCost &n = find(ops, op::kAttnNorm), &q = find(ops, op::kQkv), &r = find(ops, op::kRopeKv);
  const OpCost& fq = find(f, op::kQkv);
  // norm -> qkv -> rope: the normalized rows and the raw q|k|v never reach memory.
  EXPECT_DOUBLE_EQ(fq.bytes_read, n.bytes_read + q.bytes_read + r.bytes_read - n.bytes_written -
                                      q.bytes_written);
  EXPECT_DOUBLE_EQ(fq.bytes_written, r.bytes_written);
  EXPECT_DOUBLE_EQ(fq.flops, n.flops + q.flops + r.flops);
  EXPECT_EQ(fq.calls, 2);
}

TEST(StepCosts, KernelsGoToTheirOpsInForwardOrder) {
  EXPECT_EQ(kernel_kind("hayate::cuda::rope_kv_kernel<4, __half, __half>"), "rope_kv");
  EXPECT_EQ(kernel_kind("hayate::cuda::paged_decode_combine_kernel<__half>"), "attention");
  EXPECT_EQ(kernel_kind("hayate::cuda::decode_persistent_kernel<__half, 128>"), "persistent");
  EXPECT_EQ(kernel_kind("nvjet_sm90_hsh_176x128_64x5_1x2_h_bz_TNN"), "gemm");
  EXPECT_EQ(kernel_kind("hayate::cuda::gemv_batched_kernel<__half, 4>"), "gemm");
  EXPECT_EQ(kernel_kind("hayate::cuda::something_new_kernel"), "unknown");
  // FP8: the quantizing norm and SiLU*mul, the quantization of the attention
  // output (o_proj's input: its GEMM's), the small GEMM.
  EXPECT_EQ(kernel_kind("hayate::cuda::(anonymous namespace)::rmsnorm_fp8_kernel<4, 8, __half>"),
            "norm");
  EXPECT_EQ(kernel_kind("hayate::cuda::(anonymous namespace)::quantize_rows_kernel<hayate::cuda::"
                        "(anonymous namespace)::RowSiluMul<__half>>"),
            "act");
  EXPECT_EQ(kernel_kind("hayate::cuda::(anonymous namespace)::quantize_rows_in_registers_kernel<8, "
                        "hayate::cuda::(anonymous namespace)::RowSiluMul<__half>>"),
            "act");
  EXPECT_EQ(kernel_kind("hayate::cuda::(anonymous namespace)::quantize_rows_in_registers_kernel<2, "
                        "hayate::cuda::(anonymous namespace)::RowT<__half>>"),
            "gemm");
  EXPECT_EQ(kernel_kind("hayate::cuda::(anonymous namespace)::quantize_rows_kernel<hayate::cuda::"
                        "(anonymous namespace)::RowT<__half>>"),
            "gemm");
  EXPECT_EQ(kernel_kind("hayate::cuda::(anonymous namespace)::gemm_fp8_small_kernel<8, 1>"),
            "gemm");
  EXPECT_EQ(kernel_kind("hayate::cuda::(anonymous namespace)::gemm_fp8_wgmma_kernel<64, float>"),
            "gemm");
  Step s;
  const std::vector<OpCost> calls = expand_calls(step_costs(small(), StepDtypes{}, s.batch), true);
  ASSERT_EQ(calls.size(), 1 + 1 + 2 * 9 + 3u);
  EXPECT_EQ(calls[0].name, op::kStepMeta);
  EXPECT_EQ(calls[2].name, op::kAttnNorm);
  EXPECT_EQ(calls[11].name, op::kAttnNorm);  // layer 1
  std::vector<std::pair<std::string, double>> k;
  const auto add = [&](const char* kind, double ms) { k.push_back({kind, ms}); };
  add("meta", 1);
  add("embed", 2);
  for (int l = 0; l < 2; ++l) {
    add("norm", 3);
    add("gemm", 4);
    add("gemm", 0.5);  // a split-K reduction: the same op
    add("rope_kv", 5);
    add("attention", 6);
    add("attention", 1);  // the combine
    add("gemm", 7);
    add("norm", 3);
    add("gemm", 8);
    add("act", 9);
    add("gemm", 10);
  }
  add("norm", 1);
  add("gemm", 11);
  add("sample", 12);
  add("unknown", 13);
  const std::vector<OpTime> t = attribute(k, calls);
  const auto ms = [&](const std::string& n) {
    for (const OpTime& o : t)
      if (o.name == n) return o.ms;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(ms(op::kQkv), 2 * 4.5);
  EXPECT_DOUBLE_EQ(ms(op::kAttention), 2 * 7.0);
  EXPECT_DOUBLE_EQ(ms(op::kOProj), 2 * 7.0);
  EXPECT_DOUBLE_EQ(ms(op::kAttnNorm), 6);
  EXPECT_DOUBLE_EQ(ms(op::kFfnNorm), 6);
  EXPECT_DOUBLE_EQ(ms(op::kDown), 20);
  EXPECT_DOUBLE_EQ(ms(op::kFinalNorm), 1);
  EXPECT_DOUBLE_EQ(ms(op::kLmHead), 11);
  EXPECT_DOUBLE_EQ(ms(op::kSample), 12);
  EXPECT_DOUBLE_EQ(ms("other"), 13);
  double sum = 0;
  for (const OpTime& o : t) sum += o.ms;
  EXPECT_DOUBLE_EQ(sum, 1 + 2 + 2 * 56.5 + 1 + 11 + 12 + 13);
}

TEST(StepCosts, OpClockLapsOnlyWhenArmed) {
  OpClock c;
  c.lap(op::kQkv);
  EXPECT_TRUE(c.take().empty());
  c.arm();
  c.lap(op::kQkv);
  c.lap(op::kDown);
  c.lap(op::kQkv);
  const std::vector<OpTime> t = c.take();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, op::kQkv);
  EXPECT_EQ(t[0].kernels, 2);
  c.lap(op::kQkv);
  EXPECT_TRUE(c.take().empty());
}

}  // namespace
}  // namespace hayate
