// The batched CUDA backend against the CPU: direct steps (mixed chunked
// prefill and decode, shuffled block tables, decode graphs) vs the fp32 paged
// CPU backend and the single-sequence CPU backend's logits; long contexts;
// bad input; then the Engine over the GPU backend: batched ids equal
// single-request ids, also across preemption with a tiny pool. The samplers:
// test_batch_sampling.cpp. Fixture: batch_fixture.h.
#include <tuple>

#include "cuda/paged_attention.cuh"
#include "gpu/batch_fixture.h"

namespace hayate::batch_test {
namespace {

// One sequence of the direct-step test: its prompt, the chunk size its prompt
// goes in, and its (shuffled) blocks.
struct Seq {
  std::vector<int32_t> tokens;  // prompt, then generated ids (teacher forced: the CPU's)
  int prompt_len = 0, chunk = 0, done = 0;
  std::vector<int32_t> table;
  hayate::test::OwnedSeq oracle;  // one sequence through the CPU backend, the same tokens
};

// Sequence id's next piece of a step: a prompt chunk of up to `chunk` tokens
// from `done`, else one decode token; sampled (greedy) once the prompt is in.
BatchSeq next_piece(uint64_t id, const std::vector<int32_t>& tokens,
                    const std::vector<int32_t>& table, int done, int prompt, int chunk,
                    const SamplingParams& greedy) {
  BatchSeq bs;
  bs.seq_id = id;
  bs.start_pos = done;
  const int n = done < prompt ? std::min(chunk, prompt - done) : 1;
  bs.tokens = std::span<const int32_t>(tokens.data() + done, size_t(n));
  bs.block_table = table;
  bs.sample = done + n >= prompt;
  bs.sampling = &greedy;
  bs.sample_step = uint64_t(tokens.size() - size_t(prompt));
  return bs;
}

// Both matmul paths of the decode graphs: cuBLAS everywhere, and batched
// GEMVs for every bucket of this test (max 8 seqs; bucket 1 included,
// reached when only one sequence is left) and for the
// eager steps' products of up to 8 rows. cuBLAS runs as the backend's lt path
// (tuned cuBLASLt, QKV and gate/up in T), as ex16 (cublasGemmEx, same T
// outputs) and as the previous ex path (cublasGemmEx, fp32 outputs).
class BatchStepsTest : public BatchBackendTest,
                       public ::testing::WithParamInterface<std::tuple<DecodeMatmul, const char*>> {
};

TEST_P(BatchStepsTest, StepsMatchCpuPagedAndSingleSequence) {
  const EnvGuard gemm("HAYATE_BATCH_GEMM", std::get<1>(GetParam()));
  std::unique_ptr<BatchBackend> gpu =
      make_cuda_batch_backend(*model_, options(80), std::get<0>(GetParam()));
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
      b.seqs.push_back(next_piece(i, s.tokens, s.table, s.done, s.prompt_len, s.chunk, greedy));
      b.num_tokens += int(b.seqs.back().tokens.size());
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
      s.oracle->forward(bs.tokens, bs.start_pos, ref);
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

INSTANTIATE_TEST_SUITE_P(
    Matmul, BatchStepsTest,
    ::testing::Values(std::tuple{DecodeMatmul::kCublas, "lt"},
                      std::tuple{DecodeMatmul::kCublas, "ex16"},
                      std::tuple{DecodeMatmul::kCublas, "ex"},
                      std::tuple{DecodeMatmul::kGemv, "lt"}),
    [](const ::testing::TestParamInfo<std::tuple<DecodeMatmul, const char*>>& i) {
      const std::string gemm = std::get<1>(i.param);
      return std::string(std::get<0>(i.param) == DecodeMatmul::kGemv ? "Gemv" : "Cublas") +
             (gemm == "ex"     ? "Ex"
              : gemm == "ex16" ? "Ex16"
                               : "");
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
  std::vector<hayate::test::OwnedSeq> oracle;
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
      oracle[size_t(i)]->forward(s.tokens, s.start_pos, ref);
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

// Large buckets: the whole-row decode graph (one split slot per (row, kv
// head); picked while every row has at most paged_decode_whole_row_keys keys)
// and the regular graph (picked once one row is longer), against the fp32
// paged CPU backend's logits, with the graph each all-decode step replayed
// (cuda_batch_graph_replays). dummy:tiny has 2 kv heads, so 139-141 rows
// (bucket 160) are many pairs; max_model_len 4096 puts the bound (2048)
// below the tables' reach. Steps: the short prompts; 3 all-decode steps
// (whole-row graph); a 2100-token prompt in 3 chunks beside the decodes
// (eager); 3 all-decode steps with that row (regular graph); a late prompt
// beside the long row's decode (eager, split attention bounded by its longest
// row: 2 slots, the long row in 2 splits and combined); one more all-decode step.
TEST_F(BatchBackendTest, ManyRowsWholeRowAndSplitGraphs) {
  constexpr int kLen = 4096, kShort = 139, kLong = 2100, kLate = 30;
  ASSERT_EQ(model_->config.num_kv_heads, 2);
  ASSERT_EQ(cuda::paged_decode_whole_row_keys(kShort, 2), 2048);
  BatchBackendOptions o = options(600, 160, kLen);
  o.max_num_batched_tokens = 2048;
  std::unique_ptr<BatchBackend> gpu = make_cuda_batch_backend(*model_, o);
  std::unique_ptr<BatchBackend> cpu = make_cpu_paged_backend(*model_, o);
  std::mt19937 rng(31);
  std::vector<int32_t> blocks(600);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  struct S {
    std::vector<int32_t> tokens, table;
    int prompt = 0, done = 0;
  };
  std::vector<S> seqs(kShort + 2);
  for (size_t i = 0, next = 0; i < seqs.size(); ++i) {
    S& s = seqs[i];
    s.prompt = i < kShort ? 2 + int(rng() % 11) : i == kShort ? kLong : kLate;
    for (int t = 0; t < s.prompt; ++t) s.tokens.push_back(int32_t(rng() % kVocab));
    const size_t need = size_t(s.prompt + 16 + 15) / 16;  // 11 decode tokens, with room
    s.table.assign(blocks.begin() + long(next), blocks.begin() + long(next + need));
    next += need;
  }
  const SamplingParams greedy;
  // One step over seqs [0, n): prompt chunks of up to `chunk` tokens, else
  // one decode token; `want`: the graph replay counts after it.
  const auto step = [&](size_t n, int chunk, const std::string& what,
                        const DecodeGraphReplays& want) {
    Batch b;
    for (size_t i = 0; i < n; ++i) {
      S& s = seqs[i];
      b.seqs.push_back(next_piece(i, s.tokens, s.table, s.done, s.prompt, chunk, greedy));
      b.num_tokens += int(b.seqs.back().tokens.size());
    }
    std::vector<int32_t> g(n, -1), c(n, -1);
    gpu->step(b, g);
    const std::vector<float> glog = cuda_batch_last_logits(*gpu);
    const DecodeGraphReplays got = cuda_batch_graph_replays(*gpu);
    EXPECT_EQ(got.whole_rows, want.whole_rows) << what << ": whole-row graph replays";
    EXPECT_EQ(got.regular, want.regular) << what << ": regular graph replays";
    EXPECT_EQ(got.short_attn, 0) << what;
    cpu->step(b, c);
    std::vector<float> ref(kVocab);
    for (size_t i = 0, j = 0; i < n; ++i) {
      seqs[i].done += int(b.seqs[i].tokens.size());
      if (!b.seqs[i].sample) continue;
      cpu->last_logits_row(int(j), ref);
      const std::string where = what + " seq " + std::to_string(i);
      EXPECT_LT(rel_err(glog, j, ref), 2e-2) << where << ": logits differ";
      check_pick(g[i], ref, where);
      seqs[i].tokens.push_back(c[i]);  // teacher forcing: both continue from the CPU's id
      ++j;
    }
  };
  int64_t whole = 0, regular = 0;
  step(kShort, 64, "prompts", {});
  for (int k = 0; k < 3; ++k)
    step(kShort, 1, "whole-row graph step " + std::to_string(k), {regular, 0, ++whole});
  for (int k = 0; k < 3; ++k)
    step(kShort + 1, 1024, "long prompt chunk " + std::to_string(k), {regular, 0, whole});
  ASSERT_EQ(seqs[kShort].done, kLong);
  for (int k = 0; k < 3; ++k)
    step(kShort + 1, 1, "regular graph step " + std::to_string(k), {++regular, 0, whole});
  step(kShort + 2, 64, "late prompt beside the long row's decode", {regular, 0, whole});
  step(kShort + 2, 1, "regular graph step 3", {++regular, 0, whole});
  EXPECT_EQ(seqs[kShort].done, kLong + 5);
  EXPECT_EQ(seqs[kShort + 1].done, kLate + 1);
}

TEST_F(BatchBackendTest, SampledIdsStayInTheTopK) {
  std::unique_ptr<BatchBackend> gpu = make_cuda_batch_backend(*model_, options(40));
  hayate::test::OwnedSeq oracle = single_cpu();
  std::vector<int32_t> prompt = {5, 17, 300, 42, 7, 99, 12};
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 5;
  p.seed = 77;
  std::vector<int32_t> table = {3, 9, 1};
  std::vector<float> ref(kVocab);
  oracle->forward(prompt, 0, ref);
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

// ---- through the Engine ------------------------------------------------------------

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
    hayate::test::OwnedSeq oracle = single_cpu();
    std::vector<float> ref(kVocab);
    oracle->forward(prompts[i], 0, ref);
    for (int t = 0; t < kTokens; ++t) {
      check_pick(alone[i][size_t(t)], ref,
                 "request " + std::to_string(i) + " id " + std::to_string(t));
      const int32_t id = alone[i][size_t(t)];
      oracle->forward(std::span(&id, 1), int(prompts[i].size()) + t, ref);
    }
  }
}

}  // namespace
}  // namespace hayate::batch_test
