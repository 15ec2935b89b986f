// A gtest fixture holding the real default model and its tokenizer, loaded
// once per test suite (the coordinator tests that run real steps share it).
#ifndef TANDEM_TESTS_UNIT_COORDINATOR_DEFAULT_MODEL_TEST_H_
#define TANDEM_TESTS_UNIT_COORDINATOR_DEFAULT_MODEL_TEST_H_

#include "engine/model/model.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/model/model_test_util.h"

namespace tandem::testing {

class DefaultModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = model::Model::Load(DefaultModelPath(), {});
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = m->release();
    auto vocab = tokenizer::LoadVocabFromGguf(model_->file());
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    tokenizer_ = tokenizer::Tokenizer::Create(*vocab)->release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete model_;
    tokenizer_ = nullptr;
    model_ = nullptr;
  }

  static inline model::Model* model_ = nullptr;
  static inline tokenizer::Tokenizer* tokenizer_ = nullptr;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_UNIT_COORDINATOR_DEFAULT_MODEL_TEST_H_
