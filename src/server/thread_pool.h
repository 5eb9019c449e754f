// cpp-httplib serves each connection on one task of its TaskQueue for the
// connection's whole life, and a streaming response holds its task until the
// last token. Its default pool (max(8, cores - 1) threads) would make the
// 9th concurrent stream wait for the first to end, so the server uses this
// queue instead: a thread per connection, started on demand, up to
// `max_threads`; beyond that, connections wait their turn. A thread idle for
// `idle_exit` ends, so a burst of connections does not keep its threads (and
// their stacks) for the life of the server.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

#include <httplib.h>

namespace hayate::server {

class GrowingThreadPool : public httplib::TaskQueue {
 public:
  explicit GrowingThreadPool(size_t max_threads,
                             std::chrono::milliseconds idle_exit = std::chrono::seconds(2))
      : max_threads_(max_threads), idle_exit_(idle_exit) {}
  ~GrowingThreadPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::lock_guard lock(mutex_);
    reap();
    jobs_.push_back(std::move(fn));
    if (!stopping_ && idle_ < jobs_.size() && live_ < max_threads_) {
      auto it = workers_.emplace(workers_.end());
      ++live_;
      it->thread = std::thread([this, it] { work(it); });
    }
    cond_.notify_one();
  }

  // Lets queued connections finish, then joins every thread. httplib calls
  // this after its accept loop, the only caller of enqueue(), has ended.
  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    cond_.notify_all();
    for (Worker& w : workers_) w.thread.join();
    workers_.clear();
  }

  size_t threads() const {
    std::lock_guard lock(mutex_);
    return live_;
  }

 private:
  struct Worker {
    std::thread thread;
    bool done = false;
  };

  // Joins threads that ended while idle (they have returned or are about to).
  void reap() {
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (!it->done) {
        ++it;
        continue;
      }
      it->thread.join();
      it = workers_.erase(it);
    }
  }

  void work(std::list<Worker>::iterator self) {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      bool woke = cond_.wait_for(lock, idle_exit_, [&] { return !jobs_.empty() || stopping_; });
      --idle_;
      if (jobs_.empty()) {
        if (stopping_) return;  // joined by shutdown()
        if (!woke) {
          // Idle too long: end; the next enqueue() joins this thread.
          self->done = true;
          --live_;
          return;
        }
        continue;
      }
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  const size_t max_threads_;
  const std::chrono::milliseconds idle_exit_;
  mutable std::mutex mutex_;
  std::condition_variable cond_;
  std::deque<std::function<void()>> jobs_;
  std::list<Worker> workers_;
  size_t live_ = 0;  // workers not done
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace hayate::server
