// What the engine needs from a model backend (cpu or cuda): one forward step
// over many sequences whose KV entries live in a paged pool of fixed-size
// blocks. Every caller runs through it: a single request is a batch of one.
// The backend owns the pool (it sizes it: from free memory on the GPU, from an
// option on the CPU); the engine's BlockManager decides which block holds
// which tokens and hands the backend a block table per sequence.
//
// Pool layout contract: block b of layer l holds the K and V rows of
// block_size consecutive positions; position p of a sequence lives in block
// block_table[p / block_size] at row p % block_size. How a backend lays the
// rows out in memory is its own business.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/switches.h"
#include "engine/block_manager.h"
#include "engine/sampling.h"
#include "model/config.h"

namespace hayate {

// Times a region of work: the steady clock, from a point where the device is
// idle (cuda: start() synchronizes the backend's stream). stop_ms() is called
// once the host holds the region's results (milliseconds since start()).
class RegionTimer {
 public:
  virtual ~RegionTimer() = default;
  virtual void start() = 0;
  virtual double stop_ms() = 0;
};

struct StepTimes;  // engine/step_profile.h

struct DeviceInfo {
  std::string name = "cpu";
  std::string driver_version;  // e.g. "580.95.05"
  std::string cuda_runtime;    // e.g. "13.0"
  int sm_count = 0;
  double memory_gb = 0.0;
};

// Sustained matmul rates, TFLOP/s (0: not measured).
struct MatmulRates {
  double tflops = 0;      // in the model's dtype (16-bit on the GPU, fp32 on the CPU)
  double fp8_tflops = 0;  // e4m3 operands: the layers' linears with FP8 weights
};

// The KV pool's element type (vLLM's --kv-cache-dtype): auto, the compute
// dtype; fp8, e4m3 with a per-layer scale for K and one for V (the
// checkpoint's k_scale / v_scale, else 1.0), attention accumulating in fp32.
enum class KvCacheDtype { kAuto, kFp8 };

struct BatchBackendOptions {
  int block_size = 16;               // tokens per KV block
  int num_blocks = 0;  // blocks in the pool; 0 = CPU: enough for max_model_len * 4, GPU: what
                       // gpu_memory_fraction leaves
  double gpu_memory_fraction = 0.9;  // GPU: share of device memory for weights + workspace + KV
  int max_model_len = 0;   // longest sequence (prompt + output); 0 = min(config max, 8192)
  int max_num_seqs = 256;  // most sequences in one step (graph buckets, workspace)
  int max_num_batched_tokens = 8192;  // most tokens in one step (workspace)
  int max_logit_rows = 0;  // most logits rows in one step (all_logits chunks); 0 = max_num_seqs
  DType dtype = DType::F16;           // GPU compute/weight dtype (cpu is always fp32)
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  int device = 0;
  // Ranks the model is split across (Megatron-style, model/tensor_parallel.h):
  // the cpu backend simulates them as threads; the cuda backend runs 1.
  int tensor_parallel_size = 1;
  // Called as weights load (bytes of the checkpoint's data, or of generated
  // dummy data, done so far of the total); may be empty.
  std::function<void(uint64_t done, uint64_t total)> on_load_progress;
  Switches switches;                  // the lab's and tests' path choices (core/switches.h)
};

// One sequence's share of a step. The spans point into engine-owned storage
// that stays valid for the duration of step().
struct BatchSeq {
  uint64_t seq_id = 0;                       // stable for the request's lifetime
  std::span<const int32_t> tokens;           // ids to run now (a prefill chunk, or one decode id)
  int start_pos = 0;                         // position of tokens[0]; [0, start_pos) is cached
  std::span<const int32_t> block_table;      // physical blocks covering [0, start_pos + n)
  bool sample = false;                       // sample one id after the chunk's last token
  bool all_logits = false;                   // keep the fp32 logits of every token of the chunk
  const SamplingParams* sampling = nullptr;  // valid when sample
  uint64_t sample_step = 0;                  // random stream index: tokens generated so far
  // >= 0: tokens (one) is a stand-in for the id the previous launched step
  // sampled for its seqs[prev_slot], which the backend takes from there (on
  // the device) so the step can be launched before that id reached the host.
  int prev_slot = -1;
  // Sample under a token mask (a grammar's) that the host hands over after
  // launch() through sample_masked(); only with sample.
  bool masked = false;
};

struct Batch {
  std::vector<BatchSeq> seqs;
  int num_tokens = 0;  // sum of seqs[i].tokens.size()
  // Block copies (copy on write) done in order before the step's forward, in
  // every layer, K and V: a sequence of this step may read and write dst.
  std::vector<BlockCopy> copies;

  bool all_decode() const {  // every sequence runs exactly one token (graph-friendly)
    return num_tokens == int(seqs.size());
  }
};

class BatchBackend {
 public:
  virtual ~BatchBackend() = default;
  virtual std::string name() const = 0;
  virtual const ModelConfig& config() const = 0;
  virtual int num_blocks() const = 0;  // KV blocks in the pool
  virtual int block_size() const = 0;  // tokens per block
  virtual int max_model_len() const = 0;
  // Most logits rows one step computes: a row per sampling sequence plus a
  // row per token of each all_logits sequence.
  virtual int max_logit_rows() const = 0;

  // Runs every sequence's tokens at its positions, writing their K and V into
  // the sequence's blocks and attending over [0, start_pos + n). For each i
  // with seqs[i].sample, writes the sampled id to sampled[i]; other entries
  // are left as they are. sampled.size() == batch.seqs.size(). Throws Error on
  // bad input (token id out of range, block id out of the pool, position past
  // max_model_len); after a throw the blocks of this batch's sequences may
  // hold garbage, which the engine handles by failing those sequences.
  // step() is launch() then finish().
  void step(const Batch& batch, std::span<int32_t> sampled);

  // launch() enqueues a step and returns once `batch` is no longer needed (its
  // spans may change); the device may still be running it, or the one before.
  // At most two steps are launched and not finished; steps run in launch
  // order, so a step may read KV the one before it writes, and blocks freed
  // after a launch may be handed to the next. finish() waits for the oldest
  // unfinished step and writes its sampled ids as step() does (sampled.size()
  // == that batch's seqs). The logits readers below refer to the last
  // finished step and are valid only while no later step is launched.
  virtual void launch(const Batch& batch) = 0;
  virtual void finish(std::span<int32_t> sampled) = 0;

  // A launched step with masked sequences samples those once their masks
  // are here: masks holds mask_words() words per masked sequence, in batch
  // order (bit id % 32 of word id / 32 set = id allowed); their logits of
  // other ids become -inf before any sampling mode (greedy included) picks.
  // Called exactly once for such a step, after its launch() and before the
  // next launch() or its finish(): the host computes the masks while the
  // device runs the step's forward pass.
  // The default (test doubles) supports no masks and throws Error.
  virtual void sample_masked(std::span<const uint32_t> masks);
  int mask_words() const { return (config().vocab_size + 31) / 32; }

  // The device it runs on (the CPU default leaves the GPU fields empty).
  virtual DeviceInfo device_info() const { return {}; }
  virtual std::unique_ptr<RegionTimer> make_timer();  // default: steady clock
  // Measured device read bandwidth in GB/s (a large on-device copy), 0 on cpu.
  virtual double measure_read_bandwidth_gbs() { return 0.0; }
  // Sustained matmul rates in TFLOP/s, for `hayate profile`'s floors: the
  // model dtype's (a large GEMM on the GPU, the fp32 matmul op on the CPU)
  // and, where the layers' linears are FP8 on tensor cores, the FP8 one.
  virtual MatmulRates measure_matmul_rates() { return {}; }
  // step() once, with what it ran and how long each op took (`hayate
  // profile`): no step may be in flight. Times are the device's (cuda:
  // CUPTI's kernel records; the persistent kernel's phases from its own
  // timestamps) or the host's per op (cpu). Default: step(), no per-op times.
  virtual StepTimes profile_step(const Batch& batch, std::span<int32_t> sampled);
  // Bytes of weights one decode step reads (every weight once, lm_head included).
  virtual double weight_bytes_per_token() const = 0;

  // The fp32 logits [vocab] of the j-th sampling sequence (in batch order) of
  // the last step(), for sampling that runs on the host (penalties, logprobs).
  // Throws Error when j is not in [0, sampling sequences of the last step).
  virtual void last_logits_row(int j, std::span<float> out) = 0;

  // The fp32 logits [n, vocab] of seqs[i] of the last step(), which had
  // all_logits set (n = its token count): row t predicts the token after
  // tokens[t]. Throws Error when seqs[i] did not ask for them.
  virtual void last_chunk_logits(int i, std::span<float> out) = 0;
};

// The checks every backend makes of a step's input (throws Error): sequences
// present, one output slot each, tokens in each, positions inside
// [0, max_model_len), enough blocks in the table for them, block ids inside
// [0, num_blocks), sampling params where sampling, num_tokens the sum,
// copies between two different blocks of the pool.
// Also: at most max_logit_rows logits rows, and prev_slot only on a
// one-token sequence, inside [0, prev_seqs) (the previous launched step's).
void validate_batch(const Batch& batch, int max_model_len, int block_size, int num_blocks,
                    int max_logit_rows, int prev_seqs);

// Logits rows of a batch (logit_rows) and where each sequence's start in the
// [rows, vocab] logits of a step (head_row): a sampling sequence has its last
// token's row, an all_logits sequence one per token. Both backends lay out
// their LM head's output this way.
struct LogitRows {
  std::vector<int32_t> token_row;  // [rows] the token row (in batch order) of each logits row
  std::vector<int32_t> first;      // [seqs] first logits row of seqs[i], -1 when it has none
  std::vector<int32_t> sampled;    // [sampling seqs] the logits row each samples from
};
LogitRows logit_rows(const Batch& batch);

// True when this build has the CUDA backend and a GPU is visible.
bool cuda_available();

}  // namespace hayate
