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
  // 0 picks std::thread::hardware_concurrency(); at most 65535.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(thread_index, begin, end) over [0, n) split into contiguous
  // chunks of at least `min_chunk` items (about one chunk per thread).
  // thread_index in [0, num_threads()) identifies the executing thread: two
  // concurrent calls of fn never share one, so it can index per-thread
  // scratch. Chunks are claimed dynamically: when a worker is descheduled
  // (an oversubscribed machine) the caller runs its chunks instead of waiting.
  // Returns when every chunk is done.
  void ParallelFor(int64_t n, int64_t min_chunk,
                   const std::function<void(int, int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int worker_index);
  // Claims and runs chunks of the job published as `generation` until none
  // are left. Returns false when the job was replaced meanwhile.
  void RunChunks(int thread_index, uint32_t generation);

  std::vector<std::thread> workers_;
  // The job of the current generation; written only while no chunk of the
  // previous generation is outstanding, published by claim_ (release).
  // Atomic (relaxed) because a worker reads them before its claim, possibly
  // while the next job is being written: such a read is discarded when the
  // claim fails, but it must not be a data race.
  std::atomic<const std::function<void(int, int64_t, int64_t)>*> job_{nullptr};
  std::atomic<int64_t> job_n_{0};
  std::atomic<int64_t> job_chunk_{0};
  // (generation << 32) | (number of chunks << 16) | next unclaimed chunk.
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint32_t> chunks_done_{0};
  uint32_t generation_ = 0;  // caller-side copy
  std::atomic<bool> stop_{false};
  std::mutex sleep_mutex_;
  std::condition_variable sleep_cv_;
  std::atomic<int> num_sleeping_{0};
};

}  // namespace tandem

#endif  // TANDEM_COMMON_THREAD_POOL_H_
