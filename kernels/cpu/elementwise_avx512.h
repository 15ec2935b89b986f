// AVX-512 bodies of the ISA-dispatched RmsNorm and SiluMul overloads
// (kernels.h). Callable only when HardwareIsa() == kAvx512. Each output
// element depends only on its own row (RmsNorm) or element (SiluMul), by a
// fixed sequence of operations, so any split of the work gives the same bits.
#ifndef TANDEM_KERNELS_CPU_ELEMENTWISE_AVX512_H_
#define TANDEM_KERNELS_CPU_ELEMENTWISE_AVX512_H_

#include <cstdint>

#include "kernels/kernels.h"

namespace tandem::kernels {

// Rows [0, n) of RmsNorm; Σx² in 16 lanes over the row, then a fixed tree.
void RmsNormRowsAvx512(const float* x, const float* weight, int64_t n, int64_t dim, float eps,
                       float* out);

// gate[i] = gate[i] / (1 + e^-gate[i]) * up[i] with a vector exp (relative
// error < 3e-7).
void SiluMulAvx512(float* gate, const float* up, int64_t n);

// LogSoftmaxNormalizer (kernels.h): the max in 16 lanes, then Σ e^(x - max)
// with Exp512, each lane's terms summed in double.
SoftmaxNormalizer LogSoftmaxNormalizerAvx512(const float* x, int64_t n);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_ELEMENTWISE_AVX512_H_
