#include "common/thread_pool.h"

#include <sched.h>

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
constexpr auto kSpinDuration = std::chrono::microseconds(500);
// The claim word: generation (bits 32-63), the job's chunk count (16-31)
// and the next unclaimed chunk (0-15).
constexpr uint64_t kIndexMask = 0xffffull;
constexpr int kChunksShift = 16;
constexpr int kGenerationShift = 32;
constexpr int kMaxThreads = 0xffff;
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  num_threads = std::min(num_threads, kMaxThreads);  // chunk counts fit the claim word
  for (int i = 1; i < num_threads; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    stop_.store(true);
    // An empty job (no chunks) of a new generation wakes every worker to see stop_.
    claim_.store(static_cast<uint64_t>(++generation_) << kGenerationShift,
                 std::memory_order_release);
  }
  sleep_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunChunks(int thread_index, uint32_t generation) {
  while (true) {
    uint64_t c = claim_.load(std::memory_order_acquire);
    if ((c >> kGenerationShift) != generation) return;
    // The chunk count comes from the same word as the index: a claim can
    // only take a chunk that exists in this generation. (Read from the job
    // fields instead, a worker that saw the next job's larger count could
    // claim a chunk past this generation's end before the next generation
    // was published, and run the next job's chunk twice.)
    const uint32_t index = static_cast<uint32_t>(c & kIndexMask);
    const uint32_t num_chunks = static_cast<uint32_t>((c >> kChunksShift) & kIndexMask);
    if (index >= num_chunks) return;
    // Read the job before claiming: a successful claim proves the job was
    // still this generation's (it is replaced only after all chunks are done).
    const auto* job = job_.load(std::memory_order_relaxed);
    int64_t n = job_n_.load(std::memory_order_relaxed);
    int64_t chunk = job_chunk_.load(std::memory_order_relaxed);
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) continue;
    int64_t begin = static_cast<int64_t>(index) * chunk;
    int64_t end = std::min(n, begin + chunk);
    (*job)(thread_index, begin, end);
    chunks_done_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk,
                             const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  int64_t num_chunks = std::min<int64_t>(num_threads(), max_chunks);
  if (num_chunks <= 1) {
    fn(0, 0, n);
    return;
  }
  const int64_t chunk = (n + num_chunks - 1) / num_chunks;
  const uint32_t job_num_chunks = static_cast<uint32_t>((n + chunk - 1) / chunk);
  job_.store(&fn, std::memory_order_relaxed);
  job_n_.store(n, std::memory_order_relaxed);
  job_chunk_.store(chunk, std::memory_order_relaxed);
  chunks_done_.store(0, std::memory_order_relaxed);
  {
    // Publishing under the mutex pairs with the sleepers' predicate check, so
    // no wake-up is lost; spinning workers see the claim word change directly.
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    claim_.store((static_cast<uint64_t>(++generation_) << kGenerationShift) |
                     (static_cast<uint64_t>(job_num_chunks) << kChunksShift),
                 std::memory_order_release);
  }
  if (num_sleeping_.load(std::memory_order_acquire) > 0) sleep_cv_.notify_all();
  RunChunks(0, generation_);
  int spins = 0;
  while (chunks_done_.load(std::memory_order_acquire) < job_num_chunks) {
    if (++spins < 4096) {
      CpuRelax();
    } else {
      sched_yield();  // a worker holding a chunk was descheduled
    }
  }
}

void ThreadPool::WorkerLoop(int worker_index) {
  uint32_t seen = 0;
  while (true) {
    auto spin_start = std::chrono::steady_clock::now();
    uint32_t gen;
    int spins = 0;
    while ((gen = static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >>
                                        kGenerationShift)) == seen) {
      CpuRelax();
      if (++spins % 1024 == 0 && std::chrono::steady_clock::now() - spin_start > kSpinDuration) {
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        num_sleeping_.fetch_add(1);
        sleep_cv_.wait(lock, [&] {
          return static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >>
                                       kGenerationShift) != seen;
        });
        num_sleeping_.fetch_sub(1);
        spin_start = std::chrono::steady_clock::now();
      }
    }
    seen = gen;
    if (stop_.load()) return;
    RunChunks(worker_index, gen);
  }
}

}  // namespace tandem
