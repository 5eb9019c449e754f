#include "engine/communicator.h"

#include <algorithm>

#include "core/check.h"

namespace hayate {

class LocalGroup::Rank final : public Communicator {
 public:
  Rank(LocalGroup& g, int r) : g_(&g), r_(r) {}
  int rank() const override { return r_; }
  int size() const override { return g_->size_; }

  void all_reduce_sum(std::span<float> data) override {
    if (g_->size_ == 1) return;
    g_->published_[size_t(r_)] = data.data();
    g_->wait_all();  // every rank's input is published
    sum_.assign(data.size(), 0.0f);
    for (int s = 0; s < g_->size_; ++s) {
      const float* p = g_->published_[size_t(s)];
      for (size_t i = 0; i < data.size(); ++i) sum_[i] += p[i];
    }
    g_->wait_all();  // no rank reads an input any more
    std::copy(sum_.begin(), sum_.end(), data.begin());
  }

  void all_gather_columns(std::span<const float> mine, int rows, std::span<const int> widths,
                          std::span<float> all) override {
    HAYATE_CHECK(int(widths.size()) == g_->size_, "all_gather_columns: ", widths.size(),
                 " widths for ", g_->size_, " ranks");
    size_t total = 0;
    for (int width : widths) total += size_t(width);
    HAYATE_CHECK(mine.size() == size_t(rows) * size_t(widths[size_t(r_)]) &&
                     all.size() == size_t(rows) * total,
                 "all_gather_columns: buffer sizes do not match ", rows, " rows");
    g_->published_[size_t(r_)] = mine.data();
    g_->wait_all();
    size_t c0 = 0;
    for (int s = 0; s < g_->size_; ++s) {
      const float* p = g_->published_[size_t(s)];
      const size_t w = size_t(widths[size_t(s)]);
      for (size_t row = 0; row < size_t(rows); ++row)
        std::copy_n(p + row * w, w, all.data() + row * total + c0);
      c0 += w;
    }
    g_->wait_all();
  }

 private:
  LocalGroup* g_;
  int r_;
  std::vector<float> sum_;
};

LocalGroup::LocalGroup(int size) : size_(size) {
  HAYATE_CHECK(size >= 1, "a group needs at least one rank, got ", size);
  published_.assign(size_t(size), nullptr);
  for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r));
}

LocalGroup::~LocalGroup() = default;

Communicator& LocalGroup::rank(int r) {
  HAYATE_CHECK(r >= 0 && r < size_, "rank ", r, " outside [0, ", size_, ")");
  return *ranks_[size_t(r)];
}

void LocalGroup::wait_all() {
  std::unique_lock lock(mu_);
  HAYATE_CHECK(!aborted_, "tensor parallel: another rank failed");
  const uint64_t gen = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
  HAYATE_CHECK(generation_ != gen, "tensor parallel: another rank failed");
}

void LocalGroup::abort() {
  std::lock_guard lock(mu_);
  aborted_ = true;
  cv_.notify_all();
}

void LocalGroup::reset() {
  std::lock_guard lock(mu_);
  aborted_ = false;
  arrived_ = 0;
}

}  // namespace hayate
