// cpp-httplib serves each connection on one task of its TaskQueue for the
// connection's whole life, and a streaming response holds its task until the
// last token. Its default pool (max(8, cores - 1) threads) would make the
// 9th concurrent stream wait for the first to end, so the server uses this
// queue instead: a thread per connection, started on demand, kept while idle,
// up to `max_threads`; beyond that, connections wait their turn.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace hayate::server {

class GrowingThreadPool : public httplib::TaskQueue {
 public:
  explicit GrowingThreadPool(size_t max_threads) : max_threads_(max_threads) {}
  ~GrowingThreadPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(fn));
    // httplib enqueues only from its accept loop, which has ended before it
    // calls shutdown(), so threads_ is not touched while shutdown() joins.
    if (!stopping_ && idle_ < jobs_.size() && threads_.size() < max_threads_)
      threads_.emplace_back([this] { work(); });
    cond_.notify_one();
  }

  // Lets queued connections finish, then joins every thread.
  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    cond_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

 private:
  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      cond_.wait(lock, [&] { return !jobs_.empty() || stopping_; });
      --idle_;
      if (jobs_.empty()) return;  // stopping and nothing left
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  const size_t max_threads_;
  std::mutex mutex_;
  std::condition_variable cond_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;  // only grows; joined at shutdown
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace hayate::server
