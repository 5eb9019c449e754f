// The engine step loop, overlapped with the device: step N+1 is scheduled and
// launched while the device still runs step N, then N's ids are read. One step:
//   1. take new requests and aborts from the inbox (filled by any thread),
//   2. let the scheduler pick the batch and reserve KV slots (a sequence
//      whose last id is still on the device decodes it from there: the
//      backend reads it from the previous step's output),
//   3. launch the batch and count its tokens as computed, each sampling
//      sequence holding a stand-in for the id it will get,
//   4. finish the previous step: put its ids in place of the stand-ins, check
//      stop conditions, stream text; a sequence that stopped has at most one
//      step in flight, whose result is dropped (its blocks are free at once:
//      later steps run after it on the device),
//   5. free finished sequences, then call the event callbacks with no lock held.
// A step whose results the host must read before the next launch (penalties
// or logprobs sampled on the host from its logits, prompt logits) is
// finished at once.
// Requests with a grammar sample under a token mask: their step is launched
// (the forward pass runs on the device) before the previous step's ids are
// read; once step 4 has advanced each matcher by its id, the masks are made
// on the host while the device still runs the forward, and handed to the
// backend, which then samples those rows under them (sample_masked).
// Scheduler, block manager and sequences are touched only by the stepping
// thread; other threads reach the engine through the inbox and the stats
// snapshot, each behind its own mutex.
#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/check.h"
#include "engine/block_manager.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/stop.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace hayate {

namespace {

// A request inside the engine: its sequence plus the streaming state.
struct Active {
  Sequence seq;
  EventCallback on_event;
  std::optional<StreamDecoder> decoder;  // with a tokenizer only
  std::optional<StopMatcher> stop;       // with a tokenizer only
  // The host sampler's logprobs of the id being reported, attached to the
  // event that carries it (requests with SamplingParams::logprobs >= 0).
  std::optional<SampleResult> logprob;
  int prompt_logits_sent = 0;  // prompt positions whose logits went out (recompute repeats none)
  bool include_stop_str = false;  // EngineRequest::include_stop_str_in_output
  std::unique_ptr<grammar::GrammarMatcher> matcher;  // with a grammar only
};

// A step launched and not yet finished: what the engine needs to read its
// results, by request id (a request may finish while its step is in flight).
struct Launched {
  struct Entry {
    RequestId id = 0;
    int start_pos = 0, num_tokens = 0;
    bool sample = false, all_logits = false;
    bool masked = false;  // samples once the host gives its grammar mask
    uint64_t sample_step = 0;
  };
  std::vector<Entry> seqs;
  int num_tokens = 0;
  bool sync = false;  // finished before the next launch (host sampling, logits)
  int num_masked = 0;  // entries with masked
};

// Stands in for an id the device has sampled and the host not yet read; any
// valid id (the backend takes the real one from the device).
constexpr int32_t kStandIn = 0;

bool contains(const std::vector<int32_t>& v, int32_t id) {
  return std::find(v.begin(), v.end(), id) != v.end();
}

}  // namespace

struct Engine::Impl {
  BatchBackend& backend;
  const Tokenizer* tokenizer;
  EngineOptions options;
  BlockManager blocks;
  Scheduler scheduler;

  // Inbox: written by submit()/abort() on any thread.
  std::mutex inbox_mu;
  std::condition_variable inbox_cv;
  std::vector<std::unique_ptr<Active>> inbox;
  std::vector<RequestId> abort_inbox;
  RequestId next_id = 1;
  uint64_t next_arrival = 0;

  // Requests accepted and not yet given their final event.
  std::atomic<int64_t> num_unfinished{0};

  // Stepping-thread state.
  std::mutex step_mu;
  std::optional<Launched> inflight;  // launched, not finished
  std::unordered_map<RequestId, std::unique_ptr<Active>> active;
  std::vector<std::pair<EventCallback*, EngineEvent>> pending_events;
  std::vector<std::unique_ptr<Active>> retired;  // finished this step; freed after callbacks
  // Host sampling scratch (requests with needs_host()): the logits row [vocab],
  // its penalised copy, and the seen-id marks of apply_penalties.
  std::vector<float> row, work;
  std::vector<uint8_t> seen;
  // Grammar masks: the step's [masked seqs, mask_words] and one matcher's.
  std::vector<uint32_t> masks, one_mask, host_mask;

  // Stats snapshot, refreshed at the end of each step.
  mutable std::mutex stats_mu;
  EngineStats stats;

  // Background loop.
  std::thread loop;
  std::atomic<bool> stop_loop{false};

  Impl(BatchBackend& b, const Tokenizer* t, const EngineOptions& o)
      : backend(b),
        tokenizer(t),
        options(o),
        blocks(b.num_blocks(), b.block_size(), o.enable_prefix_caching),
        scheduler(blocks, {o.max_num_seqs, o.max_num_batched_tokens, b.max_logit_rows()}) {
    HAYATE_CHECK(b.max_model_len() >= 1, "backend max_model_len ", b.max_model_len(),
                 " must be >= 1");
    refresh_stats();
  }

  void refresh_stats() {
    std::lock_guard<std::mutex> g(stats_mu);
    stats.num_running = scheduler.num_running();
    stats.num_waiting = scheduler.num_waiting();
    stats.kv_blocks_total = blocks.num_blocks();
    stats.kv_blocks_used = blocks.num_used();
    stats.kv_usage = double(stats.kv_blocks_used) / double(stats.kv_blocks_total);
    stats.preemptions_total = scheduler.num_preemptions();
    stats.prefix_cache_queries_total = scheduler.prefix_cache_queries();
    stats.prefix_cache_hits_total = scheduler.prefix_cache_hits();
    stats.kv_blocks_cached = blocks.num_cached();
  }

  // Queues an event for `a` carrying the ids generated since the last event.
  void queue_event(Active& a, std::vector<int32_t> ids, std::string text, bool finished,
                   std::string error = {}) {
    EngineEvent e;
    e.id = a.seq.id;
    e.token_ids = std::move(ids);
    e.text = std::move(text);
    e.finished = finished;
    e.finish = a.seq.finish;
    e.error = std::move(error);
    e.prompt_tokens = a.seq.num_prompt_tokens;
    e.cached_tokens = a.seq.num_cached_tokens;
    e.completion_tokens = a.seq.num_generated() - a.seq.num_pending;
    if (a.logprob && !e.token_ids.empty()) {
      e.logprobs.push_back(std::move(*a.logprob));
      a.logprob.reset();
    }
    pending_events.emplace_back(a.on_event ? &a.on_event : nullptr, std::move(e));
  }

  // Ends a request: frees its blocks, queues its final event, retires it. A
  // request that failed (an error) keeps none of its blocks in the prefix cache.
  void finalize(RequestId id, FinishReason reason, std::vector<int32_t> ids, std::string text,
                std::string error = {}) {
    auto it = active.find(id);
    if (it == active.end()) return;
    Active& a = *it->second;
    scheduler.remove(&a.seq, /*failed=*/!error.empty());
    a.seq.finish = reason;
    {
      std::lock_guard<std::mutex> g(stats_mu);
      ++stats.requests_finished_total;
      stats.prompt_tokens_total += uint64_t(a.seq.num_prompt_tokens);
      if (reason == FinishReason::kAbort) {
        if (error.empty())
          ++stats.requests_aborted_total;
        else
          ++stats.requests_failed_total;
      }
    }
    queue_event(a, std::move(ids), std::move(text), true, std::move(error));
    retired.push_back(std::move(it->second));
    active.erase(it);
  }

  // Text still held by the decoder and the stop matcher at the end.
  std::string flush_text(Active& a) {
    if (!a.decoder) return {};
    std::string text = a.stop->push(a.decoder->flush());
    text += a.stop->flush();
    return text;
  }

  void drain_inbox() {
    std::vector<std::unique_ptr<Active>> fresh;
    std::vector<RequestId> aborts;
    {
      std::lock_guard<std::mutex> g(inbox_mu);
      fresh.swap(inbox);
      aborts.swap(abort_inbox);
    }
    for (auto& a : fresh) {
      RequestId id = a->seq.id;
      scheduler.add(&a->seq);
      active.emplace(id, std::move(a));
    }
    for (RequestId id : aborts) {
      auto it = active.find(id);
      if (it == active.end()) continue;
      finalize(id, FinishReason::kAbort, {}, flush_text(*it->second));
    }
  }

  // A sampled id in place of its stand-in (the oldest one), then the stop
  // checks: eos or stop id, stop string, length.
  void on_sampled(Active& a, int32_t id) {
    Sequence& s = a.seq;
    HAYATE_CHECK(s.num_pending > 0, "engine: an id for sequence ", s.id, " that awaits none");
    s.tokens[size_t(s.num_tokens() - s.num_pending)] = id;
    --s.num_pending;
    if (a.matcher) {
      HAYATE_CHECK(a.matcher->accept_token(id), "the grammar does not allow sampled id ", id);
      if (a.matcher->terminated()) {  // an EOS id where the grammar may end
        finalize(s.id, FinishReason::kStop, {id}, flush_text(a));
        return;
      }
    }
    const bool eos = !s.stop.ignore_eos && contains(s.stop.eos_ids, id);
    if (eos || contains(s.stop.stop_token_ids, id)) {
      // The stop id is reported but its text is not (as generate()).
      finalize(s.id, FinishReason::kStop, {id}, flush_text(a));
      return;
    }
    // min_tokens reached: eos and stop ids may be sampled from the next id on.
    if (!s.sampling.suppressed.empty() &&
        s.num_generated() - s.num_pending >= s.sampling.min_tokens)
      s.sampling.suppressed.clear();
    std::string text;
    if (a.decoder) {
      text = a.stop->push(a.decoder->push(id));
      if (a.stop->stopped()) {
        if (a.include_stop_str) text += a.stop->matched();
        finalize(s.id, FinishReason::kStop, {id}, std::move(text));
        return;
      }
    }
    if (s.num_generated() - s.num_pending >= s.stop.max_tokens) {
      text += flush_text(a);
      finalize(s.id, a.stop && a.stop->stopped() ? FinishReason::kStop : FinishReason::kLength,
               {id}, std::move(text));
      return;
    }
    queue_event(a, {id}, std::move(text), false);
  }

  bool step() {
    std::lock_guard<std::mutex> step_guard(step_mu);
    drain_inbox();
    SchedulerOutput out = scheduler.schedule();
    std::optional<Launched> prev = std::move(inflight);
    inflight.reset();
    bool worked = !out.empty() || prev.has_value() || !pending_events.empty();
    if (!out.empty()) launch(out);
    if (prev) finish(*prev);
    if (inflight && inflight->num_masked > 0) give_masks(*inflight);
    if (inflight && inflight->sync) {
      Launched now = std::move(*inflight);
      inflight.reset();
      finish(now);
    }
    refresh_stats();
    dispatch_events();
    return worked;
  }

  // Builds the batch, launches it and commits it: its tokens count as
  // computed, and each sampling sequence gets a stand-in for its next id.
  void launch(const SchedulerOutput& out) {
    Batch batch;
    batch.seqs.reserve(out.seqs.size());
    Launched l;
    for (size_t i = 0; i < out.seqs.size(); ++i) {
      const ScheduledSeq& s = out.seqs[i];
      Sequence& q = *s.seq;
      BatchSeq b;
      b.seq_id = q.id;
      b.tokens =
          std::span<const int32_t>(q.tokens).subspan(size_t(s.start_pos), size_t(s.num_tokens));
      b.start_pos = s.start_pos;
      b.block_table = q.block_table;
      b.sample = s.sample;
      b.all_logits = s.all_logits;
      b.sampling = &q.sampling;
      b.sample_step = uint64_t(q.num_generated());
      if (s.from_device) b.prev_slot = q.slot;
      // Host sampling applies the mask itself (a synchronous step).
      b.masked = s.sample && q.constrained && q.stop.max_tokens > 0 && !q.sampling.needs_host();
      l.num_masked += b.masked ? 1 : 0;
      q.slot = int(i);
      batch.seqs.push_back(b);
      l.seqs.push_back(
          {q.id, s.start_pos, s.num_tokens, s.sample, s.all_logits, b.masked, b.sample_step});
      l.sync = l.sync || s.all_logits || (s.sample && q.sampling.needs_host());
    }
    batch.num_tokens = out.num_tokens;
    batch.copies = out.copies;
    l.num_tokens = out.num_tokens;
    try {
      backend.launch(batch);
    } catch (const std::exception& e) {
      fail_batch(l, cat("engine step failed: ", e.what()));
      return;
    }
    scheduler.commit(out);
    for (const ScheduledSeq& s : out.seqs) {
      if (!s.sample || s.seq->stop.max_tokens == 0) continue;
      s.seq->tokens.push_back(kStandIn);
      ++s.seq->num_pending;
    }
    {
      std::lock_guard<std::mutex> g(stats_mu);
      ++stats.steps;
      stats.computed_tokens_total += uint64_t(out.num_tokens);
      stats.kv_block_copies_total += out.copies.size();
    }
    inflight = std::move(l);
  }

  // The blocks of a failed batch may hold garbage now: fail every sequence
  // in it (their blocks return to the pool) and keep serving the others.
  void fail_batch(const Launched& l, const std::string& why) {
    for (const Launched::Entry& s : l.seqs) finalize(s.id, FinishReason::kAbort, {}, {}, why);
  }

  // Reads a launched step's ids and applies them in batch order.
  void finish(const Launched& l) {
    std::vector<int32_t> sampled(l.seqs.size(), -1);
    try {
      backend.finish(sampled);
    } catch (const std::exception& e) {
      fail_batch(l, cat("engine step failed: ", e.what()));
      return;
    }
    uint64_t generated = 0;
    int j = -1;  // index among the sampling sequences (last_logits_row's order)
    for (size_t i = 0; i < l.seqs.size(); ++i) {
      const Launched::Entry& s = l.seqs[i];
      j += s.sample ? 1 : 0;
      auto it = active.find(s.id);
      if (it == active.end()) continue;  // finished while the step was in flight
      Active& a = *it->second;
      if (s.all_logits) send_prompt_logits(a, s, int(i));
      if (!s.sample) continue;
      if (a.seq.stop.max_tokens == 0) {  // a prompt-only request: scored, nothing generated
        finalize(s.id, FinishReason::kLength, {}, {});
        continue;
      }
      try {
        if (a.seq.sampling.needs_host()) sample_on_host(a, j, s.sample_step, sampled[i]);
        HAYATE_CHECK(sampled[i] >= 0 && sampled[i] < backend.config().vocab_size,
                     "backend sampled id ", sampled[i], " outside the vocabulary");
        ++generated;
        on_sampled(a, sampled[i]);
      } catch (const std::exception& e) {
        finalize(s.id, FinishReason::kAbort, {}, {}, cat("engine: ", e.what()));
      }
    }
    std::lock_guard<std::mutex> g(stats_mu);
    stats.generation_tokens_total += generated;
  }

  // The masks of a launched step's masked sequences, made now that every
  // earlier id has advanced their matchers; the device samples those rows
  // under them. A sequence that ended meanwhile gets an all-ones mask (its
  // id will be dropped), and so does one whose matcher fails (it ends with
  // the error).
  void give_masks(const Launched& l) {
    const size_t W = size_t(backend.mask_words());
    masks.assign(size_t(l.num_masked) * W, ~0u);
    size_t k = 0;
    for (const Launched::Entry& s : l.seqs) {
      if (!s.masked) continue;
      uint32_t* dst = masks.data() + W * k++;
      auto it = active.find(s.id);
      if (it == active.end()) continue;
      try {
        fill_mask(*it->second, std::span<uint32_t>(dst, W));
      } catch (const std::exception& e) {
        finalize(s.id, FinishReason::kAbort, {}, {}, cat("engine: grammar: ", e.what()));
      }
    }
    try {
      backend.sample_masked(masks);
    } catch (const std::exception& e) {
      fail_batch(l, cat("engine step failed: ", e.what()));
      inflight.reset();
    }
  }

  // out [mask_words] = the ids a's grammar allows next (ids past the
  // tokenizer's vocabulary never).
  void fill_mask(Active& a, std::span<uint32_t> out) {
    a.matcher->fill_mask(one_mask);
    const size_t n = std::min(out.size(), one_mask.size());
    std::copy_n(one_mask.begin(), n, out.begin());
    std::fill(out.begin() + ptrdiff_t(n), out.end(), 0u);
    const int V = backend.config().vocab_size;
    if (V % 32 != 0) out.back() &= (1u << (V % 32)) - 1u;
  }

  // The chunk's logits rows of prompt positions not sent before, as an event.
  void send_prompt_logits(Active& a, const Launched::Entry& s, int i) {
    const size_t V = size_t(backend.config().vocab_size);
    const int end = std::min(s.start_pos + s.num_tokens, a.seq.num_prompt_tokens);
    const int from = std::max(s.start_pos, a.prompt_logits_sent);
    if (from >= end) return;
    std::vector<float> rows(size_t(s.num_tokens) * V);
    backend.last_chunk_logits(i, rows);
    EngineEvent e;
    e.id = a.seq.id;
    e.prompt_tokens = a.seq.num_prompt_tokens;
    e.prompt_logits_pos = from;
    e.prompt_logits.assign(rows.begin() + ptrdiff_t(size_t(from - s.start_pos) * V),
                           rows.begin() + ptrdiff_t(size_t(end - s.start_pos) * V));
    a.prompt_logits_sent = end;
    pending_events.emplace_back(a.on_event ? &a.on_event : nullptr, std::move(e));
  }

  // Penalties and logprobs: the backend's pick for this sequence is replaced
  // by the host sampler's, run over the step's fp32 logits row [vocab].
  void sample_on_host(Active& a, int j, uint64_t step, int32_t& id) {
    const SamplingParams& p = a.seq.sampling;
    row.resize(size_t(backend.config().vocab_size));
    backend.last_logits_row(j, row);
    const std::span<const int32_t> generated =
        a.seq.generated().first(size_t(a.seq.num_generated() - a.seq.num_pending));
    if (!a.matcher) {
      SampleResult r = sample_with_logprobs(row, p, step, a.seq.prompt(), generated, work, seen);
      id = r.id;
      if (p.logprobs >= 0) a.logprob = std::move(r);
      return;
    }
    // Under a grammar: logit edits and penalties, then the pick among the
    // ids the mask allows; logprobs of the raw row.
    std::span<const float> use = row;
    if (p.has_penalties() || p.has_logit_edits()) {
      work.assign(row.begin(), row.end());
      apply_logit_edits(work, p, generated);
      if (p.has_penalties()) apply_penalties(work, p, a.seq.prompt(), generated, seen);
      use = work;
    }
    host_mask.resize(size_t(backend.mask_words()));
    fill_mask(a, host_mask);
    id = sample_token_masked(use, host_mask, p, step);
    HAYATE_CHECK(id >= 0, "no id the grammar allows is left (min_tokens, logit_bias or bad_words "
                          "mask them all)");
    if (p.logprobs >= 0) a.logprob = logprobs_of(row, id, p.logprobs);
  }

  void dispatch_events() {
    std::vector<std::pair<EventCallback*, EngineEvent>> events;
    events.swap(pending_events);
    std::vector<std::unique_ptr<Active>> done;
    done.swap(retired);  // keeps finished requests' callbacks alive until called
    for (auto& [cb, e] : events) {
      if (e.finished) num_unfinished.fetch_sub(1);
      if (cb == nullptr) continue;
      try {
        (*cb)(e);
      } catch (...) {
        // The consumer is gone (e.g. a closed connection): stop generating for it.
        if (!e.finished) request_abort(e.id);
      }
    }
  }

  void request_abort(RequestId id) {
    {
      std::lock_guard<std::mutex> g(inbox_mu);
      abort_inbox.push_back(id);
    }
    inbox_cv.notify_one();
  }

  // Validates `r` (throws Error) and makes its engine state.
  std::unique_ptr<Active> make_active(EngineRequest r) {
    const ModelConfig& c = backend.config();
    const int n = int(r.prompt.size());
    HAYATE_CHECK(n > 0, "request: the prompt is empty");
    for (int32_t id : r.prompt)
      HAYATE_CHECK(id >= 0 && id < c.vocab_size, "request: prompt token id ", id,
                   " is outside the vocabulary [0, ", c.vocab_size, ")");
    r.sampling.validate();
    for (const auto& [id, bias] : r.sampling.logit_bias)
      HAYATE_CHECK(id < c.vocab_size, "request: logit_bias token id ", id,
                   " is outside the vocabulary [0, ", c.vocab_size, ")");
    for (const std::vector<int32_t>& w : r.sampling.bad_words)
      for (int32_t id : w)
        HAYATE_CHECK(id < c.vocab_size, "request: bad_words token id ", id,
                     " is outside the vocabulary [0, ", c.vocab_size, ")");
    HAYATE_CHECK(r.sampling.min_tokens <= r.max_tokens, "request: min_tokens ",
                 r.sampling.min_tokens, " exceeds max_tokens ", r.max_tokens);
    HAYATE_CHECK(r.sampling.suppressed.empty(), "request: suppressed ids are the engine's");
    if (r.sampling.min_tokens > 0) {  // vLLM's min_tokens: eos and stop ids masked until then
      std::vector<int32_t>& mask = r.sampling.suppressed;
      if (!r.ignore_eos) mask = c.eos_ids;
      mask.insert(mask.end(), r.stop_token_ids.begin(), r.stop_token_ids.end());
      std::sort(mask.begin(), mask.end());
      mask.erase(std::unique(mask.begin(), mask.end()), mask.end());
    }
    HAYATE_CHECK(r.max_tokens >= 1 || (r.max_tokens == 0 && r.prompt_logits),
                 "request: max_tokens must be >= 1, got ", r.max_tokens);
    const int64_t total = int64_t(n) + r.max_tokens;
    HAYATE_CHECK(total <= backend.max_model_len(), "request: prompt of ", n, " tokens + ",
                 r.max_tokens, " new tokens exceeds max_model_len ", backend.max_model_len());
    // The last sampled id is never run, so the KV cache holds total - 1
    // positions (the whole prompt at least).
    const int64_t need = (std::max<int64_t>(total - 1, n) + blocks.block_size() - 1) /
                         blocks.block_size();
    HAYATE_CHECK(need <= blocks.num_blocks(), "request: prompt of ", n, " tokens + ", r.max_tokens,
                 " new tokens needs ", need, " KV blocks of ", blocks.block_size(),
                 " tokens, more than the whole pool of ", blocks.num_blocks());
    HAYATE_CHECK(r.stop.empty() || tokenizer != nullptr,
                 "request: stop strings need an engine with a tokenizer");

    auto a = std::make_unique<Active>();
    Sequence& s = a->seq;
    s.tokens = std::move(r.prompt);
    s.num_prompt_tokens = n;
    s.sampling = r.sampling;
    s.prompt_logits = r.prompt_logits;
    if (r.grammar) {
      a->matcher = std::make_unique<grammar::GrammarMatcher>(std::move(r.grammar));
      s.constrained = true;
    }
    s.stop.max_tokens = r.max_tokens;
    s.stop.ignore_eos = r.ignore_eos;
    s.stop.eos_ids = c.eos_ids;
    s.stop.stop_token_ids = std::move(r.stop_token_ids);
    s.stop.stop = r.stop;
    a->on_event = std::move(r.on_event);
    a->include_stop_str = r.include_stop_str_in_output;
    if (tokenizer != nullptr) {
      a->decoder.emplace(*tokenizer, r.skip_special_tokens);
      a->stop.emplace(std::move(r.stop));  // throws on an empty stop string
    }
    return a;
  }

  std::vector<RequestId> submit(std::vector<EngineRequest> rs) {
    std::vector<std::unique_ptr<Active>> made;
    made.reserve(rs.size());
    for (EngineRequest& r : rs) made.push_back(make_active(std::move(r)));
    // Choices of one prompt: each later one forks from the first (its parent).
    const int bs = blocks.block_size();
    std::vector<int64_t> group_need(made.size(), -1);  // at each parent: the group's blocks
    for (size_t i = 0; i < made.size(); ++i) {
      Sequence& s = made[i]->seq;
      const int64_t own = (std::max(s.num_prompt_tokens - 1 + s.stop.max_tokens,
                                    s.num_prompt_tokens) + bs - 1) / bs -
                          (s.num_prompt_tokens - 1) / bs;
      size_t p = i;
      for (size_t j = 0; j < i && p == i; ++j)
        if (made[j]->seq.fork_parent == nullptr && made[j]->seq.tokens == s.tokens) p = j;
      if (p == i || s.prompt_logits) {
        group_need[i] = (s.num_prompt_tokens - 1) / bs + own;
        continue;
      }
      s.fork_parent = &made[p]->seq;
      made[p]->seq.fork_children.push_back(&s);
      group_need[p] += own;
    }
    for (size_t i = 0; i < made.size(); ++i)
      HAYATE_CHECK(made[i]->seq.fork_children.empty() || group_need[i] <= blocks.num_blocks(),
                   "request: ", made[i]->seq.fork_children.size() + 1, " choices of a prompt of ",
                   made[i]->seq.num_prompt_tokens, " tokens + ", made[i]->seq.stop.max_tokens,
                   " new tokens need ", group_need[i], " KV blocks of ", bs,
                   " tokens at once, more than the whole pool of ", blocks.num_blocks());
    std::vector<RequestId> ids;
    {
      std::lock_guard<std::mutex> g(inbox_mu);
      for (auto& a : made) {
        const RequestId id = next_id++;
        a->seq.id = id;
        a->seq.arrival = next_arrival++;
        ids.push_back(id);
        inbox.push_back(std::move(a));
        num_unfinished.fetch_add(1);
      }
    }
    inbox_cv.notify_one();
    return ids;
  }

  void run_loop() {
    while (!stop_loop.load()) {
      if (step()) continue;
      std::unique_lock<std::mutex> g(inbox_mu);
      inbox_cv.wait(g, [&] { return stop_loop.load() || !inbox.empty() || !abort_inbox.empty(); });
    }
  }

  void stop_thread() {
    if (!loop.joinable()) return;
    HAYATE_CHECK(std::this_thread::get_id() != loop.get_id(),
                 "engine: stop() called from an event callback (the loop thread)");
    {
      std::lock_guard<std::mutex> g(inbox_mu);
      stop_loop.store(true);
    }
    inbox_cv.notify_all();
    loop.join();
    stop_loop.store(false);
  }

  // Every request still held (queued or in flight) gets its final event.
  void abort_everything() {
    std::lock_guard<std::mutex> step_guard(step_mu);
    if (inflight) {  // the device may still run it: wait, and keep what it made
      Launched l = std::move(*inflight);
      inflight.reset();
      finish(l);
    }
    drain_inbox();
    std::vector<RequestId> ids;
    for (auto& [id, a] : active) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (RequestId id : ids) finalize(id, FinishReason::kAbort, {}, flush_text(*active.at(id)));
    refresh_stats();
    dispatch_events();
  }
};

Engine::Engine(BatchBackend& backend, const Tokenizer* tokenizer, const EngineOptions& options)
    : impl_(std::make_unique<Impl>(backend, tokenizer, options)) {}

Engine::~Engine() {
  impl_->stop_thread();
  impl_->abort_everything();
}

RequestId Engine::submit(EngineRequest request) {
  std::vector<EngineRequest> one;
  one.push_back(std::move(request));
  return impl_->submit(std::move(one)).front();
}

std::vector<RequestId> Engine::submit(std::vector<EngineRequest> requests) {
  return impl_->submit(std::move(requests));
}

void Engine::abort(RequestId id) {
  impl_->request_abort(id);
}

bool Engine::step() {
  return impl_->step();
}

void Engine::run_until_idle() {
  while (has_work()) {
    // A step without progress while requests are pending would loop forever.
    HAYATE_CHECK(impl_->step() || !has_work(), "engine: no progress with requests pending");
  }
}

bool Engine::has_work() const {
  return impl_->num_unfinished.load() > 0;
}

void Engine::start() {
  HAYATE_CHECK(!impl_->loop.joinable(), "engine: the loop is already running");
  impl_->loop = std::thread([this] { impl_->run_loop(); });
}

void Engine::stop() {
  impl_->stop_thread();
}

EngineStats Engine::stats() const {
  EngineStats s;
  {
    std::lock_guard<std::mutex> g(impl_->stats_mu);
    s = impl_->stats;
  }
  // Requests still in the inbox count as waiting.
  std::lock_guard<std::mutex> g(impl_->inbox_mu);
  s.num_waiting += int(impl_->inbox.size());
  return s;
}

const EngineOptions& Engine::options() const {
  return impl_->options;
}

BatchBackend& Engine::backend() {
  return impl_->backend;
}

}  // namespace hayate
