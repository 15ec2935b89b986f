// How the emulator stops a kernel that misuses CUDA (mismatched barriers, a
// warp collective naming an exited lane, deadlock): a message on stderr, then
// std::abort(), so that tests check it with EXPECT_DEATH. Internal to
// kernels/cuda/emulation.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_FAULT_H_
#define TANDEM_KERNELS_CUDA_EMULATION_FAULT_H_

#include <source_location>
#include <string>
#include <string_view>

namespace tandem::cuda_emu {

// Prints "tandem cuda emulation: <message>" and aborts.
[[noreturn]] void Fatal(std::string_view message);

// "file:line" of a call site.
std::string SiteName(const std::source_location& site);

}  // namespace tandem::cuda_emu

#endif  // TANDEM_KERNELS_CUDA_EMULATION_FAULT_H_
