// Helpers of the device runner tests: token streams, one step's sequences,
// a forward through any ModelRunner and the comparison of logit rows.
#ifndef TANDEM_TESTS_UNIT_ENGINE_DEVICE_RUNNER_TEST_UTIL_H_
#define TANDEM_TESTS_UNIT_ENGINE_DEVICE_RUNNER_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "common/logging.h"
#include "engine/model/model.h"
#include "engine/model/model_runner.h"
#include "gtest/gtest.h"

namespace tandem::device {

using model::ForwardSequence;
using model::Model;

// `n` pseudo-random token ids in [100, 1000): inside the vocabulary of the
// generated tiny model these tests run (1024 tokens) and of the default one.
inline std::vector<int32_t> Tokens(int32_t n, int32_t seed) {
  std::vector<int32_t> t(n);
  for (int32_t i = 0; i < n; ++i) t[i] = 100 + (seed * 7919 + i * 104729) % 900;
  return t;
}

// One sequence of a step, owning what ForwardSequence points at.
struct Seq {
  std::vector<int32_t> tokens;
  int32_t start_pos = 0;
  std::vector<BlockId> table;
  int32_t num_logits = 1;
};

inline std::vector<float> Forward(model::ModelRunner& runner, const std::vector<Seq>& seqs) {
  std::vector<ForwardSequence> batch;
  for (const Seq& s : seqs) batch.push_back({s.tokens, s.start_pos, s.table, s.num_logits});
  std::vector<float> logits(Model::NumLogitRows(batch) * runner.model().config().vocab_size);
  absl::Status status = runner.Forward(batch, logits.data());
  CHECK(status.ok(), "%s", status.ToString());
  return logits;
}

// Every row's argmax is the same, and every logit is within `tol` of the
// reference's (absolute, after scaling by the row's largest magnitude).
inline void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, int32_t vocab,
                 float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t r = 0; r < want.size() / vocab; ++r) {
    const float* g = got.data() + r * vocab;
    const float* w = want.data() + r * vocab;
    float scale = 1.0f;
    float worst = 0.0f;
    for (int32_t i = 0; i < vocab; ++i) {
      scale = std::max(scale, std::fabs(w[i]));
      worst = std::max(worst, std::fabs(g[i] - w[i]));
    }
    EXPECT_LE(worst, tol * scale) << "row " << r;
    EXPECT_EQ(std::max_element(g, g + vocab) - g, std::max_element(w, w + vocab) - w)
        << "row " << r;
  }
}

inline std::vector<BlockId> Blocks(std::initializer_list<int32_t> ids) {
  std::vector<BlockId> t;
  for (int32_t id : ids) t.push_back(BlockId(id));
  return t;
}

}  // namespace tandem::device

#endif  // TANDEM_TESTS_UNIT_ENGINE_DEVICE_RUNNER_TEST_UTIL_H_
