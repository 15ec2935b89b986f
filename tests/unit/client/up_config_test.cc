#include "client/up_config.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::client {
namespace {

using ::testing::HasSubstr;

absl::Status Apply(const std::string& text, UpOptions* o, const std::set<std::string>& keep = {}) {
  return ApplyUpConfigJson(text, "up.json", keep, o);
}

TEST(UpConfigTest, EveryKeyIsApplied) {
  UpOptions o;
  ASSERT_TRUE(Apply(R"({"model": "m.gguf", "tp": 3, "replicas": 2, "port": 5000, "bin_dir": "/b",
                        "mpirun": "mpiexec", "grace_s": 4, "draft_model": "d.gguf",
                        "worker_args": ["--threads=1", "--kv-blocks=64"],
                        "draft_args": ["--threads=2"], "coordinator_args": [],
                        "tls_cert": "c.pem", "tls_key": "k.pem"})",
                    &o)
                  .ok());
  EXPECT_EQ(o.model, "m.gguf");
  EXPECT_EQ(o.tp, 3);
  EXPECT_EQ(o.replicas, 2);
  EXPECT_EQ(o.port, 5000);
  EXPECT_EQ(o.bin_dir, "/b");
  EXPECT_EQ(o.mpirun, "mpiexec");
  EXPECT_EQ(o.grace_s, 4);
  EXPECT_TRUE(o.draft);
  EXPECT_EQ(o.draft_model, "d.gguf");
  EXPECT_EQ(o.worker_args, (std::vector<std::string>{"--threads=1", "--kv-blocks=64"}));
  EXPECT_EQ(o.draft_args, std::vector<std::string>{"--threads=2"});
  EXPECT_TRUE(o.coordinator_args.empty());
  EXPECT_EQ(o.tls_cert, "c.pem");
  EXPECT_EQ(o.tls_key, "k.pem");
}

TEST(UpConfigTest, KeysLeftOutKeepTheirValues) {
  UpOptions o;
  o.model = "from-flag.gguf";
  o.tp = 7;
  ASSERT_TRUE(Apply(R"({"port": 1})", &o).ok());
  EXPECT_EQ(o.model, "from-flag.gguf");
  EXPECT_EQ(o.tp, 7);
  EXPECT_EQ(o.port, 1);
}

TEST(UpConfigTest, KeysTheCommandLineSetsAreNotApplied) {
  UpOptions o;
  o.tp = 2;  // given as --tp 2 (the default, but given)
  o.draft = false;
  ASSERT_TRUE(Apply(R"({"tp": 1, "port": 9, "draft_model": "d.gguf"})", &o,
                    {"tp", "draft_model"})
                  .ok());
  EXPECT_EQ(o.tp, 2);
  EXPECT_FALSE(o.draft);
  EXPECT_EQ(o.port, 9);
}

TEST(UpConfigTest, KeptKeysAreStillChecked) {
  UpOptions o;
  absl::Status s = Apply(R"({"tp": "2"})", &o, {"tp"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

TEST(UpConfigTest, DraftModelNoneMeansNoDraftWorker) {
  UpOptions o;
  ASSERT_TRUE(Apply(R"({"draft_model": "none"})", &o).ok());
  EXPECT_FALSE(o.draft);
  ASSERT_TRUE(Apply(R"({"draft_model": ""})", &o).ok());
  EXPECT_TRUE(o.draft);
  EXPECT_EQ(o.draft_model, "");  // the target model
}

TEST(UpConfigTest, UnknownKeyIsNamedWithTheKnownOnes) {
  UpOptions o;
  absl::Status s = Apply(R"({"model": "m", "tpp": 2})", &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("up.json: unknown key \"tpp\""));
  EXPECT_THAT(std::string(s.message()), HasSubstr("model, tp, replicas, port"));
}

TEST(UpConfigTest, WrongTypesNameKeyValueAndExpectation) {
  struct Case {
    const char* text;
    const char* message;
  };
  for (const Case& c : {
           Case{R"({"tp": "2"})", "up.json: key \"tp\" must be an integer, got \"2\""},
           Case{R"({"tp": 2.5})", "key \"tp\" must be an integer, got 2.5"},
           Case{R"({"model": 1})", "key \"model\" must be a string, got 1"},
           Case{R"({"draft_model": null})", "key \"draft_model\" must be a string, got null"},
           Case{R"({"worker_args": "--threads=1"})",
                "key \"worker_args\" must be an array of strings, got \"--threads=1\""},
           Case{R"({"draft_args": ["--threads", 1]})",
                "key \"draft_args\" must be an array of strings, got [\"--threads\",1]"},
           Case{R"({"port": 4294967296})", "key \"port\" = 4294967296 does not fit"},
           Case{R"({"grace_s": -3000000000})", "key \"grace_s\" = -3000000000 does not fit"},
       }) {
    UpOptions o;
    absl::Status s = Apply(c.text, &o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message)) << c.text;
  }
}

TEST(UpConfigTest, NotAnObjectOrNotJson) {
  UpOptions o;
  absl::Status s = Apply(R"(["model"])", &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("must be a JSON object"));
  s = Apply("{\n  \"tp\": 2,\n}", &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("up.json: not valid JSON"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("line 3"));
  s = Apply("", &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

TEST(UpConfigTest, FlagsMapToTheirKeys) {
  EXPECT_EQ(UpConfigKeyOfFlag("tp"), "tp");
  EXPECT_EQ(UpConfigKeyOfFlag("replicas"), "replicas");
  EXPECT_EQ(UpConfigKeyOfFlag("grace_s"), "grace_s");
  EXPECT_EQ(UpConfigKeyOfFlag("worker_arg"), "worker_args");
  EXPECT_EQ(UpConfigKeyOfFlag("draft_arg"), "draft_args");
  EXPECT_EQ(UpConfigKeyOfFlag("coordinator_arg"), "coordinator_args");
  EXPECT_EQ(UpConfigKeyOfFlag("draft_model"), "draft_model");
  EXPECT_EQ(UpConfigKeyOfFlag("no_draft"), "draft_model");
  EXPECT_EQ(UpConfigKeyOfFlag("tls_cert"), "tls_cert");
  EXPECT_EQ(UpConfigKeyOfFlag("temperature"), "");
  EXPECT_EQ(UpConfigKeyOfFlag("config"), "");
  EXPECT_EQ(UpConfigKeyOfFlag(""), "");
}

TEST(UpConfigTest, FilesAreReadOrTheReasonIsNamed) {
  const std::string path = ::testing::TempDir() + "/up_config_test.json";
  {
    std::ofstream out(path);
    out << R"({"tp": 1, "port": 0})";
  }
  UpOptions o;
  ASSERT_TRUE(ApplyUpConfigFile(path, {}, &o).ok());
  EXPECT_EQ(o.tp, 1);
  std::remove(path.c_str());

  absl::Status s = ApplyUpConfigFile("/nonexistent/up.json", {}, &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("/nonexistent/up.json"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("No such file"));

  s = ApplyUpConfigFile(::testing::TempDir(), {}, &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("is a directory"));
}

}  // namespace
}  // namespace tandem::client
