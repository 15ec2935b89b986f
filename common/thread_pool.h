// ThreadPool: a fixed set of worker threads that run one data-parallel loop at
// a time (ParallelFor), with the calling thread taking a share. Built for the
// forward pass, which issues hundreds of short loops per token: workers spin
// briefly between loops before sleeping, so a loop starts in well under a
// microsecond when the pool is busy.
//
// Thread-safety: ParallelFor may be called from one thread at a time (the
// thread that owns the forward). Workers never call back into the pool.
#ifndef TANDEM_COMMON_THREAD_POOL_H_
#define TANDEM_COMMON_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem {

class ThreadPool {
 public:
  // `num_threads` counts the caller: 1 means no workers (everything inline).
  // 0 picks std::thread::hardware_concurrency().
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(thread_index, begin, end) over [0, n) split into contiguous
  // chunks of at least `min_chunk` items, one chunk per participating thread
  // (thread_index in [0, num_threads())). Returns when every chunk is done.
  void ParallelFor(int64_t n, int64_t min_chunk,
                   const std::function<void(int, int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int worker_index);
  void RunChunk(int thread_index);

  std::vector<std::thread> workers_;
  // Current job, published by bumping generation_.
  const std::function<void(int, int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_threads_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex sleep_mutex_;
  std::condition_variable sleep_cv_;
  std::atomic<int> num_sleeping_{0};
};

}  // namespace tandem

#endif  // TANDEM_COMMON_THREAD_POOL_H_
