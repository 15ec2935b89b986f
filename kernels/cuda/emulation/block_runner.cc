#include "kernels/cuda/emulation/block_runner.h"

#include <bit>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/emulation/fault.h"
#include "kernels/cuda/emulation/sanitizer_hooks.h"
#include "kernels/cuda/emulation/thread_context.h"

namespace tandem::cuda_emu {
namespace {

bool SameSite(const std::source_location& a, const std::source_location& b) {
  // One translation unit's sites share the file name's pointer: compare
  // pointers first (every thread of a block checks at every barrier).
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

bool IsShuffle(WarpOp op) {
  return op == WarpOp::kShflIdx || op == WarpOp::kShflUp || op == WarpOp::kShflDown ||
         op == WarpOp::kShflXor;
}

uint64_t BlockSeed(const BlockSpec& spec) {
  const uint64_t linear =
      spec.block_idx.x +
      uint64_t{spec.grid_dim.x} * (spec.block_idx.y + uint64_t{spec.grid_dim.y} * spec.block_idx.z);
  return spec.order.seed ^ (linear * 0x9e3779b97f4a7c15ull);
}

}  // namespace

BlockRunner::BlockRunner(const BlockSpec& spec, const std::function<void()>& kernel)
    : spec_(spec), kernel_(kernel), rng_(BlockSeed(spec)) {
  const dim3& d = spec.block_dim;
  num_threads_ = static_cast<int>(d.x * d.y * d.z);
  live_ = num_threads_;
  threads_.resize(num_threads_);
  warps_.resize((num_threads_ + kWarpSize - 1) / kWarpSize);
  ready_.assign((num_threads_ + 63) / 64, 0);
  for (int t = 0; t < num_threads_; ++t) {
    const unsigned u = static_cast<unsigned>(t);
    threads_[t].idx = uint3{u % d.x, u / d.x % d.y, u / (d.x * d.y)};
    SetReady(t, true);
  }
}

void BlockRunner::Run() {
  ThreadContext saved = current_thread_context;
  current_thread_context = ThreadContext{
      {0, 0, 0}, spec_.block_idx, spec_.block_dim, spec_.grid_dim, this, spec_.dynamic_shared};
  // Everything the launching thread did so far (the kernel's arguments and
  // inputs) happens-before the block's threads: each acquires this at start.
  sanitizer::Release(&start_token_);
  sanitizer::IgnoreBegin();
  while (true) {
    const int t = PickReady();
    if (t >= 0) {
      RunThread(t);
    } else if (!CompleteActiveMasks()) {
      break;
    }
  }
  if (live_ > 0) FailDeadlock();
  ThreadFiber::EndOfBlock();
  sanitizer::IgnoreEnd();
  // Everything the block's threads did happens-before what the launching
  // thread does next (the next block, or reading results).
  sanitizer::Acquire(&exit_token_);
  current_thread_context = saved;
}

int BlockRunner::PickReady() {
  if (num_ready_ == 0) return -1;
  const int words = static_cast<int>(ready_.size());
  switch (spec_.order.kind) {
    case ExecutionOrder::Kind::kSequential:
      for (int w = 0; w < words; ++w) {
        if (ready_[w] != 0) return w * 64 + std::countr_zero(ready_[w]);
      }
      break;
    case ExecutionOrder::Kind::kReverse:
      for (int w = words - 1; w >= 0; --w) {
        if (ready_[w] != 0) return w * 64 + 63 - std::countl_zero(ready_[w]);
      }
      break;
    case ExecutionOrder::Kind::kRandom: {
      int k = static_cast<int>(rng_() % static_cast<uint64_t>(num_ready_));
      for (int w = 0; w < words; ++w) {
        const int count = std::popcount(ready_[w]);
        if (k >= count) {
          k -= count;
          continue;
        }
        uint64_t bits = ready_[w];
        for (; k > 0; --k) bits &= bits - 1;  // drop the k lowest
        return w * 64 + std::countr_zero(bits);
      }
      break;
    }
  }
  return -1;
}

void BlockRunner::SetReady(int t, bool ready) {
  const uint64_t bit = uint64_t{1} << (t % 64);
  const bool was = (ready_[t / 64] & bit) != 0;
  if (was == ready) return;
  ready_[t / 64] ^= bit;
  num_ready_ += ready ? 1 : -1;
  if (ready && threads_[t].state != State::kNotStarted) {
    // Leaving a barrier or a warp collective.
    WarpLanes& w = warps_[t / kWarpSize];
    const unsigned lane_bit = 1u << (t % kWarpSize);
    w.blocked &= ~lane_bit;
    w.at_warp &= ~lane_bit;
    if (w.at_warp == 0) w.uniform = true;
    threads_[t].state = State::kReady;
  }
}

void BlockRunner::EnterWarpCollective(int t, const WarpArrival& arrival) {
  WarpLanes& w = warps_[t / kWarpSize];
  if (w.at_warp == 0) {
    w.collective = arrival;
    w.uniform = true;
  } else if (!SameCollective(w.collective, arrival)) {
    w.uniform = false;
  }
  w.at_warp |= 1u << (t % kWarpSize);
  threads_[t].state = State::kAtWarp;
}

void BlockRunner::RunThread(int t) {
  Thread& thread = threads_[t];
  SetReady(t, false);
  if (thread.state == State::kNotStarted) {
    // Created at first run so that only running threads hold a stack.
    thread.fiber = std::make_unique<ThreadFiber>(sanitizer::kFiberStackBytes, [this, t] {
      sanitizer::Acquire(&start_token_);
      kernel_();
      OnThreadExit(t);
    });
  }
  thread.state = State::kRunning;
  current_ = t;
  current_thread_context.thread_idx = thread.idx;
  thread.fiber->Resume();
  current_ = -1;
  if (thread.fiber->finished()) thread.fiber.reset();
}

void BlockRunner::OnThreadExit(int t) {
  sanitizer::ScopedIgnore ignore;
  threads_[t].state = State::kExited;
  warps_[t / kWarpSize].blocked |= 1u << (t % kWarpSize);
  --live_;
  const int lane = t % kWarpSize;
  const int base = t - lane;
  for (unsigned waiting = warps_[t / kWarpSize].at_warp; waiting != 0; waiting &= waiting - 1) {
    const int u = base + std::countr_zero(waiting);
    const Thread& other = threads_[u];
    if (other.arrival.mask >> lane & 1u) {
      Fatal(absl::StrFormat("%s: %s at %s: mask 0x%08x names lane %d (%s), which has exited",
                            Where(u), WarpOpName(other.arrival.op), SiteName(other.site),
                            other.arrival.mask, lane, ThreadName(t)));
    }
  }
  MaybeOpenBarrier();
  sanitizer::Release(&exit_token_);
}

void BlockRunner::SyncThreads(const std::source_location& site) {
  sanitizer::ScopedIgnore ignore;
  const int t = current_;
  CheckBarrierArrival(t, site);
  Thread& self = threads_[t];
  self.state = State::kAtBarrier;
  warps_[t / kWarpSize].blocked |= 1u << (t % kWarpSize);
  self.site = site;
  if (barrier_waiting_ == 0) barrier_site_ = site;
  ++barrier_waiting_;
  char* token = &barrier_tokens_[barrier_generation_ & 1];
  sanitizer::Release(token);
  MaybeOpenBarrier();
  self.fiber->Suspend();
  sanitizer::Acquire(token);
}

void BlockRunner::MaybeOpenBarrier() {
  if (barrier_waiting_ == 0 || barrier_waiting_ < live_) return;
  for (int t = 0; t < num_threads_; ++t) {
    if (threads_[t].state == State::kAtBarrier) SetReady(t, true);
  }
  barrier_waiting_ = 0;
  ++barrier_generation_;
}

void BlockRunner::CheckBarrierArrival(int t, const std::source_location& site) const {
  if (barrier_waiting_ > 0 && !SameSite(barrier_site_, site)) {
    int waiting = 0;
    while (threads_[waiting].state != State::kAtBarrier) ++waiting;
    Fatal(absl::StrCat(Where(t), ": mismatched barriers: __syncthreads at ", SiteName(site),
                       " while ", ThreadName(waiting), " waits at __syncthreads at ",
                       SiteName(barrier_site_),
                       " (all threads of a block must reach the same one)"));
  }
  const int lane = t % kWarpSize;
  const int base = t - lane;
  // Only lanes at a warp collective can name this one (WarpLanes::at_warp),
  // usually none: every thread of the block passes here at every barrier.
  for (unsigned waiting = warps_[t / kWarpSize].at_warp; waiting != 0; waiting &= waiting - 1) {
    const int u = base + std::countr_zero(waiting);
    const Thread& other = threads_[u];
    if (other.arrival.mask >> lane & 1u) {
      Fatal(absl::StrFormat(
          "%s: mismatched barriers: __syncthreads at %s while lane %d (%s) waits at %s at %s "
          "with mask 0x%08x naming this thread",
          Where(t), SiteName(site), u % kWarpSize, ThreadName(u), WarpOpName(other.arrival.op),
          SiteName(other.site), other.arrival.mask));
    }
  }
}

uint64_t BlockRunner::WarpCollective(const WarpArrival& arrival, const std::source_location& site) {
  sanitizer::ScopedIgnore ignore;
  const int t = current_;
  ValidateWarpArrival(t, arrival, site);
  const unsigned participants = arrival.mask & ExistingLanes(t / kWarpSize);
  CheckWarpArrival(t, arrival, participants, site);
  Thread& self = threads_[t];
  EnterWarpCollective(t, arrival);
  self.site = site;
  self.arrival = arrival;
  char* token = WarpToken(t, arrival, participants);  // null: no memory ordering
  if (token != nullptr) sanitizer::Release(token);
  if (arrival.op != WarpOp::kActiveMask) MaybeCompleteWarp(t, participants);
  self.fiber->Suspend();
  if (token != nullptr) sanitizer::Acquire(token);
  return self.result;
}

void BlockRunner::ValidateWarpArrival(int t, const WarpArrival& arrival,
                                      const std::source_location& site) const {
  const int lane = t % kWarpSize;
  if (arrival.op != WarpOp::kActiveMask && !(arrival.mask >> lane & 1u)) {
    Fatal(absl::StrFormat("%s: %s at %s: mask 0x%08x does not name the calling lane %d", Where(t),
                          WarpOpName(arrival.op), SiteName(site), arrival.mask, lane));
  }
  if (IsShuffle(arrival.op) && (arrival.width < 1 || arrival.width > kWarpSize ||
                                !std::has_single_bit(unsigned(arrival.width)))) {
    Fatal(absl::StrFormat("%s: %s at %s: width %d is not a power of two in [1, %d]", Where(t),
                          WarpOpName(arrival.op), SiteName(site), arrival.width, kWarpSize));
  }
}

void BlockRunner::CheckWarpArrival(int t, const WarpArrival& arrival, unsigned participants,
                                   const std::source_location& site) const {
  const int lane = t % kWarpSize;
  const int base = t - lane;
  const WarpLanes& w = warps_[t / kWarpSize];
  const unsigned others = participants & ~(1u << lane);
  if ((others & w.blocked) == 0 &&
      ((others & w.at_warp) == 0 || (w.uniform && SameCollective(w.collective, arrival)))) {
    return;  // no partner exited, waits at a barrier or at another collective
  }
  for (int j = 0; j < kWarpSize; ++j) {
    if (j == lane || !(participants >> j & 1u)) continue;
    const Thread& other = threads_[base + j];
    std::string problem;
    if (other.state == State::kExited) {
      problem = "which has exited";
    } else if (other.state == State::kAtBarrier) {
      problem = absl::StrCat("which waits at __syncthreads at ", SiteName(other.site));
    } else if (other.state == State::kAtWarp && (other.arrival.mask >> lane & 1u) &&
               !SameCollective(other.arrival, arrival)) {
      problem =
          absl::StrFormat("which waits at %s with mask 0x%08x at %s", WarpOpName(other.arrival.op),
                          other.arrival.mask, SiteName(other.site));
    }
    if (!problem.empty()) {
      Fatal(absl::StrFormat("%s: %s at %s: mask 0x%08x names lane %d (%s), %s", Where(t),
                            WarpOpName(arrival.op), SiteName(site), arrival.mask, j,
                            ThreadName(base + j), problem));
    }
  }
}

char* BlockRunner::WarpToken(int t, const WarpArrival& arrival, unsigned participants) {
  char* token = nullptr;
  if (arrival.op == WarpOp::kSyncWarp) {
    const int lane = t % kWarpSize;
    for (int j = 0; j < kWarpSize && token == nullptr; ++j) {
      if (j == lane || !(participants >> j & 1u)) continue;
      const Thread& other = threads_[t - lane + j];
      if (other.state == State::kAtWarp && SameCollective(other.arrival, arrival)) {
        token = other.warp_token;  // a partner of the same __syncwarp arrived first
      }
    }
    if (token == nullptr) token = &warp_tokens_.emplace_back(0);
  }
  threads_[t].warp_token = token;
  return token;
}

void BlockRunner::MaybeCompleteWarp(int t, unsigned participants) {
  if ((warps_[t / kWarpSize].at_warp & participants) != participants) return;  // not all here
  const int base = t - t % kWarpSize;
  const WarpArrival& arrival = threads_[t].arrival;
  std::array<WarpArrival, kWarpSize> arrivals;
  for (int j = 0; j < kWarpSize; ++j) {
    if (!(participants >> j & 1u)) continue;
    const Thread& other = threads_[base + j];
    if (other.state != State::kAtWarp || !SameCollective(other.arrival, arrival)) return;
    arrivals[j] = other.arrival;
  }
  std::array<uint64_t, kWarpSize> results{};
  ComputeWarpResults(arrivals, participants, results);
  for (int j = 0; j < kWarpSize; ++j) {
    if (!(participants >> j & 1u)) continue;
    threads_[base + j].result = results[j];
    SetReady(base + j, true);
  }
}

unsigned BlockRunner::ExistingLanes(int warp) const {
  const int count = num_threads_ - warp * kWarpSize;
  return count >= kWarpSize ? ~0u : (1u << count) - 1;
}

bool BlockRunner::CompleteActiveMasks() {
  bool completed = false;
  for (int t = 0; t < num_threads_; ++t) {
    const Thread& first = threads_[t];
    if (first.state != State::kAtWarp || first.arrival.op != WarpOp::kActiveMask) continue;
    // `first` is the lowest lane of its (warp, call site) group.
    const int base = t - t % kWarpSize;
    unsigned group = 0;
    for (int u = t; u < base + kWarpSize && u < num_threads_; ++u) {
      const Thread& other = threads_[u];
      if (other.state == State::kAtWarp && other.arrival.op == WarpOp::kActiveMask &&
          SameSite(other.site, first.site)) {
        group |= 1u << (u - base);
      }
    }
    for (int j = 0; j < kWarpSize; ++j) {
      if (!(group >> j & 1u)) continue;
      threads_[base + j].result = group;
      SetReady(base + j, true);  // leaves kAtWarp, so the group is not found again
    }
    completed = true;
  }
  return completed;
}

void BlockRunner::FailDeadlock() const {
  std::string waiting;
  int listed = 0;
  for (int t = 0; t < num_threads_; ++t) {
    if (threads_[t].state == State::kExited) continue;
    if (++listed <= 8) absl::StrAppend(&waiting, "\n  ", ThreadName(t), " ", WaitDescription(t));
  }
  if (listed > 8) absl::StrAppend(&waiting, "\n  ... and ", listed - 8, " more");
  Fatal(absl::StrFormat("kernel '%s' block (%u,%u,%u): deadlock: %d live threads, none can run:%s",
                        spec_.kernel_name, spec_.block_idx.x, spec_.block_idx.y, spec_.block_idx.z,
                        live_, waiting));
}

std::string BlockRunner::WaitDescription(int t) const {
  const Thread& thread = threads_[t];
  if (thread.state == State::kAtBarrier) {
    return absl::StrCat("waits at __syncthreads at ", SiteName(thread.site));
  }
  if (thread.state == State::kAtWarp) {
    return absl::StrFormat("waits at %s with mask 0x%08x at %s", WarpOpName(thread.arrival.op),
                           thread.arrival.mask, SiteName(thread.site));
  }
  return "has not finished";
}

std::string BlockRunner::ThreadName(int t) const {
  const uint3& i = threads_[t].idx;
  return absl::StrFormat("thread (%u,%u,%u)", i.x, i.y, i.z);
}

std::string BlockRunner::Where(int t) const {
  return absl::StrFormat("kernel '%s' block (%u,%u,%u) %s", spec_.kernel_name, spec_.block_idx.x,
                         spec_.block_idx.y, spec_.block_idx.z, ThreadName(t));
}

}  // namespace tandem::cuda_emu
