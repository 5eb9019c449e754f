#include "engine/step_profile.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "core/check.h"

namespace hayate {
namespace {

using i64 = long long;

std::string shape(std::initializer_list<long long> dims) {
  std::string s = "[";
  for (long long d : dims) s += (s.size() > 1 ? ", " : "") + std::to_string(d);
  return s + "]";
}

// x [n, k] times W [out, k]^T; linear: one of the layers' linears (FP8 when
// the model's are).
OpCost gemm(const char* name, int calls, long long n, long long out, long long k,
            const StepDtypes& dt, bool accumulate, bool linear = true) {
  OpCost c{name, "gemm", shape({n, k}) + " x " + shape({out, k}) + "^T -> " + shape({n, out}),
           calls};
  const int out_bytes = accumulate ? dt.residual : dt.activation;
  const int w = linear ? dt.linear_bytes() : dt.weight;
  const int in = linear ? dt.linear_in_bytes() : dt.activation;
  c.bytes_read = double(out) * k * w + double(n) * k * in +
                 (accumulate ? double(n) * out * dt.residual : 0.0);
  c.bytes_written = double(n) * out * out_bytes;
  c.flops = 2.0 * n * out * k;
  c.fp8 = linear && dt.linear == 1;
  return c;
}

OpCost norm(const char* name, int calls, long long n, long long d, const StepDtypes& dt) {
  OpCost c{name, "norm", shape({n, d}), calls};
  c.bytes_read = double(n) * d * dt.residual + double(d) * dt.weight;
  c.bytes_written = double(n) * d * dt.activation;
  c.flops = 4.0 * n * d;
  return c;
}

OpCost times(OpCost c, int layers) {
  c.calls = layers;
  c.per_layer = true;
  c.bytes_read *= layers;
  c.bytes_written *= layers;
  c.flops *= layers;
  return c;
}

// One more kernel (or lap) of `name`, summed in first-seen order.
void add_time(std::vector<OpTime>& times, const std::string& name, double ms) {
  auto it = std::find_if(times.begin(), times.end(), [&](const OpTime& t) { return t.name == name; });
  if (it == times.end()) it = times.insert(times.end(), OpTime{name});
  it->ms += ms;
  ++it->kernels;
}

// a's whole output is b's input: neither the write nor the read happens.
OpCost merge(const OpCost& a, const OpCost& b) {
  OpCost c = b;
  c.kind = "fused";
  c.what = a.name + " + " + b.name + ": " + b.what;
  c.bytes_read = a.bytes_read + b.bytes_read - a.bytes_written;
  c.bytes_written = b.bytes_written;
  c.flops = a.flops + b.flops;
  c.fp8 = a.fp8 || b.fp8;  // the GEMM's flops (the norm's and epilogue's are few)
  return c;
}

}  // namespace

std::vector<OpCost> step_costs(const ModelConfig& c, const StepDtypes& dt, const Batch& batch) {
  const long long N = batch.num_tokens, m = i64(logit_rows(batch).token_row.size());
  const long long D = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const long long qd = c.q_dim(), kvd = c.kv_dim(), qkvd = c.qkv_dim();
  const int L = c.num_layers;
  std::vector<OpCost> ops;

  OpCost embed{op::kEmbed, "embed", shape({N}) + " ids -> " + shape({N, D})};
  embed.bytes_read = double(N) * D * dt.weight + double(N) * 4;
  embed.bytes_written = double(N) * D * dt.residual;
  ops.push_back(embed);

  // Per layer (multiplied by the layers below).
  ops.push_back(norm(op::kAttnNorm, 1, N, D, dt));
  ops.push_back(gemm(op::kQkv, 1, N, qkvd, D, dt, false));
  OpCost rope{op::kRopeKv, "rope_kv", shape({N, qkvd}) + " -> q " + shape({N, qd}) + ", k/v rows"};
  rope.bytes_read = double(N) * qkvd * dt.activation;
  rope.bytes_written = double(N) * qd * dt.residual + 2.0 * N * kvd * dt.kv_bytes();
  rope.flops = 6.0 * N * (qd + kvd) / 2;
  ops.push_back(rope);
  // Attention: each sequence reads its K/V rows once per kv head group; every
  // token attends over its causal prefix.
  double keys_read = 0, keys_attended = 0;
  for (const BatchSeq& s : batch.seqs) {
    const long long n = i64(s.tokens.size()), len = s.start_pos + n;
    keys_read += double(len);
    keys_attended += double(n) * s.start_pos + double(n) * (n + 1) / 2;
  }
  OpCost att{op::kAttention, "attention",
             std::to_string(N) + " query rows over " + std::to_string(i64(keys_read)) +
                 " cached keys, " + std::to_string(c.num_heads) + "/" +
                 std::to_string(c.num_kv_heads) + " heads x " + std::to_string(c.head_dim)};
  att.bytes_read = keys_read * 2.0 * kvd * dt.kv_bytes() + double(N) * qd * dt.residual;
  att.bytes_written = double(N) * qd * dt.activation;
  att.flops = 4.0 * keys_attended * qd;
  ops.push_back(att);
  ops.push_back(gemm(op::kOProj, 1, N, D, qd, dt, true));
  ops.push_back(norm(op::kFfnNorm, 1, N, D, dt));
  ops.push_back(gemm(op::kGateUp, 1, N, 2 * I, D, dt, false));
  OpCost act{op::kSiluMul, "act", "silu(g) * u: " + shape({N, 2 * I}) + " -> " + shape({N, I})};
  act.bytes_read = double(N) * 2 * I * dt.activation;
  act.bytes_written = double(N) * I * dt.activation;
  act.flops = 6.0 * N * I;
  ops.push_back(act);
  ops.push_back(gemm(op::kDown, 1, N, D, I, dt, true));
  for (size_t i = 1; i < ops.size(); ++i) ops[i] = times(ops[i], L);

  if (m > 0) {
    ops.push_back(norm(op::kFinalNorm, 1, m, D, dt));
    ops.push_back(gemm(op::kLmHead, 1, m, V, D, dt, false, false));
    ops.back().bytes_written = double(m) * V * dt.residual;  // fp32 logits
    OpCost sample{op::kSample, "sample", shape({m, V}) + " logits -> " + shape({m}) + " ids"};
    sample.bytes_read = double(m) * V * dt.residual;
    sample.bytes_written = double(m) * 4;
    ops.push_back(sample);
  }
  return ops;
}

std::vector<OpCost> fuse_persistent(std::vector<OpCost> ops) {
  std::vector<OpCost> out;
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string& n = ops[i].name;
    const bool chain_qkv = n == op::kAttnNorm && i + 2 < ops.size();
    const bool chain_gu = n == op::kFfnNorm && i + 2 < ops.size();
    const bool chain_lm = n == op::kFinalNorm && i + 1 < ops.size();
    if (chain_qkv || chain_gu) {  // norm -> GEMM -> epilogue (RoPE/KV write, SiLU*mul)
      OpCost f = merge(merge(ops[i], ops[i + 1]), ops[i + 2]);
      f.name = ops[i + 1].name;
      f.what = ops[i].name + " + " + ops[i + 1].what + " + " + ops[i + 2].name;
      out.push_back(f);
      i += 2;
    } else if (chain_lm) {
      OpCost f = merge(ops[i], ops[i + 1]);
      f.name = ops[i + 1].name;
      out.push_back(f);
      i += 1;
    } else {
      out.push_back(ops[i]);
    }
  }
  return out;
}

void OpClock::arm() {
  armed_ = true;
  ops_.clear();
  last_ = std::chrono::steady_clock::now();
}

void OpClock::lap_armed(const char* op) {
  const auto now = std::chrono::steady_clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - last_).count();
  last_ = now;
  add_time(ops_, op, ms);
}

std::vector<OpTime> OpClock::take() {
  armed_ = false;
  return std::move(ops_);
}

std::string kernel_kind(const std::string& n) {
  const auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("unpack_step_meta")) return "meta";
  if (has("embed_kernel")) return "embed";
  if (has("decode_persistent")) return "persistent";
  if (has("rmsnorm") || has("gather_rows")) return "norm";
  if (has("rope_kv")) return "rope_kv";
  if (has("paged_decode") || has("paged_prefill")) return "attention";
  if (has("silu_mul") || has("RowSiluMul")) return "act";
  if (has("argmax") || has("pick") || has("cub::") || has("Radix") || has("iota_kernel") ||
      has("offsets_kernel"))
    return "sample";
  if (has("gemv_batched") || has("gemm_fp8_small") || has("gemm_fp8_wgmma") ||
      has("quantize_rows") ||
      n.rfind("hayate::", 0) != 0)  // cuBLAS's own names
    return "gemm";
  return "unknown";
}

std::vector<OpCost> expand_calls(const std::vector<OpCost>& ops, bool step_meta) {
  std::vector<OpCost> out;
  if (step_meta) out.push_back({op::kStepMeta, "meta", "the step's packed metadata"});
  for (size_t i = 0; i < ops.size();) {
    if (!ops[i].per_layer) {
      out.push_back(ops[i++]);
      continue;
    }
    size_t end = i;  // the layer's ops: a contiguous run
    while (end < ops.size() && ops[end].per_layer) ++end;
    for (int l = 0; l < ops[i].calls; ++l) out.insert(out.end(), ops.begin() + i, ops.begin() + end);
    i = end;
  }
  return out;
}

std::vector<OpTime> attribute(const std::vector<std::pair<std::string, double>>& kernels,
                              const std::vector<OpCost>& ops) {
  std::vector<OpTime> out;
  const auto add = [&](const std::string& name, double ms) { add_time(out, name, ms); };
  size_t at = 0;
  for (const auto& [kind, ms] : kernels) {
    size_t j = at;
    while (j < ops.size() && ops[j].kind != kind) ++j;
    if (j == ops.size()) {
      add("other", ms);
      continue;
    }
    at = j;
    add(ops[at].name, ms);
  }
  return out;
}

double floor_ms(const OpCost& c, double read_gbs, const MatmulRates& rates) {
  const double mem = read_gbs > 0 ? (c.bytes_read + c.bytes_written) / (read_gbs * 1e9) : 0.0;
  const double tflops = c.fp8 && rates.fp8_tflops > 0 ? rates.fp8_tflops : rates.tflops;
  const double math = tflops > 0 ? c.flops / (tflops * 1e12) : 0.0;
  return 1e3 * std::max(mem, math);
}

}  // namespace hayate
