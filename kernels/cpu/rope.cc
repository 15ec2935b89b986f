// Rope: rotary position embedding, llama "normal" (adjacent-pair) convention.
// The angles follow llama.cpp's recurrence so results match it to the ulp:
// theta_scale = powf(base, -2 / rope_dim); theta_0 = pos; theta_{i+1} =
// theta_i * theta_scale; cos/sin evaluated in float.
#include <cmath>
#include <vector>

#include "common/logging.h"
#include "kernels/kernels.h"

namespace tandem::kernels {

void Rope(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads,
          int64_t head_dim, int64_t rope_dim, float freq_base) {
  CHECK(rope_dim % 2 == 0 && rope_dim <= head_dim, "Rope: rope_dim %d head_dim %d", rope_dim,
        head_dim);
  const int64_t pairs = rope_dim / 2;
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(rope_dim));
  // cos/sin of one token, shared by its heads; grows once per thread.
  thread_local std::vector<float> cs;
  if (static_cast<int64_t>(cs.size()) < 2 * pairs) cs.resize(2 * pairs);
  for (int64_t t = 0; t < num_tokens; ++t) {
    float theta = static_cast<float>(positions[t]);
    for (int64_t i = 0; i < pairs; ++i) {
      cs[2 * i] = std::cos(theta);
      cs[2 * i + 1] = std::sin(theta);
      theta *= theta_scale;
    }
    for (int64_t h = 0; h < num_heads; ++h) {
      float* v = x + (t * num_heads + h) * head_dim;
      for (int64_t i = 0; i < pairs; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * c - x1 * s;
        v[2 * i + 1] = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace tandem::kernels
