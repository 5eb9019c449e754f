// The CUDA backend: one forward step over every token of a Batch (a single
// request is a batch of one). Each step's StepPlan says what runs:
//   tokens of all sequences -> one activation matrix [T, hidden]; projections
//   through cuBLAS GEMMs (fp16/bf16 in, fp32 accumulate), or batched GEMVs for
//   up to 16 rows (gemv_batched.h), picked per decode bucket by a start-up
//   timing; bucket 1 runs every layer and the LM head in the persistent
//   decode kernel through the sequence's block table where that kernel has a
//   configuration for the shapes; RoPE with per-token positions and the KV
//   write into paged blocks; attention per sequence through its block table
//   (attend(): decode kernels for one-token sequences, the tiled causal kernel
//   for prefill chunks); the LM head only on logits rows (logit_rows());
//   greedy argmax per row on the device, then the temperature/top-k/top-p/
//   min-p rows in one batched pass (sampling_batched.cu) or row by row,
//   whichever a start-up timing finds faster for that many rows.
// All-decode steps replay a CUDA graph captured at start-up for the smallest
// batch-size bucket that holds them (batch_graphs.cu); rows past the batch are
// padding that reads and writes only a scratch block at the end of the pool.
// Steps whose decode rows all have contexts of at most 128 keys (head_dim 128)
// run the one-pass short-context attention (paged_decode_short.cu): buckets
// up to kShortGraphMaxRows have a second graph for it. Large buckets have a
// second graph whose split attention has one slot per (row, kv head), for
// steps whose rows all fit paged_decode_whole_row_keys (eager steps size the
// grid from their own longest row).
// GEMMs (batch_gemm.h): cuBLASLt or cublasGemmEx per shape and row count,
// picked by a start-up timing; QKV and gate/up write T (their only readers,
// paged_rope_kv and silu_mul, take T), o_proj and down accumulate into the
// fp32 residual, the LM head writes fp32 logits. With 16-bit weights the
// step's own kernels (RMSNorm, RoPE + KV write, attention, SiLU*mul, argmax)
// are launched with programmatic dependent launch: each waits for its
// predecessor at entry, so its launch and block placement overlap the
// predecessor's tail instead of following its completion (cuBLAS's kernels
// are launched plainly and need no wait). Switches (core/switches.h) force one
// sampler, GEMM path or no persistent kernel for comparisons.
#include <algorithm>
#include <climits>
#include <deque>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "core/check.h"
#include "core/rng.h"
#include "cuda/batch_gemm.h"
#include "cuda/batch_graphs.h"
#include "cuda/buffer.h"
#include "cuda/cuda_batch_backend.h"
#include "cuda/device_info.h"
#include "cuda/gemv_batched.h"
#include "cuda/kernel_recorder.h"
#include "cuda/kv_copy.h"
#include "cuda/launch.h"
#include "cuda/ops.h"
#include "cuda/paged_attention.cuh"
#include "cuda/pinned.h"
#include "cuda/step_meta.h"
#include "cuda/weights.h"
#include "engine/step_profile.h"
#include "model/model.h"

namespace hayate {
namespace cuda {
namespace {

constexpr int kMaxSplits = 32;  // decode: partitions of the KV length
// Buckets of up to this many rows get a second graph with the one-pass
// short-context attention (paged_attn_lab on the H200, per layer: 1 row x 128
// keys 12.9 us vs 17.2 split, 8 x 100 13.0 vs 17.4). Larger buckets keep one
// graph: there the one pass lost (64 x 100 52 vs 24 us, 256 x 100 178 vs 68:
// every query head re-reads its kv head's rows), and each graph is start-up
// time (the four short graphs: ~30 ms of ~1.3 s at max_num_seqs 256).
constexpr int kShortGraphMaxRows = 8;

// The test hooks behind cuda_batch_last_logits() and cuda_batch_graph_replays().
class LogitsPeek {
 public:
  virtual ~LogitsPeek() = default;
  virtual std::vector<float> last_logits() = 0;
  virtual DecodeGraphReplays graph_replays() const = 0;
};

template <typename T>
class CudaBatchBackend final : public BatchBackend, public LogitsPeek {
  // A launched step's host side: its packed metadata, where its ids come
  // back, its non-greedy rows' states, and what finish() and the logits
  // readers need. Two, used in turn: a step may be launched while the one
  // before it runs.
  struct Flight {
    PinnedInts meta, out, ng_rows, mask_rows;
    Pinned<uint32_t> masks;             // [max_seqs, mask words] the host's grammar masks
    const int32_t* meta_dev = nullptr;  // meta as the device addresses it (mapped)
    Pinned<StepState> states;
    cudaEvent_t done = nullptr;
    int seqs = 0;
    int n_ng = 0;       // non-greedy rows (states, ng_rows)
    int n_masked = 0;   // masked rows (mask_rows); their sampling waits for sample_masked()
    int m = 0;          // logits rows of the step (the ids' copy back)
    std::vector<int32_t> which, slot;  // sampling seqs: index in the batch, output slot
    std::vector<int32_t> out_index;    // per seq: its output slot, -1 when it did not sample
    std::vector<int> first, count;     // per all_logits seq: its logits rows (else -1, 0)
  };
 public:
  CudaBatchBackend(const Model& model, const BatchBackendOptions& o, DecodeMatmul matmul)
      : c_(model.config), matmul_(matmul) {
    HAYATE_CHECK(o.block_size >= 1, "--block-size must be >= 1, got ", o.block_size);
    HAYATE_CHECK(o.num_blocks >= 0, "--num-kv-blocks must be >= 0, got ", o.num_blocks);
    HAYATE_CHECK(o.max_num_seqs >= 1, "--max-num-seqs must be >= 1, got ", o.max_num_seqs);
    HAYATE_CHECK(o.max_num_batched_tokens >= 1, "--max-num-batched-tokens must be >= 1, got ",
                 o.max_num_batched_tokens);
    HAYATE_CHECK(o.gpu_memory_fraction > 0.0 && o.gpu_memory_fraction <= 1.0,
                 "--gpu-memory-fraction must be in (0, 1], got ", o.gpu_memory_fraction);
    kv8_ = o.kv_cache_dtype == KvCacheDtype::kFp8;
    HAYATE_CHECK(!kv8_ || kv_fp8_head_dim_supported(c_.head_dim), "--kv-cache-dtype fp8: head_dim ",
                 c_.head_dim, " is not supported by the e4m3 attention kernels (32, 64, 128)");
    HAYATE_CHECK(paged_shape_supported(c_.num_heads, c_.num_kv_heads, c_.head_dim),
                 "the batched cuda backend needs head_dim 32, 64 or 128 and at most ",
                 kPagedMaxGroup, " query heads per kv head (got head_dim ", c_.head_dim, ", ",
                 c_.num_heads, " heads, ", c_.num_kv_heads, " kv heads)");
    HAYATE_CHECK(c_.hidden_size % 8 == 0 && c_.intermediate_size % 8 == 0,
                 "hidden and intermediate sizes must be multiples of 8");
    max_model_len_ =
        o.max_model_len > 0 ? o.max_model_len : std::min(c_.max_position_embeddings, 8192);
    HAYATE_CHECK(max_model_len_ <= c_.max_position_embeddings, "--max-model-len ", max_model_len_,
                 " exceeds the model's max_position_embeddings ", c_.max_position_embeddings);
    block_size_ = o.block_size;
    max_seqs_ = o.max_num_seqs;
    max_tokens_ = std::max(o.max_num_batched_tokens, o.max_num_seqs);
    HAYATE_CHECK(o.max_logit_rows >= 0, "max_logit_rows must be >= 0, got ", o.max_logit_rows);
    max_logit_rows_ = std::max(o.max_logit_rows, o.max_num_seqs);
    max_blocks_ = (max_model_len_ + block_size_ - 1) / block_size_;
    n_splits_ = std::min(kMaxSplits, (max_model_len_ + 511) / 512);

    for (int l = 0; l < c_.num_layers; ++l) {  // the checkpoint's, else 1.0 (vLLM's default)
      const bool ck = size_t(l) < model.k_scales.size();
      k_scales_.push_back(ck ? model.k_scales[size_t(l)] : 1.0f);
      v_scales_.push_back(ck ? model.v_scales[size_t(l)] : 1.0f);
    }
    sampler_ = o.switches.sampler;
    int major = 0;  // the persistent kernel is sm_90 (bulk copies, mbarriers)
    HAYATE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, o.device));
    persistent_ = o.switches.persistent != PersistentMode::kOff && major >= 9 &&
                  persistent_decode_supported(c_.hidden_size, c_.intermediate_size, c_.vocab_size,
                                              c_.num_heads, c_.num_kv_heads, c_.head_dim,
                                              c_.qk_norm);

    HAYATE_CUDA_CHECK(cudaSetDevice(o.device));
    device_ = o.device;
    HAYATE_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
    gemm_ = std::make_unique<BatchGemm<T>>(o.switches.gemm, s_);
    paged_attention_init();

    if (model.quant.fp8() || kv8_) {  // FP8 tensor cores (and conversions); the fused norm's bound
      int minor = 0;
      HAYATE_CUDA_CHECK(
          cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, o.device));
      check_fp8_capability(major, minor,
                           model.quant.fp8() ? model.quant.describe() : "--kv-cache-dtype fp8");
    }
    if (model.quant.fp8()) {
      HAYATE_CHECK(rmsnorm_fp8_supported(c_.hidden_size), "FP8: hidden size ", c_.hidden_size,
                   " exceeds what the fused RMSNorm + quantization kernel holds");
    }
    w_ = upload_weights<T>(model, s_, o.on_load_progress);
    // FP8 with Qwen3's q/k norms: no instantiation of the persistent kernel
    // (each one is compile time); bucket 1 runs the batched path.
    // FP8 down rows past 16384 would need the wide down's x (10 chunks per
    // thread) in one stage: not instantiated either.
    if (w_.fp8)
      persistent_ = persistent_ && persistent_decode_fp8_supported() && !c_.qk_norm &&
                    c_.intermediate_size <= 16384;
    // The persistent kernel's attention reads T pools: e4m3 ones run bucket 1
    // on the batched path (GEMVs or cuBLAS, split or one-pass attention).
    persistent_ = persistent_ && !kv8_;
    pdl_ = !w_.fp8;  // the FP8 layers' kernels are launched plainly
    alloc_workspace();
    gemm_->tune_model(c_, w_.layers, w_.lm_head, max_tokens_, max_seqs_,
                      {xn_, attn_, last_, big_, h_, logits_, xq_, xs_});
    alloc_pool(o);
    if (persistent_) init_persistent(o);
    short_keys_ = paged_decode_short_max_keys(c_.head_dim);
    capture_graphs();
    time_samplers();
  }

  ~CudaBatchBackend() override {
    if (s_) cudaStreamSynchronize(s_);
    for (Flight& f : flights_)
      if (f.done) cudaEventDestroy(f.done);
    gemm_.reset();  // its cuBLAS handles use the stream
    if (s_) cudaStreamDestroy(s_);
  }

  std::string name() const override { return "cuda"; }
  const ModelConfig& config() const override { return c_; }
  int num_blocks() const override { return num_blocks_; }
  int block_size() const override { return block_size_; }
  int max_model_len() const override { return max_model_len_; }
  DeviceInfo device_info() const override { return cuda::device_info(device_); }

  void last_logits_row(int j, std::span<float> out) override {
    HAYATE_CHECK(j >= 0 && size_t(j) < last_slot_.size(), "last_logits_row: ", j,
                 " is not a sampling sequence of the last step (", last_slot_.size(), ")");
    HAYATE_CHECK(out.size() == size_t(c_.vocab_size), "last_logits_row: out has ", out.size(),
                 " entries, vocab is ", c_.vocab_size);
    HAYATE_CUDA_CHECK(cudaMemcpy(out.data(), logits_ + size_t(last_slot_[size_t(j)]) * out.size(),
                                 out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  }

  void last_chunk_logits(int i, std::span<float> out) override {
    HAYATE_CHECK(i >= 0 && size_t(i) < last_first_.size() && last_first_[size_t(i)] >= 0,
                 "last_chunk_logits: sequence ", i, " of the last step kept no logits");
    const size_t V = size_t(c_.vocab_size), rows = size_t(last_count_[size_t(i)]);
    HAYATE_CHECK(out.size() == rows * V, "last_chunk_logits: out has ", out.size(),
                 " entries, the chunk's logits ", rows * V);
    HAYATE_CUDA_CHECK(cudaMemcpy(out.data(), logits_ + size_t(last_first_[size_t(i)]) * V,
                                 out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  }

  int max_logit_rows() const override { return max_logit_rows_; }
  double weight_bytes_per_token() const override { return w_.streamed_bytes; }
  std::unique_ptr<RegionTimer> make_timer() override { return make_stream_timer(s_); }
  double measure_read_bandwidth_gbs() override { return cuda::measure_read_bandwidth_gbs(s_); }

  // Layer 0's gate/up GEMM over min(max_tokens, 4096) rows (a prefill
  // chunk's largest product), timed over 10 runs after a warm-up: in T, or
  // with FP8 linears on their codes, and in T on as many rows of the LM head
  // (the one 16-bit matrix left) for the ops that stay 16-bit.
  MatmulRates measure_matmul_rates() override {
    const int m = std::min(max_tokens_, 4096), N = 2 * c_.intermediate_size, K = c_.hidden_size;
    T* y = reinterpret_cast<T*>(big_);  // inputs: whatever the buffers hold
    const auto tflops = [&](int n, auto run) {
      time_on_stream(s_, run, 2);
      const float ms = time_on_stream(s_, run, 10);
      return 2.0 * m * n * K / (double(ms) * 1e-3) / 1e12;
    };
    MatmulRates r;
    if (w_.fp8) {
      r.fp8_tflops =
          tflops(N, [&] { gemm_->fp8(w_.layers[0].gate_up8, xq_, xs_, m, N, K, y, false); });
      const int n = std::min(N, c_.vocab_size);
      r.tflops = tflops(n, [&] { (*gemm_)(w_.lm_head, xn_, m, n, K, y, false); });
    } else {
      r.tflops = tflops(N, [&] { (*gemm_)(w_.layers[0].w_gate_up, xn_, m, N, K, y, false); });
    }
    return r;
  }

  // The step as launch() runs it, under CUPTI's kernel records; the
  // persistent kernel's bucket runs its forward eagerly with the trace on.
  StepTimes profile_step(const Batch& batch, std::span<int32_t> sampled) override {
    HAYATE_CHECK(unfinished_.empty(), "profile_step: a step is in flight");
    HAYATE_CUDA_CHECK(cudaStreamSynchronize(s_));
    StepTimes t;
    t.plan = describe(batch);
    const bool graph = batch.all_decode();
    t.persistent = graph && graphs_.matmul(graphs_.bucket_of(int(batch.seqs.size()))).persistent;
    int blocks = 0;
    const int slots = persistent_trace_slots(c_.num_layers);
    if (t.persistent) {
      HAYATE_CUDA_CHECK(cudaDeviceGetAttribute(&blocks, cudaDevAttrMultiProcessorCount, device_));
      if (!trace_) trace_ = alloc<unsigned long long>(size_t(blocks) * size_t(slots));
      persist_.trace = trace_;
    }
    profile_persistent_ = t.persistent;
    std::string why;
    std::unique_ptr<KernelRecorder> rec = KernelRecorder::start(&why);
    step(batch, sampled);
    std::vector<KernelRecord> ks;
    if (rec) ks = rec->stop();
    persist_.trace = nullptr;
    profile_persistent_ = false;
    if (!rec) {
      t.why = why;
      return t;
    }
    HAYATE_CHECK(!ks.empty(), "profile: CUPTI recorded no kernels for the step");
    std::vector<std::pair<std::string, double>> kinds;
    double persistent_ms = 0;
    for (const KernelRecord& k : ks) {
      const double ms = double(k.end_ns - k.start_ns) / 1e6;
      t.kernel_ms += ms;
      const std::string kind = kernel_kind(k.name);
      if (kind == "persistent") persistent_ms += ms;
      else kinds.push_back({kind, ms});
    }
    t.span_ms = double(ks.back().end_ns - ks.front().start_ns) / 1e6;
    StepDtypes dt{int(sizeof(T)), int(sizeof(T)), 4};
    dt.linear = w_.fp8 ? 1 : 0;
    dt.kv = kv8_ ? 1 : 0;
    std::vector<OpCost> costs = step_costs(c_, dt, batch);
    if (t.persistent) costs = fuse_persistent(costs);
    t.ops = attribute(kinds, expand_calls(costs, true));
    if (t.persistent) {  // the one kernel's phases, after the embedding
      std::vector<unsigned long long> tr(size_t(blocks) * size_t(slots));
      HAYATE_CUDA_CHECK(cudaMemcpy(tr.data(), trace_, tr.size() * sizeof(tr[0]),
                                   cudaMemcpyDeviceToHost));
      const std::vector<OpTime> ph = persistent_phases(tr, blocks, c_.num_layers, persistent_ms);
      auto at = std::find_if(t.ops.begin(), t.ops.end(),
                             [](const OpTime& o) { return o.name == op::kEmbed; });
      t.ops.insert(at == t.ops.end() ? t.ops.begin() : at + 1, ph.begin(), ph.end());
    }
    t.measured = true;
    return t;
  }

  DecodeGraphReplays graph_replays() const override { return replays_; }

  std::vector<float> last_logits() override {
    const size_t V = size_t(c_.vocab_size);
    std::vector<float> out(last_slot_.size() * V);
    for (size_t j = 0; j < last_slot_.size(); ++j)
      HAYATE_CUDA_CHECK(cudaMemcpy(out.data() + j * V, logits_ + size_t(last_slot_[j]) * V,
                                   V * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
  }

  // Packs the step's metadata (one unpack kernel reads it from pinned memory), runs the graph
  // of its bucket or the eager forward, samples, and queues the copy of its
  // ids back to pinned memory; finish() waits for that.
  void launch(const Batch& batch) override {
    validate(batch);
    HAYATE_CHECK(unfinished_.size() < 2, "batch step: more than two steps launched");
    HAYATE_CHECK(!awaiting_masks_, "batch step: launch() before sample_masked() of the last step");
    if (!batch.copies.empty()) {  // copy on write, before this step reads or writes the blocks
      std::vector<int32_t> pairs;
      for (const BlockCopy& c : batch.copies) pairs.insert(pairs.end(), {c.src, c.dst});
      const int64_t elems = int64_t(block_size_) * c_.kv_dim();
      const int n = int(batch.copies.size());
      if (kv8_) {
        copy_blocks(k_pool_.as<KvFp8>(), c_.num_layers, num_blocks_ + 1, elems, pairs.data(), n, s_);
        copy_blocks(v_pool_.as<KvFp8>(), c_.num_layers, num_blocks_ + 1, elems, pairs.data(), n, s_);
      } else {
        copy_blocks(k_pool_.as<T>(), c_.num_layers, num_blocks_ + 1, elems, pairs.data(), n, s_);
        copy_blocks(v_pool_.as<T>(), c_.num_layers, num_blocks_ + 1, elems, pairs.data(), n, s_);
      }
    }
    const int S = int(batch.seqs.size()), T_ = batch.num_tokens;
    const bool use_graph = batch.all_decode();
    const size_t bucket = use_graph ? graphs_.bucket_of(S) : 0;
    const int rows = use_graph ? graphs_.rows(bucket) : T_;  // token rows this step runs
    const Flight* prev = last_flight_ >= 0 ? &flights_[size_t(last_flight_)] : nullptr;
    const int fi = last_flight_ < 0 ? 0 : 1 - last_flight_;
    Flight& f = flights_[size_t(fi)];

    // Logits rows: the graph computes one per row (seq i's is row i); an
    // eager step one per logit_rows() entry.
    const LogitRows lr = logit_rows(batch);
    f.which.clear();
    f.out_index.assign(size_t(S), -1);
    int n_dec = 0, n_tiles = 0, dec_keys = 0;  // dec_keys: longest context of a decode row
    const int tile_tok = paged_prefill_tile_tokens(c_.num_heads / c_.num_kv_heads);
    packer_.clear();
    for (int i = 0, row = 0; i < S; ++i) {
      const BatchSeq& s = batch.seqs[size_t(i)];
      const int n = int(s.tokens.size());
      update_table(i, s.block_table);
      for (int t = 0; t < n; ++t) {
        int32_t token = s.tokens[size_t(t)];
        if (s.prev_slot >= 0) {  // the previous step's id, read on the device
          const int32_t at = prev->out_index[size_t(s.prev_slot)];
          HAYATE_CHECK(at >= 0, "batch step: sequence ", s.seq_id, " takes its token from slot ",
                       s.prev_slot, ", which did not sample");
          token = -1 - at;
        }
        packer_.row(token, s.start_pos + t, i);
      }
      if (n == 1) {
        packer_.dec(row);
        ++n_dec;
        dec_keys = std::max(dec_keys, s.start_pos + 1);
      } else {
        for (int t = 0; t < n; t += tile_tok, ++n_tiles) packer_.tile(row + t, std::min(tile_tok, n - t));
      }
      if (s.sample) f.which.push_back(i);
      row += n;
    }
    for (int r = T_; r < rows; ++r) {  // graph padding: position 0 of the scratch block
      packer_.row(0, 0, r);
      update_table(r, std::span<const int32_t>(&num_blocks_, 1));
    }
    const int m = use_graph ? rows : int(lr.token_row.size());
    if (!use_graph)
      for (int32_t r : lr.token_row) packer_.head(r);
    // The unpack kernel reads the pinned buffer over the bus: no copy to queue.
    const size_t words = packer_.pack(f.meta.data());
    unpack_step_meta(f.meta_dev, words, meta_dst(), d_out_, s_);

    const bool short_attn = dec_keys <= short_keys_;  // padding rows: one key
    if (use_graph && profile_persistent_) {  // profile_step(): the bucket's plan, eagerly
      forward(planned(StepPlan{rows, d_dec_, n_dec, n_tiles, d_sample_rows_, m,
                               graphs_.matmul(bucket), short_attn, dec_keys}));
    } else if (use_graph) {
      DecodeGraphs::Kind kind = DecodeGraphs::Kind::kRegular;
      HAYATE_CUDA_CHECK(cudaGraphLaunch(graphs_.graph(bucket, short_attn, dec_keys, &kind), s_));
      ++(kind == DecodeGraphs::Kind::kShort       ? replays_.short_attn
         : kind == DecodeGraphs::Kind::kWholeRows ? replays_.whole_rows
                                                  : replays_.regular);
    } else {
      forward(planned(StepPlan{rows, d_dec_, n_dec, n_tiles, d_sample_rows_, m,
                               Matmul{graphs_.gemv_max(), false}, short_attn, dec_keys}));
    }
    // The logits rows of each all_logits seq, and each sampling seq's output
    // slot (its logits row; graph: the seq's own row).
    f.first.assign(size_t(S), -1);
    f.count.assign(size_t(S), 0);
    for (int i = 0; i < S; ++i) {
      const BatchSeq& q = batch.seqs[size_t(i)];
      if (!q.all_logits) continue;
      f.first[size_t(i)] = use_graph ? i : lr.first[size_t(i)];
      f.count[size_t(i)] = int(q.tokens.size());
    }
    f.slot.resize(f.which.size());
    for (size_t j = 0; j < f.which.size(); ++j) {
      f.slot[j] = use_graph ? f.which[j] : lr.sampled[j];
      f.out_index[size_t(f.which[j])] = f.slot[j];
    }
    f.n_masked = 0;
    for (size_t j = 0; j < f.which.size(); ++j)
      if (batch.seqs[size_t(f.which[j])].masked) f.mask_rows[size_t(f.n_masked++)] = f.slot[j];
    stage_non_greedy(batch, f);
    f.m = m;
    f.seqs = S;
    last_flight_ = fi;
    unfinished_.push_back(fi);
    awaiting_masks_ = f.n_masked > 0;
    if (!awaiting_masks_) sample_rows(f);
  }

  // The masked rows' logits outside their masks become -inf and their
  // greedy picks are redone; the step's other sampling follows as usual.
  void sample_masked(std::span<const uint32_t> masks) override {
    HAYATE_CHECK(awaiting_masks_, "sample_masked: the last step has no masked sequences");
    Flight& f = flights_[size_t(last_flight_)];
    const size_t W = size_t(mask_words());
    HAYATE_CHECK(masks.size() == size_t(f.n_masked) * W, "sample_masked: ", masks.size(),
                 " mask words for ", f.n_masked, " masked sequences");
    std::copy(masks.begin(), masks.end(), f.masks.data());
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(d_masks_, f.masks.data(), sizeof(uint32_t) * masks.size(),
                                      cudaMemcpyHostToDevice, s_));
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(d_mask_rows_, f.mask_rows.data(),
                                      sizeof(int32_t) * size_t(f.n_masked),
                                      cudaMemcpyHostToDevice, s_));
    mask_argmax_rows(logits_, c_.vocab_size, d_mask_rows_, d_masks_, int(W), f.n_masked, d_out_,
                     s_);
    awaiting_masks_ = false;
    sample_rows(f);
  }

  void finish(std::span<int32_t> sampled) override {
    HAYATE_CHECK(!unfinished_.empty(), "batch step: finish() without a launched step");
    HAYATE_CHECK(!awaiting_masks_ || unfinished_.size() > 1,
                 "batch step: finish() before sample_masked() of the step");
    Flight& f = flights_[size_t(unfinished_.front())];
    unfinished_.pop_front();
    HAYATE_CUDA_CHECK(cudaEventSynchronize(f.done));
    HAYATE_CHECK(sampled.size() == size_t(f.seqs), "batch step: ", sampled.size(),
                 " output slots for ", f.seqs, " sequences");
    for (size_t j = 0; j < f.which.size(); ++j)
      sampled[size_t(f.which[j])] = f.out[size_t(f.slot[j])];
    last_slot_ = f.slot;
    last_first_ = f.first;
    last_count_ = f.count;
  }

 private:
  // What a step over `batch` runs (profile_step()), as launch() decides it.
  std::vector<std::pair<std::string, std::string>> describe(const Batch& batch) const {
    const int S = int(batch.seqs.size()), T_ = batch.num_tokens;
    const bool graph = batch.all_decode();
    const size_t bucket = graph ? graphs_.bucket_of(S) : 0;
    int n_dec = 0, n_pre = 0, dec_keys = 0;
    for (const BatchSeq& q : batch.seqs) {
      if (q.tokens.size() == 1) {
        ++n_dec;
        dec_keys = std::max(dec_keys, q.start_pos + 1);
      } else {
        ++n_pre;
      }
    }
    const Matmul mm = graph ? graphs_.matmul(bucket) : Matmul{graphs_.gemv_max(), false};
    const bool short_attn = dec_keys <= short_keys_;
    DecodeGraphs::Kind kind = DecodeGraphs::Kind::kRegular;
    if (graph) graphs_.graph(bucket, short_attn, dec_keys, &kind);
    std::vector<std::pair<std::string, std::string>> p;
    const char* t_name = std::is_same_v<T, half> ? "fp16" : "bf16";
    p.push_back({"backend", cat("cuda, ", t_name, " weights and activations",
                                w_.fp8 ? " (the layers' linears: e4m3 weights and per-token e4m3 "
                                         "inputs, W8A8)"
                                       : "",
                                kv8_ ? ", e4m3 KV pool" : "", ", fp32 residual and logits")});
    p.push_back({"step", graph ? cat(T_, " decode rows: CUDA graph of bucket ", graphs_.rows(bucket),
                                     " (", graphs_.rows(bucket) - T_, " padding rows)")
                               : cat(T_, " token rows, eager: ", n_pre, " prefill chunks, ", n_dec,
                                     " decode rows")});
    if (mm.persistent) {
      p.push_back({"matmul", "persistent decode kernel: every layer and the LM head in one "
                             "launch, weights streamed through each SM's ring"});
      p.push_back({"attention", "inside the persistent kernel: KV splits spread over the blocks"});
      p.push_back({"epilogues", "RMSNorm > QKV > RoPE + KV append; o_proj + residual; RMSNorm > "
                                "gate/up > SiLU*mul; down + residual; final RMSNorm > LM head"});
    } else {
      const std::string fp8 = w_.fp8 ? gemm_->fp8_kernels(T_) : std::string();
      p.push_back({"matmul", T_ <= mm.gemv_rows
                                 ? cat("batched GEMV (rows <= ", mm.gemv_rows, ")")
                             : !fp8.empty()
                                 ? cat("FP8 products, each the fastest at start-up of cuBLASLt "
                                       "and the hand kernels for its rows: ",
                                       fp8, "; LM head: cuBLAS GEMM")
                                 : std::string("cuBLAS GEMMs, algorithm per shape and row count "
                                               "tuned at start-up")});
      std::string att;
      bool rope_in_attn = false;
      if (n_dec > 0) {
        // The split launch's rows and key bound as attend() passes them: the
        // bucket's rows in a graph (whole-row graphs bound by their keys), the
        // decode rows and their longest context in an eager step.
        const int rows = graph ? graphs_.rows(bucket) : n_dec;
        PagedDecodeTuning tune;
        tune.max_keys = !graph ? dec_keys
                        : kind == DecodeGraphs::Kind::kWholeRows
                            ? paged_decode_whole_row_keys(rows, c_.num_kv_heads)
                            : 0;
        const PagedShape sh = paged_shape();
        const int z = paged_decode_split_slots(rows, sh, n_splits_, tune);
        att = short_attn ? cat("decode: one pass (every row <= ", short_keys_, " keys)")
              : paged_decode_uses_stream(rows, sh, n_splits_, tune, kv8_)
                  ? std::string("decode: streaming kernel, a warp per (row, kv head), rows whole")
              : z == 1 ? std::string("decode: split kernel, one slot per (row, kv head)")
                       : cat("decode: split over up to ", z, " partitions, then combined");
        rope_in_attn = planned(StepPlan{graph ? rows : T_, nullptr, rows, n_pre, nullptr, 0, mm,
                                        short_attn, tune.max_keys})
                           .rope_in_attn;
        if (rope_in_attn) att += "; RoPE and the KV append inside it (no rope_kv launch)";
      }
      if (n_pre > 0) att += cat(att.empty() ? "" : "; ", "prefill: tiled causal over the block table");
      p.push_back({"attention", att});
      p.push_back({"epilogues", gemm_->t_out() && T_ > mm.gemv_rows
                                    ? cat("QKV, gate/up write fp16 (read by ",
                                          rope_in_attn ? "the attention" : "rope_kv",
                                          ", silu_mul); o_proj, down accumulate into the fp32 "
                                          "residual")
                                    : "every product writes fp32; o_proj, down accumulate into the "
                                      "residual"});
    }
    p.push_back({"sampling", "greedy argmax per row on the device; temperature rows batched or "
                             "row by row (start-up timing)"});
    return p;
  }

  // The persistent kernel's phases from its trace (ops.h: the layout): per
  // phase the mean over blocks, summed over layers; what the kernel's CUPTI
  // time holds beyond the first and last stamps is its entry and exit.
  static std::vector<OpTime> persistent_phases(const std::vector<unsigned long long>& tr,
                                               int blocks, int layers, double kernel_ms) {
    const int slots = persistent_trace_slots(layers);
    double qkv = 0, att = 0, o = 0, gu = 0, down = 0, lm = 0, bar = 0, inside = 0;
    for (int b = 0; b < blocks; ++b) {
      const unsigned long long* s = tr.data() + size_t(b) * slots;
      const auto d = [&](int i, int j) { return double(s[j] - s[i]) / 1e6; };
      int prev = 0;
      for (int l = 0; l < layers; ++l) {
        const int x = 1 + 9 * l;
        qkv += d(prev, x);
        bar += d(x, x + 1);
        att += d(x + 1, x + 2);
        o += d(x + 2, x + 3);
        bar += d(x + 3, x + 4);
        gu += d(x + 4, x + 5);
        bar += d(x + 5, x + 6);
        down += d(x + 6, x + 7);
        bar += d(x + 7, x + 8);
        prev = x + 8;
      }
      lm += d(prev, slots - 1);
      inside += d(0, slots - 1);
    }
    const double n = blocks, L = layers;
    return {{op::kQkv, qkv / n, layers},        {op::kAttention, att / n, layers},
            {op::kOProj, o / n, layers},        {op::kGateUp, gu / n, layers},
            {op::kDown, down / n, layers},      {op::kLmHead, lm / n, 1},
            {op::kBarrier, bar / n, int(4 * L)}, {"entry_exit", kernel_ms - inside / n, 1}};
  }

  // ---- the forward pass over `rows` token rows ----------------------------------
  // What one forward pass runs, decided once per step (step()) or per graph
  // (capture_graphs()) from the batch's shapes; forward() reads it and
  // branches nowhere else.
  struct StepPlan {
    int rows = 0;                       // token rows (a graph's bucket: padding included)
    const int32_t* dec_rows = nullptr;  // [n_dec] rows of one-token sequences
    int n_dec = 0;
    int n_tiles = 0;                     // prefill query tiles (d_tiles_)
    const int32_t* head_rows = nullptr;  // [m] rows the LM head runs on
    int m = 0;
    Matmul mm;                 // batched GEMV rows; bucket 1 on the persistent kernel
    bool short_attn = false;   // every decode row fits the one-pass attention
    int attn_keys = 0;         // split attention's grid for rows of <= this many keys (0: all)
    bool rope_in_attn = false;  // decode-only: RoPE and the KV append in the split attention
  };

  // Whether the step's QKV and gate/up products write T: FP8 steps always; 16-bit
  // ones where cuBLASLt runs them (GEMV rows stay fp32).
  bool qkv_in_t(const StepPlan& p) const {
    return w_.fp8 || (gemm_->t_out() && p.rows > p.mm.gemv_rows);
  }

  // The plan's choices that follow from its shapes.
  StepPlan planned(StepPlan p) const {
    p.rope_in_attn =
        !c_.qk_norm && qkv_in_t(p) && p.n_tiles == 0 && p.n_dec == p.rows && !p.short_attn &&
        !p.mm.persistent &&
        paged_decode_rope_supported(p.n_dec, paged_shape(), n_splits_, p.attn_keys, kv8_);
    return p;
  }

  // The pools' shape (no layer's scales, no PDL).
  PagedShape paged_shape() const {
    return {c_.num_heads, c_.num_kv_heads, c_.head_dim, block_size_, max_blocks_};
  }

  // Layer l's pools and shape: f(kp, vp, sh) with kp, vp the layer's K and V
  // pools [blocks, bs, kv_dim] typed T or KvFp8 (e4m3, the layer's scales in
  // sh), the one place where the pool's element type becomes a type.
  template <typename F>
  void with_kv(int l, F&& f) {
    PagedShape sh = paged_shape();
    sh.pdl = pdl_;
    const size_t off = size_t(l) * size_t(num_blocks_ + 1) * block_size_ * c_.kv_dim();
    if (kv8_) {
      sh.k_scale = k_scales_[size_t(l)];
      sh.v_scale = v_scales_[size_t(l)];
      f(k_pool_.as<KvFp8>() + off, v_pool_.as<KvFp8>() + off, sh);
    } else {
      f(k_pool_.as<T>() + off, v_pool_.as<T>() + off, sh);
    }
  }

  // Layer l's RoPE and KV append, then its attention, from the QKV rows in
  // big_ (T where qkv_in_t, else fp32): in one kernel on decode-only steps
  // (p.rope_in_attn), else paged_rope_kv (Q roped, biases and q/k norms
  // first; K, V -> pool) then attend().
  void rope_attend(const StepPlan& p, int l) {
    const LayerWeights<T>& L = w_.layers[size_t(l)];
    const PagedMeta meta{d_pos_, d_seq_, d_tables_};
    const T* big_t = reinterpret_cast<const T*>(big_);
    with_kv(l, [&](auto* kp, auto* vp, const PagedShape& sh) {  // pools [blocks, bs, kv_dim]
      if (p.rope_in_attn) {
        paged_attention_decode_rope(big_t, L.bqkv, inv_freq_, kp, vp, sh, meta, p.dec_rows, p.n_dec,
                                    n_splits_, p.attn_keys, part_o_, part_ml_, attn_, s_);
        return;
      }
      if (qkv_in_t(p))
        paged_rope_kv(big_t, sh, p.rows, inv_freq_, meta, q_, kp, vp, s_, qkv_pre(L));
      else
        paged_rope_kv(big_, sh, p.rows, inv_freq_, meta, q_, kp, vp, s_, qkv_pre(L));
      attend(p, sh, kp, vp);  // ATT [rows, qd]
    });
  }

  // The decode rows' attention and the prefill tiles' (ATT [rows, qd] in T).
  template <typename KV>
  void attend(const StepPlan& p, const PagedShape& sh, const KV* kp, const KV* vp) {
    const PagedMeta meta{d_pos_, d_seq_, d_tables_};
    if (p.n_dec > 0 && p.short_attn)  // one pass, no split
      paged_attention_decode_short(q_, kp, vp, sh, meta, p.dec_rows, p.n_dec, attn_, s_);
    else if (p.n_dec > 0)  // split over the KV length
      paged_attention_decode(q_, kp, vp, sh, meta, p.dec_rows, p.n_dec, n_splits_, p.attn_keys,
                             part_o_, part_ml_, attn_, s_);
    if (p.n_tiles > 0)
      paged_attention_prefill(q_, kp, vp, sh, meta, reinterpret_cast<const int2*>(d_tiles_),
                              p.n_tiles, attn_, s_);
  }

  void forward(const StepPlan& p) {
    const int D = c_.hidden_size, I = c_.intermediate_size, V = c_.vocab_size;
    const int qd = c_.q_dim(), qkvd = c_.qkv_dim(), rows = p.rows;
    const float eps = c_.rms_norm_eps;
    const bool t_out = qkv_in_t(p);
    T* big_t = reinterpret_cast<T*>(big_);
    embed(w_.embed, d_tokens_, rows, D, h_, s_, false);  // H [rows, D]
    if (p.mm.persistent) {  // bucket 1: every layer and the LM head in one kernel
      decode_persistent(persist_, s_);                                    // logits [1, V]
      sample(logits_, V, states_, true, sample_ws_, d_out_, s_, false);  // out [1] (greedy)
      return;
    }
    if (w_.fp8) {
      forward_fp8(p);
      return;
    }
    for (int l = 0; l < c_.num_layers; ++l) {
      const LayerWeights<T>& L = w_.layers[size_t(l)];
      rmsnorm(h_, L.attn_norm, rows, D, eps, xn_, s_, pdl_);  // XN [rows, D]
      if (t_out)
        (*gemm_)(L.wqkv, xn_, rows, qkvd, D, big_t, false);  // QKV [rows, qkv] T
      else
        matmul(L.wqkv, xn_, rows, qkvd, D, big_, 0.0f, p.mm);  // QKV [rows, qkv]
      rope_attend(p, l);                                  // Q roped, K, V -> pool; ATT [rows, qd]
      matmul(L.wo, attn_, rows, D, qd, h_, 1.0f, p.mm);   // H += ATT Wo^T
      rmsnorm(h_, L.ffn_norm, rows, D, eps, xn_, s_, pdl_);  // XN [rows, D]
      if (t_out) {
        (*gemm_)(L.w_gate_up, xn_, rows, 2 * I, D, big_t, false);  // GU [rows, 2I] T
        silu_mul(big_t, rows, I, xn_, s_, pdl_);                   // ACT [rows, I]
      } else {
        matmul(L.w_gate_up, xn_, rows, 2 * I, D, big_, 0.0f, p.mm);  // GU [rows, 2I]
        silu_mul(big_, rows, I, xn_, s_, pdl_);                      // ACT [rows, I]
      }
      matmul(L.w_down, xn_, rows, D, I, h_, 1.0f, p.mm);  // H += ACT Wd^T
    }
    lm_head(p);
  }

  // The same layers with FP8 linears (W8A8): each linear's input is quantized
  // per token by the kernel that produces it (rmsnorm_fp8, silu_mul_fp8; the
  // attention output by quantize_rows_fp8), XQ [rows, K] e4m3 with XS [rows]
  // scales, and cuBLASLt scales the product by XS and the weight's row scales.
  void forward_fp8(const StepPlan& p) {
    const int D = c_.hidden_size, I = c_.intermediate_size;
    const int qd = c_.q_dim(), qkvd = c_.qkv_dim(), rows = p.rows;
    const float eps = c_.rms_norm_eps;
    T* big_t = reinterpret_cast<T*>(big_);
    for (int l = 0; l < c_.num_layers; ++l) {
      const LayerWeights<T>& L = w_.layers[size_t(l)];
      rmsnorm_fp8(h_, L.attn_norm, rows, D, eps, L.qkv8.input_scale, xq_, xs_, s_);  // XQ [rows, D]
      gemm_->fp8(L.qkv8, xq_, xs_, rows, qkvd, D, big_t, false);  // QKV [rows, qkv] T
      rope_attend(p, l);  // Q roped, K, V -> pool; ATT [rows, qd]
      quantize_rows_fp8(attn_, rows, qd, L.o8.input_scale, xq_, xs_, s_);  // XQ [rows, qd]
      gemm_->fp8(L.o8, xq_, xs_, rows, D, qd, h_, true);                   // H += ATT Wo^T
      rmsnorm_fp8(h_, L.ffn_norm, rows, D, eps, L.gate_up8.input_scale, xq_, xs_, s_);
      gemm_->fp8(L.gate_up8, xq_, xs_, rows, 2 * I, D, big_t, false);  // GU [rows, 2I] T
      silu_mul_fp8(big_t, rows, I, L.down8.input_scale, xq_, xs_, s_);  // XQ [rows, I]
      gemm_->fp8(L.down8, xq_, xs_, rows, D, I, h_, true);             // H += ACT Wd^T
    }
    lm_head(p);
  }

  // What paged_rope_kv does to a layer's QKV rows before RoPE: Qwen2's
  // biases, Qwen3's per-head q/k norms (none for Llama and Mistral).
  QkvPre<T> qkv_pre(const LayerWeights<T>& L) const {
    return {L.bqkv, L.q_norm, L.k_norm, c_.rms_norm_eps};
  }

  // The final norm and the LM head (in T) on the logits rows, greedy picks.
  void lm_head(const StepPlan& p) {
    const int D = c_.hidden_size, V = c_.vocab_size;
    if (p.m == 0) return;
    rmsnorm_gather(h_, p.head_rows, w_.final_norm, p.m, D, c_.rms_norm_eps, last_, s_,
                   pdl_);                                          // [m, D]
    matmul(w_.lm_head, last_, p.m, V, D, logits_, 0.0f, p.mm);  // logits [m, V]
    argmax_rows(logits_, p.m, V, d_out_, s_, pdl_);             // out [m] (greedy)
  }

  void matmul(const T* W, const T* x, int m, int N, int K, float* y, float beta, Matmul mm) {
    if (m <= mm.gemv_rows)
      gemv_batched(W, x, m, N, K, y, beta, s_);
    else
      (*gemm_)(W, x, m, N, K, y, beta != 0.0f);
  }

  // Rows with temperature > 0 overwrite their greedy pick (engine/sampling.h
  // semantics): all at once (one segmented sort, one pick launch) from
  // batch_from_ rows up, else one row at a time through the one-row sampler.
  // Their states and rows go through the flight's pinned staging
  // (stage_non_greedy, at launch); sample_rows() runs them and queues the
  // ids' copy back.
  void sample_rows(Flight& f) {
    sample_non_greedy(f);
    if (!f.which.empty())
      HAYATE_CUDA_CHECK(cudaMemcpyAsync(f.out.data(), d_out_, sizeof(int32_t) * size_t(f.m),
                                        cudaMemcpyDeviceToHost, s_));
    HAYATE_CUDA_CHECK(cudaEventRecord(f.done, s_));
  }

  void stage_non_greedy(const Batch& batch, Flight& f) {
    int n = 0;
    for (size_t j = 0; j < f.which.size(); ++j) {
      const BatchSeq& s = batch.seqs[size_t(f.which[j])];
      const SamplingParams& p = *s.sampling;
      if (p.greedy()) continue;
      f.states[size_t(n)] =
          StepState{0, 0, p.seed, s.sample_step, p.temperature, p.top_p, p.min_p, p.top_k};
      f.ng_rows[size_t(n)] = f.slot[j];
      ++n;
    }
    f.n_ng = n;
  }

  void sample_non_greedy(Flight& f) {
    const int n = f.n_ng;
    if (n == 0) return;
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(states_, f.states.data(), sizeof(StepState) * size_t(n),
                                      cudaMemcpyHostToDevice, s_));
    if (n >= batch_from_) {
      HAYATE_CUDA_CHECK(cudaMemcpyAsync(d_ng_rows_, f.ng_rows.data(), sizeof(int32_t) * size_t(n),
                                        cudaMemcpyHostToDevice, s_));
      sample_batched(logits_, c_.vocab_size, d_ng_rows_, states_, n, max_seqs_, batch_ws_, d_out_,
                     s_);
      return;
    }
    for (int j = 0; j < n; ++j)
      sample(logits_ + size_t(f.ng_rows[size_t(j)]) * c_.vocab_size, c_.vocab_size, states_ + j,
             false, sample_ws_, d_out_ + f.ng_rows[size_t(j)], s_, false);
  }

  // Block-table row `slot` on the device becomes `table` (its first
  // table.size() entries): the entries that differ from what the device
  // holds go into this step's metadata.
  void update_table(int slot, std::span<const int32_t> table) {
    int32_t* mirror = table_mirror_.data() + size_t(slot) * max_blocks_;
    for (size_t j = 0; j < table.size(); ++j) {
      if (mirror[j] == table[j]) continue;
      mirror[j] = table[j];
      packer_.table(int32_t(size_t(slot) * max_blocks_ + j), table[j]);
    }
  }

  StepMetaDst meta_dst() const {
    return {d_tokens_, d_pos_, d_seq_, d_dec_, d_tiles_, d_sample_rows_, d_tables_};
  }

  // Uploads what packer_ holds now and waits (start-up: captures, trials).
  void upload_meta_now() {
    const size_t words = packer_.pack(flights_[0].meta.data());
    unpack_step_meta(flights_[0].meta_dev, words, meta_dst(), d_out_, s_);
    HAYATE_CUDA_CHECK(cudaStreamSynchronize(s_));
  }

  template <typename E>
  void upload(E* dst, const E* src, size_t n) {
    if (n == 0) return;
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(E), cudaMemcpyHostToDevice, s_));
  }

  template <typename E>
  E* alloc(size_t n) {
    bufs_.emplace_back(std::max<size_t>(n, 1) * sizeof(E));
    return bufs_.back().as<E>();
  }

  void alloc_workspace() {
    const size_t T_ = size_t(max_tokens_), S = size_t(max_seqs_);
    const int D = c_.hidden_size, I = c_.intermediate_size;
    h_ = alloc<float>(T_ * D);
    xn_ = alloc<T>(T_ * size_t(std::max(D, I)));
    big_ = alloc<float>(T_ * size_t(std::max(c_.qkv_dim(), 2 * I)));
    q_ = alloc<float>(T_ * c_.q_dim());
    attn_ = alloc<T>(T_ * c_.q_dim());
    attn_f_ = alloc<float>(c_.q_dim());  // bucket 1's one row
    if (w_.fp8) {  // a linear's quantized input and its per-token scales
      xq_ = alloc<uint8_t>(T_ * size_t(std::max({D, I, c_.q_dim()})));
      xs_ = alloc<float>(T_);
    }
    if (persistent_) {  // bucket 1's persistent kernel (init_persistent)
      persist_layers_ = alloc<PersistentLayer<T>>(size_t(c_.num_layers));
      persist_h2_ = alloc<float>(D);
      persist_part_o_ = alloc<float>(size_t(persistent_max_splits()) * c_.q_dim());
      persist_part_ml_ = alloc<float>(size_t(persistent_max_splits()) * c_.num_heads * 2);
      persist_barrier_ = alloc<unsigned>(2);
      persist_counters_ = alloc<int>(size_t(persistent_counters(c_.num_layers, persist_units())));
      if (c_.qk_norm) persist_k_raw_ = alloc<float>(size_t(c_.kv_dim()));
    }
    const size_t R = size_t(max_logit_rows_);  // >= S
    last_ = alloc<T>(R * D);
    logits_ = alloc<float>(R * size_t(c_.vocab_size));
    part_o_ = alloc<float>(S * c_.num_heads * size_t(n_splits_) * c_.head_dim);
    part_ml_ = alloc<float>(S * c_.num_heads * size_t(n_splits_) * 2);
    const std::vector<float> inv = rope_inv_freq(c_);
    inv_freq_ = alloc<float>(inv.size());
    upload(inv_freq_, inv.data(), inv.size());
    d_tokens_ = alloc<int32_t>(T_);
    d_pos_ = alloc<int32_t>(T_);
    d_seq_ = alloc<int32_t>(T_);
    d_dec_ = alloc<int32_t>(T_);
    d_tiles_ = alloc<int32_t>(2 * (T_ + S));
    d_sample_rows_ = alloc<int32_t>(R);
    d_ident_ = alloc<int32_t>(S);
    d_tables_ = alloc<int32_t>(S * size_t(max_blocks_));
    d_out_ = alloc<int32_t>(R);
    states_ = alloc<StepState>(S);
    const size_t ws = sampling_workspace_bytes(c_.vocab_size);
    sample_ws_ = alloc<char>(ws);
    HAYATE_CUDA_CHECK(cudaMemsetAsync(sample_ws_, 0, ws, s_));
    d_ng_rows_ = alloc<int32_t>(S);
    d_mask_rows_ = alloc<int32_t>(S);
    d_masks_ = alloc<uint32_t>(S * size_t(mask_words()));
    if (sampler_ == SamplerPath::kAuto &&
        (int64_t(c_.vocab_size) * max_seqs_ >= INT_MAX || max_seqs_ > 65535))
      sampler_ = SamplerPath::kRows;  // past the batched sort's int item count or grid rows
    if (sampler_ != SamplerPath::kRows) {  // [2, 2, max_seqs, vocab] sort buffers (~0.5 GB at 256 x 128256)
      batch_ws_ = alloc<char>(batched_sampling_workspace_bytes(c_.vocab_size, max_seqs_));
      batched_sampling_init(batch_ws_, c_.vocab_size, max_seqs_, s_);
    }
    // The packed metadata's worst case: every array full, every table entry new.
    const size_t meta_words = size_t(kStepMetaHeaderWords) + 4 * T_ + 2 * (T_ + S) + R +
                              2 * S * size_t(max_blocks_);
    for (Flight& f : flights_) {
      f.meta = PinnedInts(meta_words);
      void* mapped = nullptr;
      HAYATE_CUDA_CHECK(cudaHostGetDevicePointer(&mapped, f.meta.data(), 0));
      f.meta_dev = static_cast<const int32_t*>(mapped);
      f.out = PinnedInts(R);
      f.states = Pinned<StepState>(S);
      f.ng_rows = PinnedInts(S);
      f.mask_rows = PinnedInts(S);
      f.masks = Pinned<uint32_t>(S * size_t(mask_words()));
      HAYATE_CUDA_CHECK(cudaEventCreateWithFlags(&f.done, cudaEventDisableTiming));
    }
    table_mirror_.assign(S * size_t(max_blocks_), -1);
    std::vector<int32_t> ident(S);
    for (size_t i = 0; i < S; ++i) ident[i] = int32_t(i);
    upload(d_ident_, ident.data(), S);
    HAYATE_CUDA_CHECK(cudaStreamSynchronize(s_));
  }

  // The pool: what is left of fraction * total after everything above, or
  // exactly options.num_blocks. One extra block (index num_blocks) is the
  // scratch block of graph padding rows.
  void alloc_pool(const BatchBackendOptions& o) {
    const size_t elem = kv8_ ? 1 : sizeof(T);  // e4m3: twice the tokens of a 16-bit pool
    const size_t per_block = 2 * size_t(c_.num_layers) * block_size_ * c_.kv_dim() * elem;
    size_t free_b = 0, total_b = 0;
    HAYATE_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (o.num_blocks > 0) {
      num_blocks_ = o.num_blocks;
      const double need = double(per_block) * (double(num_blocks_) + 1.0);
      HAYATE_CHECK(need + double(64 << 20) <= double(free_b), "the KV pool of ", num_blocks_,
                   " blocks needs ", need / 1e9, " GB, but only ", double(free_b) / 1e9,
                   " GB of the GPU's ", double(total_b) / 1e9,
                   " GB are free after the weights (lower --max-context or --num-kv-blocks)");
    } else {
      const double budget = o.gpu_memory_fraction * double(total_b) - double(total_b - free_b) -
                            double(64 << 20);  // graphs and cuBLAS internals
      num_blocks_ = budget > 0 ? int(std::min(budget / double(per_block) - 1, 2.0e9)) : 0;
    }
    HAYATE_CHECK(int64_t(num_blocks_) * block_size_ >= max_model_len_, "the KV pool holds ",
                 int64_t(std::max(num_blocks_, 0)) * block_size_,
                 " tokens, less than --max-model-len ", max_model_len_, " (", double(free_b) / 1e9,
                 " GB free of ", double(total_b) / 1e9,
                 " GB; raise --gpu-memory-fraction or lower --max-model-len)");
    k_pool_ = DeviceBuffer(per_block / 2 * size_t(num_blocks_ + 1));
    v_pool_ = DeviceBuffer(per_block / 2 * size_t(num_blocks_ + 1));
    std::fprintf(stderr, "hayate: KV pool %d blocks of %d tokens (%.2f GB, %lld tokens, %s K/V)\n",
                 num_blocks_, block_size_, double(per_block) * (num_blocks_ + 1) / 1e9,
                 static_cast<long long>(num_blocks_) * block_size_,
                 kv8_ ? "e4m3" : (std::is_same_v<T, half> ? "fp16" : "bf16"));
  }

  // Bucket 1's persistent kernel (decode_persistent.cu): the one row's
  // position and block table (slot 0), the paged pools of each layer, fp32
  // activations of row 0 (attn_f_, big_ as act); its own second residual
  // buffer, attention partials, barrier and counters.
  void init_persistent(const BatchBackendOptions& o) {
    const size_t layer_elems = size_t(num_blocks_ + 1) * block_size_ * c_.kv_dim();
    std::vector<PersistentLayer<T>> layers;
    for (int l = 0; l < c_.num_layers; ++l) {
      const LayerWeights<T>& L = w_.layers[size_t(l)];
      PersistentLayer<T> pl{L.attn_norm, L.wqkv, L.wo, L.ffn_norm, L.w_gate_up, L.w_down,
                            k_pool_.as<T>() + size_t(l) * layer_elems,
                            v_pool_.as<T>() + size_t(l) * layer_elems};
      pl.wqkv8 = L.qkv8.w, pl.wo8 = L.o8.w, pl.w_gate_up8 = L.gate_up8.w, pl.w_down8 = L.down8.w;
      pl.s_qkv = L.qkv8.scale, pl.s_o = L.o8.scale, pl.s_gate_up = L.gate_up8.scale;
      pl.s_down = L.down8.scale;
      pl.in_qkv = L.qkv8.input_scale, pl.in_o = L.o8.input_scale;
      pl.in_gate_up = L.gate_up8.input_scale, pl.in_down = L.down8.input_scale;
      pl.bqkv = L.bqkv, pl.q_norm = L.q_norm, pl.k_norm = L.k_norm;
      layers.push_back(pl);
    }
    upload(persist_layers_, layers.data(), layers.size());
    HAYATE_CUDA_CHECK(cudaMemsetAsync(persist_barrier_, 0, 2 * sizeof(unsigned), s_));
    HAYATE_CUDA_CHECK(cudaMemsetAsync(
        persist_counters_, 0,
        size_t(persistent_counters(c_.num_layers, persist_units())) * sizeof(int), s_));
    HAYATE_CUDA_CHECK(cudaStreamSynchronize(s_));  // `layers` leaves scope
    persist_ = PersistentDecode<T>{persist_layers_,
                                   c_.num_layers,
                                   c_.hidden_size,
                                   c_.intermediate_size,
                                   c_.vocab_size,
                                   c_.num_heads,
                                   c_.num_kv_heads,
                                   c_.head_dim,
                                   c_.rms_norm_eps,
                                   w_.final_norm,
                                   w_.lm_head,
                                   inv_freq_,
                                   d_pos_,
                                   d_tables_,
                                   block_size_,
                                   h_,
                                   persist_h2_,
                                   q_,
                                   big_,
                                   attn_f_,
                                   persist_part_o_,
                                   persist_part_ml_,
                                   logits_,
                                   persist_barrier_,
                                   persist_counters_,
                                   w_.fp8,
                                   c_.qk_norm,
                                   persist_k_raw_};
    // A trial step before capture: slot 0 at position 0 of the scratch block
    // (graph padding's); activations are whatever the buffers hold.
    packer_.clear();
    packer_.row(0, 0, 0);
    update_table(0, std::span<const int32_t>(&num_blocks_, 1));
    upload_meta_now();
    const bool refuse = o.switches.persistent == PersistentMode::kRefuseTrial;
    if (!decode_persistent_trial(persist_, s_, refuse)) persist_ = PersistentDecode<T>{};
  }

  // The decode graphs (batch_graphs.cu): forward(B rows, all decode, all
  // sampled) per bucket on padding rows only (position 0 of the scratch block).
  void capture_graphs() {
    packer_.clear();
    for (int r = 0; r < max_seqs_; ++r) {
      packer_.row(0, 0, r);
      update_table(r, std::span<const int32_t>(&num_blocks_, 1));
    }
    upload_meta_now();
    // Large buckets' second graph: one split per row while every row fits
    // (where that bound is below the table's reach; else the regular graph is it).
    const auto whole_keys = [&](int B) {
      const int wk = paged_decode_whole_row_keys(B, c_.num_kv_heads);
      return wk < max_blocks_ * block_size_ ? wk : 0;
    };
    graphs_.capture(
        max_seqs_, matmul_, persist_.layers != nullptr, !w_.fp8, kShortGraphMaxRows, whole_keys, s_,
        [&](int B, Matmul mm, bool short_attn, int attn_keys) {
          forward(planned(StepPlan{B, d_ident_, B, 0, d_ident_, B, mm, short_attn, attn_keys}));
        });
  }

  // The two samplers' crossover on this device (auto): one row through the
  // per-row path costs r; the batched pass over n rows costs about the same
  // while its blocks fit the SMs. Batched from the first bucket n where it
  // beats n * r. Logits: one pseudo-random row [vocab] copied to every row,
  // T = 1 and no filter (the walk covers the whole row: the slowest case).
  void time_samplers() {
    if (sampler_ != SamplerPath::kAuto) {
      batch_from_ = sampler_ == SamplerPath::kBatched ? 1 : INT_MAX;
      return;
    }
    const size_t V = size_t(c_.vocab_size);
    std::vector<float> row(V);
    for (size_t i = 0; i < V; ++i) row[i] = 8.0f * uniform01(7, 0, i);
    upload(logits_, row.data(), V);
    for (int r = 1; r < max_seqs_; ++r)
      HAYATE_CUDA_CHECK(cudaMemcpyAsync(logits_ + r * V, logits_, V * sizeof(float),
                                        cudaMemcpyDeviceToDevice, s_));
    std::vector<StepState> st(size_t(max_seqs_), StepState{0, 0, 1, 0, 1.0f, 1.0f, 0.0f, 0});
    upload(states_, st.data(), st.size());
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(d_ng_rows_, d_ident_, sizeof(int32_t) * size_t(max_seqs_),
                                      cudaMemcpyDeviceToDevice, s_));  // rows 0, 1, ...
    const int Vi = c_.vocab_size;
    const float row_ms = time_on_stream(
        s_, [&] { sample(logits_, Vi, states_, false, sample_ws_, d_out_, s_, false); }, 3);
    float batch_ms = 0.0f;
    for (int n : graphs_.buckets()) {
      batch_ms = time_on_stream(
          s_,
          [&] {
            sample_batched(logits_, Vi, d_ng_rows_, states_, n, max_seqs_, batch_ws_, d_out_, s_);
          },
          3);
      if (batch_ms <= float(n) * row_ms) {
        batch_from_ = n;
        break;
      }
    }
    std::fprintf(stderr,
                 "hayate: sampling %.0f us per row one by one, batched %.0f us at %d rows: "
                 "batched from %s non-greedy rows\n",
                 row_ms * 1e3f, batch_ms * 1e3f, std::min(batch_from_, max_seqs_),
                 batch_from_ == INT_MAX ? "no" : std::to_string(batch_from_).c_str());
  }

  // The shared checks plus this backend's limits (workspace rows, block-table
  // stride, vocabulary rows of the embedding, sampling params).
  void validate(const Batch& batch) const {
    validate_batch(batch, max_model_len_, block_size_, num_blocks_, max_logit_rows_,
                   last_flight_ >= 0 ? flights_[size_t(last_flight_)].seqs : 0);
    HAYATE_CHECK(int(batch.seqs.size()) <= max_seqs_, "batch step: ", batch.seqs.size(),
                 " sequences exceed --max-num-seqs ", max_seqs_);
    HAYATE_CHECK(batch.num_tokens <= max_tokens_, "batch step: ", batch.num_tokens,
                 " tokens exceed --max-num-batched-tokens ", max_tokens_);
    for (const BatchSeq& s : batch.seqs) {
      HAYATE_CHECK(int(s.block_table.size()) <= max_blocks_, "batch step: sequence ", s.seq_id,
                   " has ", s.block_table.size(), " blocks, more than max_model_len needs");
      for (int32_t t : s.tokens)
        HAYATE_CHECK(t >= 0 && t < c_.vocab_size, "batch step: token id ", t, " outside [0, ",
                     c_.vocab_size, ")");
      if (s.sample) s.sampling->validate();
    }
  }

  ModelConfig c_;
  int device_ = 0;
  int max_model_len_ = 0, block_size_ = 0, num_blocks_ = 0, max_seqs_ = 0, max_tokens_ = 0;
  int max_blocks_ = 0, n_splits_ = 1, max_logit_rows_ = 0;
  int short_keys_ = 0;  // decode contexts up to this many keys: one-pass attention
  DecodeMatmul matmul_ = DecodeMatmul::kAuto;
  cudaStream_t s_ = nullptr;
  std::unique_ptr<BatchGemm<T>> gemm_;
  DeviceWeights<T> w_;
  std::vector<DeviceBuffer> bufs_;
  DeviceBuffer k_pool_, v_pool_;  // [layers, num_blocks + 1, block_size, kv_dim] each, T or e4m3
  bool kv8_ = false;              // --kv-cache-dtype fp8: the pools hold e4m3 codes
  std::vector<float> k_scales_, v_scales_;  // per layer: e4m3 code * scale is the value
  // Activations (fp32 residual stream, T GEMM inputs), rows = tokens of a step.
  float *h_ = nullptr, *big_ = nullptr, *q_ = nullptr, *logits_ = nullptr, *inv_freq_ = nullptr;
  float *part_o_ = nullptr, *part_ml_ = nullptr, *attn_f_ = nullptr;
  T *xn_ = nullptr, *attn_ = nullptr, *last_ = nullptr;
  uint8_t* xq_ = nullptr;  // FP8: a linear's input codes [rows, K]
  float* xs_ = nullptr;    // FP8: their scales [rows]
  // Step metadata (device) and its host staging.
  int32_t *d_tokens_ = nullptr, *d_pos_ = nullptr, *d_seq_ = nullptr, *d_dec_ = nullptr;
  int32_t *d_tiles_ = nullptr, *d_sample_rows_ = nullptr, *d_ident_ = nullptr;
  int32_t *d_tables_ = nullptr, *d_out_ = nullptr;
  StepState* states_ = nullptr;
  int32_t* d_ng_rows_ = nullptr;  // [max_seqs] logits rows of the non-greedy picks
  int32_t* d_mask_rows_ = nullptr;  // [max_seqs] logits rows sampled under a grammar mask
  uint32_t* d_masks_ = nullptr;     // [max_seqs, mask words] their masks
  bool awaiting_masks_ = false;     // the last launched step waits for sample_masked()
  char *sample_ws_ = nullptr, *batch_ws_ = nullptr;
  SamplerPath sampler_ = SamplerPath::kAuto;
  bool persistent_ = false;  // bucket 1 may run on the persistent kernel
  bool pdl_ = false;  // the step's own kernels with programmatic dependent launch (launch.h)
  PersistentDecode<T> persist_{};  // layers == nullptr: bucket 1 on batched GEMVs or cuBLAS
  unsigned long long* trace_ = nullptr;  // the persistent kernel's timestamps (profile_step)
  bool profile_persistent_ = false;      // profile_step(): bucket 1's forward runs eagerly
  PersistentLayer<T>* persist_layers_ = nullptr;
  float *persist_h2_ = nullptr, *persist_part_o_ = nullptr, *persist_part_ml_ = nullptr;
  float* persist_k_raw_ = nullptr;  // qk_norm: QKV's un-normalised k row
  unsigned* persist_barrier_ = nullptr;
  int* persist_counters_ = nullptr;
  // The persistent kernel's attention units (its counters are per unit).
  int persist_units() const { return persistent_attn_units(c_.num_heads, c_.num_kv_heads); }
  int batch_from_ = INT_MAX;  // steps with this many non-greedy rows or more: batched
  Flight flights_[2];
  int last_flight_ = -1;  // the flight of the last launched step
  std::deque<int> unfinished_;      // flights launched, not finished, oldest first
  StepMetaPacker packer_;
  std::vector<int32_t> table_mirror_;  // [max_seqs, max_blocks] the device's block tables
  std::vector<int> last_slot_;  // logits row of each sampled seq of the last step
  std::vector<int> last_first_, last_count_;  // per seq of the last step: its logits rows
  DecodeGraphReplays replays_;  // all-decode steps per kind of graph (test hook)
  DecodeGraphs graphs_;
};

}  // namespace
}  // namespace cuda

std::vector<float> cuda_batch_last_logits(BatchBackend& backend) {
  auto* peek = dynamic_cast<cuda::LogitsPeek*>(&backend);
  HAYATE_CHECK(peek != nullptr, "cuda_batch_last_logits: backend ", backend.name(),
               " is not the batched cuda backend");
  return peek->last_logits();
}

DecodeGraphReplays cuda_batch_graph_replays(BatchBackend& backend) {
  auto* peek = dynamic_cast<cuda::LogitsPeek*>(&backend);
  HAYATE_CHECK(peek != nullptr, "cuda_batch_graph_replays: backend ", backend.name(),
               " is not the batched cuda backend");
  return peek->graph_replays();
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::unique_ptr<BatchBackend> make_cuda_batch_backend(const Model& model,
                                                      const BatchBackendOptions& options,
                                                      DecodeMatmul matmul) {
  const int n = cuda_device_count();
  HAYATE_CHECK(n > 0, "no CUDA GPU is visible (use --backend cpu)");
  HAYATE_CHECK(options.device >= 0 && options.device < n, "GPU ", options.device,
               " does not exist (", n, " visible)");
  HAYATE_CHECK(cuda::kernels_supported(options.device),
               "this GPU is not supported by this build (compiled for sm_90a)");
  switch (options.dtype) {  // the one place where the runtime dtype becomes T
    case DType::F16:
      return std::make_unique<cuda::CudaBatchBackend<half>>(model, options, matmul);
    case DType::BF16:
      return std::make_unique<cuda::CudaBatchBackend<__nv_bfloat16>>(model, options, matmul);
    case DType::F32:
    case DType::F8E4M3:
      break;
  }
  fail(cat("the batched cuda backend runs float16 or bfloat16 (--dtype), not ",
           dtype_name(options.dtype), " (FP8 is --quantization fp8, with --dtype the 16-bit type)"));
}

}  // namespace hayate
