// Batched forward over a paged KV cache, fp32 on the CPU. One step:
//   all tokens of all sequences go through the GEMMs together (x: [N, hidden]),
//   while rope, the KV write and attention run per sequence over its blocks.
// K and V of layer l live in pools of [num_blocks, block_size, kv_dim] floats;
// position p of a sequence is row p % block_size of block table[p / block_size].
// With --tensor-parallel-size N the step runs on N simulated ranks, threads
// of this process, each holding its slice of the weights and of the KV pools
// (model/tensor_parallel.h) and summing partial outputs through an in-memory
// all-reduce (engine/communicator.h): the plan a GPU rank would follow.
#include "cpu/cpu_paged_backend.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/fp8.h"
#include "core/host_memory.h"
#include "cpu/cpu_weights.h"
#include "cpu/ops.h"
#include "engine/communicator.h"
#include "engine/step_profile.h"
#include "model/model.h"

namespace hayate {
namespace {

class CpuPagedBackend final : public BatchBackend {
 public:
  CpuPagedBackend(const Model& model, const BatchBackendOptions& o) : c_(model.config) {
    HAYATE_CHECK(o.block_size >= 1, "--block-size must be >= 1, got ", o.block_size);
    HAYATE_CHECK(o.num_blocks >= 0, "--num-kv-blocks must be >= 0, got ", o.num_blocks);
    HAYATE_CHECK(o.max_model_len >= 0, "--max-model-len must be >= 0, got ", o.max_model_len);
    max_model_len_ =
        o.max_model_len > 0 ? o.max_model_len : std::min(c_.max_position_embeddings, 8192);
    HAYATE_CHECK(max_model_len_ <= c_.max_position_embeddings, "--max-model-len ", max_model_len_,
                 " exceeds the model's max_position_embeddings ", c_.max_position_embeddings);
    block_size_ = o.block_size;
    kv_fp8_ = o.kv_cache_dtype == KvCacheDtype::kFp8;
    num_blocks_ =
        o.num_blocks > 0 ? o.num_blocks : 4 * ((max_model_len_ + block_size_ - 1) / block_size_);

    HAYATE_CHECK(o.max_logit_rows >= 0, "max_logit_rows must be >= 0, got ", o.max_logit_rows);
    max_logit_rows_ = std::max({o.max_logit_rows, o.max_num_seqs, 1});
    const int tp = o.tensor_parallel_size;
    check_tensor_parallel(c_, tp);
    {  // fp32 weights (twice with ranks: the full set stays until every rank has its slice)
       // and the K and V pools, before any of it is allocated
      uint64_t floats = 0;
      for (const WeightSource& w : model.weights) floats += uint64_t(w.numel());
      floats *= tp > 1 ? 2 : 1;
      floats += 2ull * pool_floats(c_.kv_dim());
      check_host_memory(floats * sizeof(float), host_memory_available(),
                        cat("the cpu backend (", model.spec, ": fp32 weights and KV pool)"));
    }
    CpuWeights full = load_cpu_weights(model, o.on_load_progress);
    weight_bytes_ = full.floats_per_token(c_) * sizeof(float);
    ranks_.resize(size_t(tp));
    for (int r = 0; r < tp; ++r) {
      Rank& R = ranks_[size_t(r)];
      R.shard = tp_shard(c_, tp, r);
      R.w = tp == 1 ? std::move(full) : shard_cpu_weights(full, c_, R.shard);
      R.k_pool.assign(pool_floats(R.shard.kv_dim(c_)), 0.0f);
      R.v_pool.assign(pool_floats(R.shard.kv_dim(c_)), 0.0f);
      R.vocab_widths.resize(size_t(tp));
    }
    for (int r = 0; r < tp; ++r)
      for (int s = 0; s < tp; ++s) ranks_[size_t(r)].vocab_widths[size_t(s)] = ranks_[size_t(s)].shard.vocab;
    group_ = std::make_unique<LocalGroup>(tp);
  }

  std::string name() const override { return "cpu"; }
  const ModelConfig& config() const override { return c_; }
  int num_blocks() const override { return num_blocks_; }
  int block_size() const override { return block_size_; }
  int max_model_len() const override { return max_model_len_; }

  // Runs the step at once; finish() hands out its ids in launch order.
  void launch(const Batch& batch) override {
    validate_batch(batch, max_model_len_, block_size_, num_blocks_, max_logit_rows_,
                   int(prev_sampled_.size()));
    std::vector<int32_t> sampled(batch.seqs.size(), -1);
    if (!batch.copies.empty()) {  // copy on write, before the forward reads or writes them
      std::vector<int32_t> pairs;
      for (const BlockCopy& c : batch.copies) pairs.insert(pairs.end(), {c.src, c.dst});
      const int n = int(batch.copies.size());
      for (Rank& R : ranks_) {
        const int64_t elems = int64_t(block_size_) * R.shard.kv_dim(c_);
        cpu::copy_blocks(R.k_pool.data(), c_.num_layers, num_blocks_, elems, pairs.data(), n);
        cpu::copy_blocks(R.v_pool.data(), c_.num_layers, num_blocks_, elems, pairs.data(), n);
      }
    }
    HAYATE_CHECK(masked_.empty(), "batch step: launch() before sample_masked() of the last step");
    run(batch, sampled);
    prev_sampled_ = sampled;
    unfinished_.push_back(std::move(sampled));
    HAYATE_CHECK(unfinished_.size() <= 2, "batch step: more than two steps launched");
  }

  // The masked rows of the last launched step: their logits under the masks,
  // then the sampler of every other row.
  void sample_masked(std::span<const uint32_t> masks) override {
    const size_t V = size_t(c_.vocab_size), W = size_t(mask_words());
    HAYATE_CHECK(!masked_.empty() && masks.size() == masked_.size() * W, "sample_masked: ",
                 masks.size(), " mask words for ", masked_.size(), " masked sequences");
    for (size_t k = 0; k < masked_.size(); ++k) {
      const Masked& m = masked_[k];
      const int32_t id = sample_token_masked(
          std::span<const float>(last_logits_).subspan(m.row * V, V), masks.subspan(k * W, W),
          m.sampling, m.step);
      unfinished_.back()[m.seq] = prev_sampled_[m.seq] = id;  // -1: the mask allows none
    }
    masked_.clear();
  }

  void finish(std::span<int32_t> sampled) override {
    HAYATE_CHECK(!unfinished_.empty(), "batch step: finish() without a launched step");
    HAYATE_CHECK(unfinished_.size() > 1 || masked_.empty(),
                 "batch step: finish() before sample_masked() of the step");
    const std::vector<int32_t>& ids = unfinished_.front();
    HAYATE_CHECK(sampled.size() == ids.size(), "batch step: ", sampled.size(),
                 " output slots for ", ids.size(), " sequences");
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= 0) sampled[i] = ids[i];
    unfinished_.pop_front();
  }

  void run(const Batch& batch, std::span<int32_t> sampled) {
    const int V = c_.vocab_size;
    // The step's token ids, flattened ([N]); offsets[i]: row of seqs[i]'s
    // first token in the [N, *] activations.
    std::vector<int> offsets(batch.seqs.size());
    std::vector<int32_t> ids;
    ids.reserve(size_t(batch.num_tokens));
    for (size_t i = 0; i < batch.seqs.size(); ++i) {
      const BatchSeq& s = batch.seqs[i];
      offsets[i] = int(ids.size());
      if (s.prev_slot >= 0) {  // the previous step's id, which this backend has already
        const int32_t id = prev_sampled_[size_t(s.prev_slot)];
        HAYATE_CHECK(id >= 0, "batch step: sequence ", s.seq_id, " takes its token from slot ",
                     s.prev_slot, ", which did not sample");
        ids.push_back(id);
        continue;
      }
      ids.insert(ids.end(), s.tokens.begin(), s.tokens.end());
    }
    for (size_t t = 0; t < ids.size(); ++t)
      HAYATE_CHECK(ids[t] >= 0 && ids[t] < V, "token id ", ids[t], " at index ", t,
                   " is outside the vocabulary [0, ", V, ")");
    rows_ = logit_rows(batch);
    all_logits_.clear();
    for (const BatchSeq& q : batch.seqs) all_logits_.push_back(q.all_logits);
    last_logits_.assign(rows_.token_row.size() * size_t(V), 0.0f);

    if (ranks_.size() == 1) {
      forward(0, batch, ids, offsets);
    } else {  // a thread per rank; a failing rank aborts the group's collectives
      std::mutex mu;
      std::exception_ptr first;
      const auto rank_main = [&](int r) {
        try {
          forward(r, batch, ids, offsets);
        } catch (...) {
          std::lock_guard lock(mu);
          if (!first) first = std::current_exception();
          group_->abort();
        }
      };
      std::vector<std::thread> threads;
      for (int r = 1; r < int(ranks_.size()); ++r) threads.emplace_back(rank_main, r);
      rank_main(0);
      for (std::thread& t : threads) t.join();
      if (first) {
        group_->reset();
        std::rethrow_exception(first);
      }
    }

    for (size_t i = 0, j = 0; i < batch.seqs.size(); ++i) {
      const BatchSeq& s = batch.seqs[i];
      if (!s.sample) continue;
      const size_t row = size_t(rows_.sampled[j++]);
      if (s.masked) {  // sampled by sample_masked()
        masked_.push_back({i, row, *s.sampling, s.sample_step});
        continue;
      }
      sampled[i] = sample_token(std::span<const float>(last_logits_).subspan(row * V, size_t(V)),
                                *s.sampling, s.sample_step);
    }
    clock_.lap(op::kSample);
  }

  // Rank r's forward of the step: every rank runs the same ops on its slice,
  // with the same collectives in the same order. Rank 0 gathers the logits
  // into last_logits_ and keeps the op clock.
  void forward(int r, const Batch& batch, std::span<const int32_t> ids,
               std::span<const int> offsets) {
    Rank& R = ranks_[size_t(r)];
    const CpuWeights& w = R.w;
    const TpShard& sh = R.shard;
    Communicator& comm = group_->rank(r);
    const auto lap = [&](const char* op) {
      if (r == 0) clock_.lap(op);
    };
    const int N = batch.num_tokens;
    const int H = c_.hidden_size, I = sh.inter, hd = c_.head_dim;
    const int heads = sh.heads, kv_heads = sh.kv_heads;
    const int q_dim = sh.q_dim(c_), kv_dim = sh.kv_dim(c_), qkv_dim = sh.qkv_dim(c_);

    std::vector<float> x(size_t(N) * H), h(size_t(N) * H), tmp(size_t(N) * H);
    std::vector<float> qkv(size_t(N) * qkv_dim), q(size_t(N) * q_dim), att(size_t(N) * q_dim);
    std::vector<float> gu(size_t(N) * 2 * I), act(size_t(N) * I);
    std::vector<float> k_new, kc, vc;  // per sequence: roped new keys; gathered K/V [len, kv_dim]

    cpu::embedding_slice(ids, w.embed.data(), sh.vocab0, sh.vocab, H, x.data());  // x: [N, H]
    comm.all_reduce_sum(x);
    lap(op::kEmbed);
    for (int l = 0; l < c_.num_layers; ++l) {
      const CpuLayer& L = w.layers[size_t(l)];
      cpu::rmsnorm(x.data(), L.attn_norm.data(), h.data(), N, H, c_.rms_norm_eps);
      if (L.q_qkv.fp8) cpu::quantize_fp8(h.data(), N, H, L.q_qkv.input_scale);
      lap(op::kAttnNorm);
      cpu::matmul(L.wqkv.data(), h.data(), qkv.data(), N, qkv_dim, H);  // [N, q|k|v]
      if (c_.qkv_bias) cpu::add_bias(qkv.data(), L.bqkv.data(), N, qkv_dim);
      if (c_.qk_norm)  // per head, before RoPE
        cpu::qk_norm(qkv.data(), L.q_norm.data(), L.k_norm.data(), N, heads, kv_heads, hd,
                     c_.rms_norm_eps);
      lap(op::kQkv);
      for (size_t i = 0; i < batch.seqs.size(); ++i) {
        const BatchSeq& s = batch.seqs[i];
        const int n = int(s.tokens.size()), pos = s.start_pos, len = pos + n;
        const size_t r0 = size_t(offsets[i]);
        // New K/V rows: rope the keys, then scatter both into the blocks.
        k_new.resize(size_t(n) * kv_dim);
        for (int t = 0; t < n; ++t) {
          const float* row = qkv.data() + (r0 + size_t(t)) * qkv_dim;
          std::copy(row, row + q_dim, q.data() + (r0 + size_t(t)) * q_dim);
          std::copy(row + q_dim, row + q_dim + kv_dim, k_new.data() + size_t(t) * kv_dim);
        }
        cpu::rope(q.data() + r0 * q_dim, n, heads, hd, pos, w.inv_freq.data());
        cpu::rope(k_new.data(), n, kv_heads, hd, pos, w.inv_freq.data());
        for (int t = 0; t < n; ++t) {
          const float* v_row = qkv.data() + (r0 + size_t(t)) * qkv_dim + q_dim + kv_dim;
          float* k_slot = slot(R, R.k_pool, l, s, pos + t);
          float* v_slot = slot(R, R.v_pool, l, s, pos + t);
          std::copy_n(k_new.data() + size_t(t) * kv_dim, kv_dim, k_slot);
          std::copy_n(v_row, kv_dim, v_slot);
          if (kv_fp8_) {  // the pool holds e4m3 values: what attention reads back
            fp8_fake_quantize_row(k_slot, size_t(kv_dim), w.k_scales[size_t(l)]);
            fp8_fake_quantize_row(v_slot, size_t(kv_dim), w.v_scales[size_t(l)]);
          }
        }
        lap(op::kRopeKv);
        // Gather positions [0, len) into contiguous K/V so that the reference
        // attention op (and its summation order) is reused unchanged.
        kc.resize(size_t(len) * kv_dim);
        vc.resize(size_t(len) * kv_dim);
        for (int p = 0; p < len; p += block_size_) {
          const int rows = std::min(block_size_, len - p);
          std::copy_n(slot(R, R.k_pool, l, s, p), size_t(rows) * kv_dim,
                      kc.data() + size_t(p) * kv_dim);
          std::copy_n(slot(R, R.v_pool, l, s, p), size_t(rows) * kv_dim,
                      vc.data() + size_t(p) * kv_dim);
        }
        cpu::attention(q.data() + r0 * q_dim, kc.data(), vc.data(), att.data() + r0 * q_dim, n, pos,
                       heads, kv_heads, hd);
        lap(op::kAttention);
      }
      // Row-split projections: each rank's product is a partial sum of the
      // output, completed by the all-reduce (per-token FP8 scales are the
      // rank's own, over its slice, as each GPU rank quantizes its input).
      if (L.q_o.fp8) cpu::quantize_fp8(att.data(), N, q_dim, L.q_o.input_scale);
      cpu::matmul(L.wo.data(), att.data(), tmp.data(), N, H, q_dim);
      comm.all_reduce_sum(tmp);
      cpu::add(x.data(), tmp.data(), int64_t(N) * H);
      lap(op::kOProj);
      cpu::rmsnorm(x.data(), L.ffn_norm.data(), h.data(), N, H, c_.rms_norm_eps);
      if (L.q_gate_up.fp8) cpu::quantize_fp8(h.data(), N, H, L.q_gate_up.input_scale);
      lap(op::kFfnNorm);
      cpu::matmul(L.w_gate_up.data(), h.data(), gu.data(), N, 2 * I, H);
      lap(op::kGateUp);
      cpu::silu_mul(gu.data(), act.data(), N, I);
      if (L.q_down.fp8) cpu::quantize_fp8(act.data(), N, I, L.q_down.input_scale);
      lap(op::kSiluMul);
      cpu::matmul(L.w_down.data(), act.data(), tmp.data(), N, H, I);
      comm.all_reduce_sum(tmp);
      cpu::add(x.data(), tmp.data(), int64_t(N) * H);
      lap(op::kDown);
    }

    // LM head on the logits rows only (logit_rows): [m, H] -> this rank's
    // vocabulary columns [m, sh.vocab], gathered into [m, V].
    const int m = int(rows_.token_row.size());
    if (m == 0) return;
    std::vector<float> last(size_t(m) * H);
    for (int j = 0; j < m; ++j)
      std::copy_n(x.data() + size_t(rows_.token_row[size_t(j)]) * H, H, last.data() + size_t(j) * H);
    cpu::rmsnorm(last.data(), w.final_norm.data(), last.data(), m, H, c_.rms_norm_eps);
    lap(op::kFinalNorm);
    if (ranks_.size() == 1) {
      cpu::matmul(w.lm(c_).data(), last.data(), last_logits_.data(), m, sh.vocab, H);
    } else {
      std::vector<float> mine(size_t(m) * size_t(sh.vocab)), scratch;
      cpu::matmul(w.lm(c_).data(), last.data(), mine.data(), m, sh.vocab, H);
      if (r != 0) scratch.resize(last_logits_.size());
      comm.all_gather_columns(mine, m, R.vocab_widths,
                              r == 0 ? std::span<float>(last_logits_) : std::span<float>(scratch));
    }
    lap(op::kLmHead);
  }

  void last_logits_row(int j, std::span<float> out) override {
    const size_t V = size_t(c_.vocab_size);
    HAYATE_CHECK(j >= 0 && size_t(j) < rows_.sampled.size(), "last_logits_row: ", j,
                 " is not a sampling sequence of the last step (", rows_.sampled.size(), ")");
    HAYATE_CHECK(out.size() == V, "last_logits_row: out has ", out.size(), " entries, vocab is ",
                 V);
    std::copy_n(last_logits_.data() + size_t(rows_.sampled[size_t(j)]) * V, V, out.data());
  }

  void last_chunk_logits(int i, std::span<float> out) override {
    const size_t V = size_t(c_.vocab_size);
    HAYATE_CHECK(i >= 0 && size_t(i) < all_logits_.size() && all_logits_[size_t(i)],
                 "last_chunk_logits: sequence ", i, " of the last step kept no logits");
    const size_t first = size_t(rows_.first[size_t(i)]);
    const size_t end = size_t(i) + 1 < rows_.first.size() && rows_.first[size_t(i) + 1] >= 0
                           ? size_t(rows_.first[size_t(i) + 1])
                           : rows_.token_row.size();
    HAYATE_CHECK(out.size() == (end - first) * V, "last_chunk_logits: out has ", out.size(),
                 " entries, the chunk's logits ", (end - first) * V);
    std::copy_n(last_logits_.data() + first * V, out.size(), out.data());
  }

  // A sampling row per sequence of a full step, or a chunk as long as a step's tokens.
  int max_logit_rows() const override { return max_logit_rows_; }
  double weight_bytes_per_token() const override { return weight_bytes_; }

  // The fp32 matmul op on [64, 1024] x [1024, 1024]^T, best of three.
  MatmulRates measure_matmul_rates() override {
    constexpr int M = 64, N = 1024, K = 1024;
    std::vector<float> w(size_t(N) * K, 0.01f), x(size_t(M) * K, 0.5f), y(size_t(M) * N);
    double best = 1e30;
    for (int r = 0; r < 3; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      cpu::matmul(w.data(), x.data(), y.data(), M, N, K);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return {2.0 * M * N * K / best / 1e12, 0.0};
  }

  StepTimes profile_step(const Batch& batch, std::span<int32_t> sampled) override {
    HAYATE_CHECK(unfinished_.empty(), "profile_step: a step is in flight");
    StepTimes t;
    t.plan = {{"backend", "cpu, fp32, one pass over every token row"},
              {"rows", std::to_string(batch.num_tokens) + " token rows, " +
                           std::to_string(batch.seqs.size()) + " sequences"},
              {"matmul", "cpu::matmul (OpenMP over output rows) for every projection"},
              {"attention", "per sequence over its blocks, gathered to contiguous K/V"}};
    const auto t0 = std::chrono::steady_clock::now();
    clock_.arm();
    step(batch, sampled);
    t.ops = clock_.take();
    t.span_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    for (const OpTime& o : t.ops) t.kernel_ms += o.ms;
    t.measured = true;
    return t;
  }

 private:
  // Floats of one K (or V) pool over every layer, for kv_dim of K per position.
  size_t pool_floats(int kv_dim) const {
    return size_t(c_.num_layers) * size_t(num_blocks_) * size_t(block_size_) * size_t(kv_dim);
  }

  OpClock clock_;  // armed by profile_step() only
  std::vector<int32_t> prev_sampled_;             // ids of the last launched step, per seq
  std::deque<std::vector<int32_t>> unfinished_;  // ids of launched, unfinished steps
  std::vector<float> last_logits_;  // [logits rows of the last step, V]
  LogitRows rows_;                  // the last step's logits rows
  struct Masked {                   // a masked sampling row of the last step
    size_t seq, row;
    SamplingParams sampling;
    uint64_t step;
  };
  std::vector<Masked> masked_;  // waiting for sample_masked()
  std::vector<bool> all_logits_;    // per seq of the last step

  // One rank's share: its slice of the weights and its KV pools.
  struct Rank {
    TpShard shard;
    CpuWeights w;
    std::vector<float> k_pool;  // [layers, num_blocks, block_size, shard kv_dim], roped keys
    std::vector<float> v_pool;  // [layers, num_blocks, block_size, shard kv_dim]
    std::vector<int> vocab_widths;  // [ranks] every rank's vocabulary rows, for the gather
  };

  // Start of rank R's K or V row of position `p` of sequence `s` in layer `l`.
  float* slot(const Rank& R, std::vector<float>& pool, int l, const BatchSeq& s, int p) const {
    const int32_t block = s.block_table[size_t(p / block_size_)];
    const size_t row = (size_t(l) * num_blocks_ + size_t(block)) * block_size_ + p % block_size_;
    return pool.data() + row * size_t(R.shard.kv_dim(c_));
  }

  ModelConfig c_;
  int max_model_len_ = 0;
  int block_size_ = 0;
  int num_blocks_ = 0;
  int max_logit_rows_ = 0;
  bool kv_fp8_ = false;  // K/V rows quantized to e4m3 as they enter the pool
  double weight_bytes_ = 0.0;  // fp32, as this backend reads them
  std::vector<Rank> ranks_;            // [tensor_parallel_size]
  std::unique_ptr<LocalGroup> group_;  // the ranks' in-memory collectives
};

}  // namespace

std::unique_ptr<BatchBackend> make_cpu_paged_backend(const Model& model,
                                                     const BatchBackendOptions& options) {
  return std::make_unique<CpuPagedBackend>(model, options);
}

}  // namespace hayate
