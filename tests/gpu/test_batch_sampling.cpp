// The batched sampler (sampling_batched.cu) against the host sampler: on
// random logits, against the per-row sampler, on the step's own logits in both
// sampler modes (HAYATE_BATCH_SAMPLER), and sampled requests batched vs alone
// through the Engine. Fixture: batch_fixture.h.
#include "gpu/batch_fixture.h"

namespace hayate::batch_test {
namespace {

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

// The sampler inside the backend, in each mode (HAYATE_BATCH_SAMPLER): every
// pick of a step, greedy and not, against the host sampler over that step's own
// logits. Eight sequences: one eager prefill step (m = 8, rows in batch order),
// decode steps through the bucket-8 graph (logits row = sequence slot), then
// one sequence alone (m = 1, bucket 1).
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
      hayate::test::OwnedSeq oracle = single_cpu();
      std::vector<float> ref(kVocab);
      oracle->forward(prompts[i], 0, ref);
      for (int t = 0; t < kTokens; ++t) {
        verdict[r].push_back(judge(ref, ps[i], uint64_t(t), ids[size_t(t)], 2e-2));
        off += verdict[r].back() == 2;
        ++draws;
        oracle->forward(std::span(&ids[size_t(t)], 1), int(prompts[i].size()) + t, ref);
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

// Grammar masks on the device (sample_masked): every pick of a step, greedy
// and not, is an allowed id and the host sampler's over the allowed ids of
// that step's logits (sample_token_masked's rule: the draw over the allowed
// ids only); the logits of other ids are -inf afterwards. Sequences without
// a mask in the same steps keep their own sampler. An eager prefill step,
// decode steps through the bucket-8 graph, then one sequence alone (bucket 1).
TEST_F(BatchBackendTest, MaskedPicksAreAllowedAndFollowTheHostSampler) {
  std::unique_ptr<BatchBackend> gpu = make_cuda_batch_backend(*model_, options(40, 8));
  const uint64_t seed = cuda::test::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  constexpr int kSeqs = 8;
  const size_t W = size_t(gpu->mask_words());
  std::vector<std::vector<int32_t>> toks(kSeqs), tables(kSeqs);
  std::vector<SamplingParams> ps;
  std::vector<int> prompt_len(kSeqs), done(kSeqs, 0);
  for (int i = 0; i < kSeqs; ++i) {
    prompt_len[size_t(i)] = 1 + int(rng() % 20);
    for (int t = 0; t < prompt_len[size_t(i)]; ++t) toks[size_t(i)].push_back(int32_t(rng() % kVocab));
    for (int b = 0; b < 3; ++b) tables[size_t(i)].push_back(int32_t(39 - 3 * i - b));
    ps.push_back(random_params(rng, i, kVocab, true));
  }
  int draws = 0, near = 0;
  for (int step = 0; step < 12; ++step) {
    Batch b;
    std::vector<uint32_t> masks;
    std::vector<size_t> masked;  // batch indices
    for (int i = 0; i < kSeqs; ++i) {
      if (step >= 8 && i != 3) continue;
      BatchSeq s;
      s.seq_id = uint64_t(i);
      s.start_pos = done[size_t(i)];
      s.tokens = std::span<const int32_t>(toks[size_t(i)]).subspan(size_t(done[size_t(i)]));
      s.block_table = tables[size_t(i)];
      s.sample = true;
      s.sampling = &ps[size_t(i)];
      s.sample_step = uint64_t(toks[size_t(i)].size() - size_t(prompt_len[size_t(i)]));
      s.masked = i != 5;  // sequence 5 samples freely beside the masked ones
      if (s.masked) {
        masked.push_back(b.seqs.size());
        const size_t at = masks.size();
        masks.resize(at + W, 0u);
        const int every = 1 + int(rng() % 40);  // from all ids to one in 40
        for (int t = int(rng() % size_t(every)); t < kVocab; t += every)
          masks[at + size_t(t) / 32] |= 1u << (t % 32);
      }
      b.seqs.push_back(s);
      b.num_tokens += int(s.tokens.size());
    }
    std::vector<int32_t> out(b.seqs.size(), -1);
    gpu->launch(b);
    gpu->sample_masked(masks);
    gpu->finish(out);
    const std::vector<float> glog = cuda_batch_last_logits(*gpu);
    for (size_t k = 0; k < masked.size(); ++k) {
      const size_t j = masked[k];
      const uint32_t* bits = masks.data() + k * W;
      const std::span<const float> row = std::span(glog).subspan(j * kVocab, kVocab);
      std::vector<float> kept;
      std::vector<int32_t> ids;
      for (int t = 0; t < kVocab; ++t) {
        const bool ok = (bits[t / 32] >> (t % 32)) & 1u;
        if (!ok) {
          EXPECT_EQ(row[size_t(t)], -INFINITY) << "step " << step << " row " << j << " id " << t;
          continue;
        }
        kept.push_back(row[size_t(t)]);
        ids.push_back(t);
      }
      const auto at = std::find(ids.begin(), ids.end(), out[j]);
      ASSERT_NE(at, ids.end()) << "step " << step << ": id " << out[j] << " is not allowed";
      const int v = judge(kept, *b.seqs[j].sampling, b.seqs[j].sample_step,
                          int32_t(at - ids.begin()), 1e-5);
      EXPECT_NE(v, 2) << "step " << step << " row " << j;
      near += v == 1;
      ++draws;
    }
    for (size_t j = 0; j < b.seqs.size(); ++j) {
      const int i = int(b.seqs[j].seq_id);
      done[size_t(i)] += int(b.seqs[j].tokens.size());
      toks[size_t(i)].push_back(out[j] >= 0 && out[j] < kVocab ? out[j] : 0);
    }
  }
  EXPECT_LE(near, draws / 4) << "of " << draws << " draws off the host's id within rounding";
}

}  // namespace
}  // namespace hayate::batch_test
