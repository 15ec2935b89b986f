// Performance counters of the emulated GPU: what a step asks of the device,
// counted exactly and repeatably (the same program gives the same counts),
// so that the GPU path can be steered without a GPU (issue: "GPU performance
// you can see without a GPU"). Off until EnableCounters; while off, every
// hook costs one relaxed load.
//
// What is counted, and where it is seen:
// - the runtime (always, once enabled): kernel launches with their grid and
//   block sizes, host synchronizations (cudaDeviceSynchronize,
//   cudaStreamSynchronize, cudaEventSynchronize, and every blocking
//   cudaMemcpy), graph launches and the nodes they replay, copies by
//   direction, count and bytes, their host side pinned (cudaMallocHost) or
//   pageable, memsets; and the FLOPs a launch declares (TANDEM_LAUNCH_FLOPS,
//   or the GEMM library's stand-in, which counts the cuBLAS call it stands
//   for, 2·m·n·k FLOPs and its operands' bytes, as a launch named after the
//   call and the weight's shape: "cublasGemmEx(bf16) [rows x cols]").
// - memory accesses, only in code built with the access instrumentation
//   (access_hooks.cc: the compiler's -fsanitize=thread instrumentation,
//   with the hooks defined here instead of by TSan; the profiled kernel
//   libraries of kernels/cuda/CMakeLists.txt). Each load and store of an
//   emulated CUDA thread is classed as global (inside a cudaMalloc
//   allocation), shared (the block's dynamic shared memory, or a static
//   __shared__ variable: thread-local storage under emulation) or neither
//   (locals, kernel parameters: not counted). Accesses are grouped per
//   warp into requests the way a GPU issues them: the k-th execution of
//   one instruction (its address in the emulated code) by the lanes of one
//   warp is one request. A global request touches the distinct 32-byte
//   sectors of its lanes' bytes (coalescing efficiency = distinct bytes
//   requested / (sectors × 32), at most 1: a broadcast uses its one sector
//   fully); a shared request takes as many wavefronts as the
//   largest number of distinct 4-byte words its lanes address in one of the
//   32 banks, per phase of 128 bytes (a request of 8-byte accesses runs in
//   two phases of 16 lanes, of 16-byte ones in four of 8 lanes), so
//   conflicts = wavefronts − phases. The access width is the size of each
//   instrumented access: what the code at -Og loads at once (a float4 or
//   uint4 copy is one 16-byte access, as nvcc's LDG.128).
//   Not seen: accesses inside uninstrumented code (the C library's memcpy,
//   the host code standing in for libraries), the L1/L2 caches (the
//   distinct sectors a launch touches give a DRAM estimate that assumes
//   nothing stays in L2 between launches), timing of any kind.
// - sampling: with block_stride k > 1 only every k-th block of a grid (by
//   linear index) records its accesses; every block still runs. A kernel's
//   access counts are then those of the sampled blocks, and
//   KernelCounters::AccessScale() = blocks / sampled blocks scales them.
//
// Thread-safety: thread-safe. Counts from launches on several host threads
// at once are summed; the per-warp grouping is per block, so exact.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_COUNTERS_H_
#define TANDEM_KERNELS_CUDA_EMULATION_COUNTERS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/emulation/cuda_types.h"

namespace tandem::cuda_emu {

// Warp-level requests to one memory space, in one direction.
struct MemoryCounters {
  int64_t requests = 0;  // (instruction, warp) executions
  int64_t lane_accesses = 0;
  int64_t bytes = 0;       // what the lanes asked for
  int64_t unique_bytes = 0;  // of those, distinct per request (a broadcast's once)
  int64_t sectors = 0;     // global: distinct 32-byte sectors per request, summed
  int64_t wavefronts = 0;  // shared: bank passes per request, summed
  int64_t phases = 0;      // shared: the passes without conflicts, summed
  // Requests by the widest access of their lanes: 1, 2, 4, 8, 16 bytes.
  std::array<int64_t, 5> requests_by_width{};

  // unique_bytes / (sectors × 32): the share of each fetched sector used;
  // 1 when no sector was touched.
  double Coalescing() const;
  int64_t BankConflicts() const { return wavefronts - phases; }
  void Add(const MemoryCounters& other);
};

struct KernelCounters {
  std::string name;
  int64_t launches = 0;
  int64_t blocks = 0;          // of all launches' grids
  int64_t sampled_blocks = 0;  // that recorded their accesses
  int64_t threads = 0;
  dim3 grid{0, 0, 0};   // of the last launch
  dim3 block{0, 0, 0};
  std::size_t dynamic_shared_bytes = 0;  // of the last launch
  double flops = 0;     // declared
  MemoryCounters global_loads, global_stores, shared_loads, shared_stores;
  int64_t global_atomics = 0;  // lane accesses
  // Distinct 32-byte global sectors each launch touched, summed over
  // launches, × 32: DRAM bytes if nothing stays in L2 between launches.
  int64_t dram_bytes = 0;

  // blocks / sampled_blocks (1 when no block was sampled).
  double AccessScale() const;
};

enum class CopyDirection { kHostToDevice, kDeviceToHost, kDeviceToDevice, kHostToHost };
inline constexpr int kNumCopyDirections = 4;
const char* CopyDirectionName(CopyDirection direction);

struct CopyCounters {
  int64_t count = 0;
  int64_t bytes = 0;
};

struct RuntimeCounters {
  int64_t kernel_launches = 0;  // issued directly, not replayed by a graph
  int64_t graph_launches = 0;
  int64_t graph_nodes = 0;  // operations the graph launches replayed
  int64_t host_syncs = 0;
  // [direction][0 = pageable, 1 = pinned host side]; device-to-device
  // copies are under [kDeviceToDevice][0].
  std::array<std::array<CopyCounters, 2>, kNumCopyDirections> copies{};
  CopyCounters memsets;
};

struct CounterSnapshot {
  RuntimeCounters runtime;
  std::vector<KernelCounters> kernels;  // in order of first launch

  // Null when `name` never launched.
  const KernelCounters* Kernel(const std::string& name) const;
};

struct CounterOptions {
  int block_stride = 1;  // record the accesses of every k-th block, >= 1
};

// Starts counting from zero (replacing what was counted before).
void EnableCounters(const CounterOptions& options = {});
void DisableCounters();
bool CountersEnabled();
// What was counted since EnableCounters or the last ResetCounters.
CounterSnapshot ReadCounters();
void ResetCounters();
// Whether code with the access instrumentation is linked in (otherwise the
// memory counters stay zero).
bool AccessCountingLinked();

// The FLOPs of the next kernel launch issued by the calling host thread
// (TANDEM_LAUNCH_FLOPS). A captured launch keeps them for every replay.
void DeclareLaunchFlops(double flops);
// The name the next launch of the calling host thread is counted under
// (TANDEM_LAUNCH_NAME; `name` must outlive the counting: a literal), in
// place of the kernel expression's text.
void DeclareLaunchName(const char* name);

// Hooks of the emulation runtime (internal to kernels/cuda/emulation).
namespace counters_internal {
double TakeDeclaredFlops();
// The declared name of this launch, or `fallback`.
const char* TakeDeclaredName(const char* fallback);
void OnHostSync();
void OnCopy(CopyDirection direction, bool pinned, std::size_t bytes);
void OnMemset(std::size_t bytes);
void OnGraphLaunch(int64_t nodes);
// True while the calling thread replays a graph (cudaGraphLaunch).
bool ReplayingGraph();
void SetReplayingGraph(bool replaying);
// The GEMM library's stand-in: one launch of `name` reading `read_bytes`
// and writing `written_bytes`, fully coalesced.
void OnLibraryGemm(const std::string& name, double flops, int64_t read_bytes,
                   int64_t written_bytes);
// The sampling stride of the counting in force (CounterOptions).
int BlockStride();
// Adds one launch (launches = 1 and what it did) to its kernel's counters;
// a launch not replayed by a graph also counts in kernel_launches.
void AddLaunch(const KernelCounters& launch, bool from_graph);
// Called once by the access hooks when instrumented code is loaded.
void MarkAccessCountingLinked();
}  // namespace counters_internal

}  // namespace tandem::cuda_emu

#endif  // TANDEM_KERNELS_CUDA_EMULATION_COUNTERS_H_
