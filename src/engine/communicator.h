// The collectives tensor-parallel ranks need: a sum over ranks after the
// row-split projections and the embedding, and a gather of vocabulary slices
// of the logits. `LocalGroup` runs them in memory between threads of one
// process (the CPU backend's simulated ranks); a GPU group would be NCCL's.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace hayate {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // data = the sum over ranks of every rank's data (same length on every
  // rank), added in rank order, so every rank holds identical bits.
  virtual void all_reduce_sum(std::span<float> data) = 0;
  // Rank r's `mine` ([rows, widths[r]]) becomes columns [sum(widths[..r]),
  // +widths[r]) of every row of `all` ([rows, sum(widths)]), on every rank.
  virtual void all_gather_columns(std::span<const float> mine, int rows,
                                  std::span<const int> widths, std::span<float> all) = 0;
};

// `size` ranks that are threads of this process. Every rank makes the same
// calls in the same order (each call is a rendezvous of all of them). A rank
// that fails calls abort(): every collective waiting or yet to come then
// throws Error instead of waiting for it (NCCL's communicator abort).
class LocalGroup {
 public:
  explicit LocalGroup(int size);
  ~LocalGroup();
  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;

  int size() const { return size_; }
  Communicator& rank(int r);  // valid while the group lives
  void abort();
  void reset();  // clears an abort once every rank has left its collectives

 private:
  class Rank;
  void wait_all();  // a barrier of all ranks; throws Error once aborted

  int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::vector<const float*> published_;  // [size] each rank's buffer of the current call
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace hayate
