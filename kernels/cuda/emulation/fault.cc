#include "kernels/cuda/emulation/fault.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace tandem::cuda_emu {

void Fatal(std::string_view message) {
  std::fprintf(stderr, "tandem cuda emulation: %.*s\n", static_cast<int>(message.size()),
               message.data());
  std::fflush(stderr);
  std::abort();
}

std::string SiteName(const std::source_location& site) {
  return absl::StrCat(site.file_name(), ":", site.line());
}

}  // namespace tandem::cuda_emu
