// Shared fixture of the engine tests: a small dummy model (dummy:tiny with the
// vocabulary cut to 512 ids, so the LM head is cheap), the CPU paged backend
// for the engine, and as the oracle the same backend stepped by hand with one
// sequence (the whole prompt, then one token a step: no scheduler, no
// chunking, no neighbours).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "cpu/cpu_paged_backend.h"
#include "engine/engine.h"
#include "model/model.h"

namespace hayate::testing_engine {

// Everything one request received through its callback.
struct Collected {
  std::vector<int32_t> ids;
  std::string text;
  int events = 0;
  int finals = 0;
  bool event_after_final = false;
  FinishReason finish = FinishReason::kLength;
  std::string error;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
  std::vector<SampleResult> logprobs;
};

// Thread-safe sink for the events of many requests.
class Sink {
 public:
  EventCallback callback() {
    return [this](const EngineEvent& e) {
      std::lock_guard<std::mutex> g(mu_);
      Collected& c = by_id_[e.id];
      if (c.finals > 0) c.event_after_final = true;
      ++c.events;
      c.ids.insert(c.ids.end(), e.token_ids.begin(), e.token_ids.end());
      c.text += e.text;
      c.logprobs.insert(c.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
      c.prompt_tokens = e.prompt_tokens;
      c.completion_tokens = e.completion_tokens;
      c.cached_tokens = e.cached_tokens;
      if (e.finished) {
        ++c.finals;
        c.finish = e.finish;
        c.error = e.error;
        finish_order_.push_back(e.id);
        cv_.notify_all();
      }
    };
  }
  Collected get(RequestId id) {
    std::lock_guard<std::mutex> g(mu_);
    return by_id_[id];
  }
  std::vector<RequestId> finish_order() {
    std::lock_guard<std::mutex> g(mu_);
    return finish_order_;
  }
  // Waits until `n` requests have finished (background-loop tests).
  bool wait_finished(size_t n, std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> g(mu_);
    return cv_.wait_for(g, timeout, [&] { return finish_order_.size() >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<RequestId, Collected> by_id_;
  std::vector<RequestId> finish_order_;
};

class EngineTest : public ::testing::Test {
 public:
  static constexpr int kVocab = 512;

  static void SetUpTestSuite() {
    model_ = new Model(load_model("dummy:tiny", 7, HAYATE_ASSETS_DIR));
    // Same weights, fewer vocabulary rows: dummy values depend only on the
    // element index, so embed/lm_head keep their first 512 rows.
    model_->config.vocab_size = kVocab;
    model_->config.eos_ids = {};
    for (WeightSource& w : model_->weights)
      if (w.name == "embed" || w.name == "lm_head") w.shape[0] = kVocab;
    oracle_ = paged(256 / 4 + 1).release();
  }
  static void TearDownTestSuite() {
    delete oracle_;
    delete model_;
  }

  static std::unique_ptr<BatchBackend> paged(int num_blocks, int block_size = 4,
                                             int max_model_len = 256) {
    BatchBackendOptions o;
    o.num_blocks = num_blocks;
    o.block_size = block_size;
    o.max_model_len = max_model_len;
    return make_cpu_paged_backend(*model_, o);
  }

  // Single-sequence oracle: prefill, then one token at a time, no stops.
  // Greedy results are memoized (tests ask for the same prompts repeatedly).
  static std::vector<int32_t> reference(const std::vector<int32_t>& prompt, int n,
                                        const SamplingParams& p = {}) {
    static std::map<std::pair<std::vector<int32_t>, int>, std::vector<int32_t>> memo;
    static std::mutex memo_mu;
    std::lock_guard<std::mutex> g(memo_mu);
    if (p.greedy()) {
      auto it = memo.find({prompt, n});
      if (it != memo.end()) return it->second;
    }
    std::vector<int32_t> out, table;
    for (int b = 0; b < oracle_->num_blocks(); ++b) table.push_back(b);
    int32_t id = step_one(prompt, 0, table, p, 0);
    int pos = int(prompt.size());
    for (int i = 0; i < n; ++i) {
      out.push_back(id);
      if (i + 1 == n) break;
      id = step_one({id}, pos++, table, p, uint64_t(i + 1));
    }
    if (p.greedy()) memo[{prompt, n}] = out;
    return out;
  }

  // The oracle's logits after `tokens` run at `pos` (the last row) [vocab].
  static void oracle_logits(std::span<const int32_t> tokens, int pos, std::span<float> row) {
    std::vector<int32_t> table;
    for (int b = 0; b < oracle_->num_blocks(); ++b) table.push_back(b);
    Batch b;
    BatchSeq s;
    s.tokens = tokens;
    s.start_pos = pos;
    s.block_table = table;
    s.all_logits = true;
    b.seqs.push_back(s);
    b.num_tokens = int(tokens.size());
    int32_t unused = -1;
    oracle_->step(b, std::span<int32_t>(&unused, 1));
    std::vector<float> rows(tokens.size() * row.size());
    oracle_->last_chunk_logits(0, rows);
    std::copy(rows.end() - ptrdiff_t(row.size()), rows.end(), row.begin());
  }

  // One backend step of one sequence at `pos`; returns the sampled id.
  static int32_t step_one(const std::vector<int32_t>& tokens, int pos,
                          const std::vector<int32_t>& table, const SamplingParams& p,
                          uint64_t sample_step) {
    Batch b;
    BatchSeq s;
    s.tokens = tokens;
    s.start_pos = pos;
    s.block_table = table;
    s.sample = true;
    s.sampling = &p;
    s.sample_step = sample_step;
    b.seqs.push_back(s);
    b.num_tokens = int(tokens.size());
    int32_t id = -1;
    oracle_->step(b, std::span<int32_t>(&id, 1));
    return id;
  }

  static std::vector<int32_t> random_prompt(std::mt19937& rng, int len) {
    std::vector<int32_t> p(static_cast<size_t>(len));
    for (int32_t& id : p) id = int32_t(rng() % kVocab);
    return p;
  }

  static EngineRequest request(const std::vector<int32_t>& prompt, int max_tokens, Sink& sink) {
    EngineRequest r;
    r.prompt = prompt;
    r.max_tokens = max_tokens;
    r.on_event = sink.callback();
    return r;
  }

  static Model* model_;
  static BatchBackend* oracle_;
};

inline Model* EngineTest::model_ = nullptr;
inline BatchBackend* EngineTest::oracle_ = nullptr;

}  // namespace hayate::testing_engine
