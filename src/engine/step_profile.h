// What one forward step computes and moves, op by op, for `hayate profile`:
// the cost model (bytes read and written, FLOPs per op of the forward pass,
// from the model's shapes and the step's batch) and the times a backend
// measured for the same ops. Host code; both backends' forward passes run
// these ops in this order (a fused kernel covers several: see fuse_persistent).
#pragma once
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "engine/batch_backend.h"
#include "model/config.h"

namespace hayate {

// The ops of a step, in forward order. Per layer: attn_norm .. down; the
// embedding before, final_norm, lm_head and sample after. step_meta is the
// CUDA backend's upload of the step's metadata (no model math).
namespace op {
inline constexpr const char* kStepMeta = "step_meta";
inline constexpr const char* kEmbed = "embed";
inline constexpr const char* kAttnNorm = "attn_norm";
inline constexpr const char* kQkv = "qkv";
inline constexpr const char* kRopeKv = "rope_kv";
inline constexpr const char* kAttention = "attention";
inline constexpr const char* kOProj = "o_proj";
inline constexpr const char* kFfnNorm = "ffn_norm";
inline constexpr const char* kGateUp = "gate_up";
inline constexpr const char* kSiluMul = "silu_mul";
inline constexpr const char* kDown = "down";
inline constexpr const char* kFinalNorm = "final_norm";
inline constexpr const char* kLmHead = "lm_head";
inline constexpr const char* kSample = "sample";
inline constexpr const char* kBarrier = "grid_barrier";  // the persistent kernel's waits
}  // namespace op

// Bytes per element of what the step reads and writes.
struct StepDtypes {
  int weight = 2;      // weights and the KV pool
  int activation = 2;  // normalized inputs, attention output, GEMM outputs read by one kernel
  int residual = 4;    // the residual stream h, q after RoPE, logits
  // The layers' linears (QKV, o, gate/up, down) and their inputs: 1 with FP8
  // weights (e4m3 codes, W8A8; their per-row scales are not counted); 0: as
  // weight and activation. The embedding, norms and LM head stay `weight`.
  int linear = 0;
  int kv = 0;  // the KV pool: 1 with --kv-cache-dtype fp8; 0: as weight
  int linear_bytes() const { return linear ? linear : weight; }
  int linear_in_bytes() const { return linear ? linear : activation; }
  int kv_bytes() const { return kv ? kv : weight; }
};

struct OpCost {
  std::string name;  // op::k*
  std::string kind;  // gemm, norm, rope_kv, attention, act, embed, sample, meta, fused
  std::string what;  // shapes, e.g. "[64, 4096] x [6144, 4096]^T -> [64, 6144]"
  int calls = 1;     // per step (layers)
  bool per_layer = false;  // runs once in every layer (calls = layers)
  bool fp8 = false;  // its math runs on e4m3 operands (the linears of an FP8 model)
  double bytes_read = 0, bytes_written = 0, flops = 0;  // per step, all calls
};

// The op costs of one step over `batch` (its rows, contexts and logits rows).
std::vector<OpCost> step_costs(const ModelConfig& c, const StepDtypes& dt, const Batch& batch);

// The same, merged as the persistent decode kernel runs them: the norms and
// RoPE/KV write into the GEMM phases they feed (qkv, gate_up, lm_head).
std::vector<OpCost> fuse_persistent(std::vector<OpCost> ops);

// A measured op (or phase) of one step: summed over its calls.
struct OpTime {
  std::string name;
  double ms = 0;
  int kernels = 0;  // kernels (or phase instances) attributed to it
};

// What a backend measured of one profiled step.
struct StepTimes {
  std::vector<std::pair<std::string, std::string>> plan;  // what the step ran, key: value
  std::vector<OpTime> ops;  // in forward order; names from op::
  bool persistent = false;  // ran as one persistent kernel (ops are its phases)
  bool measured = false;    // per-op times present (false: see why)
  std::string why;          // why there are no per-op times
  double kernel_ms = 0;     // sum of every kernel's (op's) time
  double span_ms = 0;       // first kernel's start to last kernel's end (device)
};

// Times consecutive ops on the host's clock: lap(op) charges op with the time
// since the previous lap (or arm()). Does nothing unless armed: the CPU
// backend's forward laps every op, and only its profile_step() arms it.
class OpClock {
 public:
  void arm();
  void lap(const char* op) {
    if (armed_) lap_armed(op);
  }
  std::vector<OpTime> take();  // the laps so far, and disarms

 private:
  void lap_armed(const char* op);
  bool armed_ = false;
  std::chrono::steady_clock::time_point last_;
  std::vector<OpTime> ops_;
};

// The CUDA backend's kernels by name: meta, embed, norm, rope_kv, attention,
// act (SiLU*mul, with FP8 its quantizing form), sample, persistent, gemm (the
// batched GEMV, the FP8 small GEMM, the per-token quantization of a GEMM's
// input, which goes with the GEMM that reads it, and every kernel outside
// namespace hayate: cuBLAS's), else unknown (attributed to "other").
std::string kernel_kind(const std::string& name);

// Kernels in launch order (kind, ms) attributed to the ops of `ops` (one entry
// per call, in forward order: expand_calls()): a kernel goes to the current op
// while the kinds match, else to the next op of its kind; a kernel of no
// remaining op's kind goes to "other". Sums per op name, in first-seen order.
std::vector<OpTime> attribute(const std::vector<std::pair<std::string, double>>& kernels,
                              const std::vector<OpCost>& ops);

// One entry per call in forward order (per layer for the layer ops), with
// step_meta first where the backend uploads metadata by kernel.
std::vector<OpCost> expand_calls(const std::vector<OpCost>& ops, bool step_meta);

// The floor of one op: max(bytes / bandwidth, flops / rate), the rate of the
// op's operands (FP8 or the model dtype).
double floor_ms(const OpCost& c, double read_gbs, const MatmulRates& rates);

}  // namespace hayate
