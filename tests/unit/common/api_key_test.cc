// ApiKey: flags, the Bearer check, and errors that never echo a key.
#include "common/api_key.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(ApiKeyTest, OpenWithoutFlags) {
  absl::StatusOr<ApiKey> key = ApiKey::FromFlags("", "");
  ASSERT_TRUE(key.ok());
  EXPECT_FALSE(key->required());
  EXPECT_TRUE(key->Check(std::nullopt).ok());
  EXPECT_TRUE(ApiKey().Check("Bearer anything").ok());
}

TEST(ApiKeyTest, ChecksTheBearerToken) {
  const ApiKey key = *ApiKey::FromFlags("s3cret-key", "");
  EXPECT_TRUE(key.required());
  EXPECT_TRUE(key.Check("Bearer s3cret-key").ok());
  EXPECT_TRUE(key.Check("bearer s3cret-key").ok());  // the scheme is case-insensitive
  for (const char* bad : {"", "Bearer", "Bearer ", "s3cret-key", "Basic s3cret-key",
                          "Bearer s3cret-ke", "Bearer s3cret-key2", "Bearer S3CRET-KEY"}) {
    absl::Status s = key.Check(std::string_view(bad));
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << bad;
    EXPECT_EQ(std::string(s.message()).find("s3cret"), std::string::npos) << s;
  }
  EXPECT_EQ(key.Check(std::nullopt).code(), absl::StatusCode::kUnauthenticated);
}

TEST(ApiKeyTest, ReadsAndValidatesTheKeyFile) {
  const std::string path = ::testing::TempDir() + "/api_key_test.key";
  {
    std::ofstream(path) << "\n  from-file \n";
  }
  absl::StatusOr<ApiKey> key = ApiKey::FromFlags("", path);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_TRUE(key->Check("Bearer from-file").ok());
  EXPECT_EQ(ApiKey::FromFlags("a", path).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApiKey::FromFlags("", "/nonexistent/k").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ApiKey::FromFlags("two words", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApiKey::FromFlags(std::string(kMaxApiKeyBytes + 1, 'k'), "").status().code(),
            absl::StatusCode::kInvalidArgument);
  {
    std::ofstream(path) << "   \n";
  }
  EXPECT_EQ(ApiKey::FromFlags("", path).status().code(), absl::StatusCode::kInvalidArgument);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tandem
