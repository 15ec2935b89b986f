#include "common/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tandem {
namespace {
inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}
// How long an idle worker spins before sleeping on the condition variable.
constexpr auto kSpinDuration = std::chrono::microseconds(2000);
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i < num_threads; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  sleep_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunChunk(int thread_index) {
  int64_t per = (job_n_ + job_threads_ - 1) / job_threads_;
  int64_t begin = std::min<int64_t>(job_n_, per * thread_index);
  int64_t end = std::min<int64_t>(job_n_, begin + per);
  if (begin < end) (*job_)(thread_index, begin, end);
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk,
                             const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int64_t max_threads = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  int threads = static_cast<int>(std::min<int64_t>(num_threads(), max_threads));
  if (threads <= 1) {
    fn(0, 0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_threads_ = threads;
  pending_.store(threads - 1, std::memory_order_relaxed);
  {
    // Publishing under the mutex pairs with the sleepers' predicate check, so
    // no wake-up is lost; spinning workers see the generation change directly.
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (num_sleeping_.load(std::memory_order_acquire) > 0) sleep_cv_.notify_all();
  RunChunk(0);
  while (pending_.load(std::memory_order_acquire) > 0) CpuRelax();
  job_ = nullptr;
}

void ThreadPool::WorkerLoop(int worker_index) {
  uint64_t seen = 0;
  while (true) {
    auto spin_start = std::chrono::steady_clock::now();
    uint64_t gen;
    int spins = 0;
    while ((gen = generation_.load(std::memory_order_acquire)) == seen) {
      CpuRelax();
      if (++spins % 1024 == 0 && std::chrono::steady_clock::now() - spin_start > kSpinDuration) {
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        num_sleeping_.fetch_add(1);
        sleep_cv_.wait(lock, [&] { return generation_.load() != seen; });
        num_sleeping_.fetch_sub(1);
        spin_start = std::chrono::steady_clock::now();
      }
    }
    seen = gen;
    if (stop_.load()) return;
    if (worker_index < job_threads_) {
      RunChunk(worker_index);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
}

}  // namespace tandem
