// CUDA graphs under emulation: stream capture, instantiation and launch.
// While a stream captures (cudaStreamBeginCapture .. cudaStreamEndCapture),
// the kernel launches, cudaMemcpyAsync and cudaMemsetAsync issued on it are
// recorded instead of run (arguments copied at the call, as CUDA copies
// kernel parameters into the graph); a launched graph runs them again, in
// order, on the calling thread. So a replay reads whatever the captured
// pointers hold at launch time, as a GPU graph does: exactly the property a
// graph-safe launch sequence needs (every input that changes between
// replays must sit in device memory at a fixed address), and what the tests
// of graph users check here.
//
// As on a GPU: synchronizing a capturing stream is
// cudaErrorStreamCaptureUnsupported and invalidates the capture, whose
// EndCapture then fails with cudaErrorStreamCaptureInvalidated; the legacy
// default stream cannot capture; beginning a capture twice or ending one
// that was not begun is cudaErrorIllegalState. Not emulated: launch-configuration errors
// surface at replay (the GPU reports them at capture), graph node APIs,
// capture across streams (events), cudaGraphExecUpdate.
//
// Host work that stands in for a library under emulation (the CPU matmul of
// gemm_emulated.cc, the host all-reduce of the emulated device
// communicator) records itself into a capture with RecordIfCapturing, as
// cuBLAS GEMMs and NCCL collectives are captured on a GPU. A recorded
// operation returns its error: a replay stops at the first that fails (a
// copy's, or host work's such as a failed all-reduce) and cudaGraphLaunch
// returns it (a GPU reports a failed node asynchronously; the emulator at
// the launch). A recorded kernel launch reports no error at replay.
//
// Thread-safety: thread-safe; a capture belongs to its stream.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_GRAPH_H_
#define TANDEM_KERNELS_CUDA_EMULATION_GRAPH_H_

#include <functional>

#include "kernels/cuda/emulation/cuda_types.h"

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

namespace tandem::cuda_emu {

// One recorded operation: runs the launch, copy or host work; returns
// cudaSuccess or the error that stops the replay.
using GraphOperation = std::function<cudaError_t()>;

// When `stream` is capturing, appends `operation` to its capture and
// returns true; otherwise returns false (the caller runs it now).
bool RecordIfCapturing(cudaStream_t stream, GraphOperation operation);

// Records `operation` into `stream`'s capture and returns cudaSuccess, or,
// when `stream` is not capturing, runs it now and returns its error.
cudaError_t RunOrRecord(cudaStream_t stream, const GraphOperation& operation);

// Whether `stream` is capturing (an invalidated capture counts).
bool IsCapturing(cudaStream_t stream);

// Marks a capturing `stream`'s capture invalidated (a forbidden call was
// made on it); EndCapture then fails with cudaErrorStreamCaptureInvalidated.
void InvalidateCapture(cudaStream_t stream);

}  // namespace tandem::cuda_emu

#endif  // TANDEM_KERNELS_CUDA_EMULATION_GRAPH_H_
