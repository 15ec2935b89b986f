#include "engine/sampling/stop_checker.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::sampling {
namespace {

// Feeds `chunks` and returns everything emitted (including Flush when not
// stopped), and whether a stop matched.
std::pair<std::string, bool> FeedAll(StopChecker& checker, const std::vector<std::string>& chunks) {
  std::string out;
  for (const std::string& c : chunks) {
    StopChecker::Update u = checker.Append(c);
    out += u.emit;
    if (u.stopped) return {out, true};
  }
  out += checker.Flush();
  return {out, false};
}

TEST(StopCheckerTest, NoStopsPassesThrough) {
  StopChecker checker({});
  StopChecker::Update u = checker.Append("hello");
  EXPECT_EQ(u.emit, "hello");
  EXPECT_FALSE(u.stopped);
  EXPECT_EQ(checker.Flush(), "");
}

TEST(StopCheckerTest, MatchInsideOneChunk) {
  StopChecker checker({"STOP"});
  StopChecker::Update u = checker.Append("abcSTOPdef");
  EXPECT_EQ(u.emit, "abc");
  EXPECT_TRUE(u.stopped);
  EXPECT_TRUE(checker.stopped());
  u = checker.Append("more");
  EXPECT_EQ(u.emit, "");
  EXPECT_TRUE(u.stopped);
  EXPECT_EQ(checker.Flush(), "");
}

TEST(StopCheckerTest, MatchSplitAcrossChunksIsHeldBack) {
  StopChecker checker({"</s>"});
  StopChecker::Update u = checker.Append("Hello <");
  EXPECT_EQ(u.emit, "Hello ");
  EXPECT_EQ(checker.num_held(), 1u);
  u = checker.Append("/");
  EXPECT_EQ(u.emit, "");
  u = checker.Append("s");
  EXPECT_EQ(u.emit, "");
  EXPECT_EQ(checker.num_held(), 3u);
  u = checker.Append(">tail");
  EXPECT_EQ(u.emit, "");
  EXPECT_TRUE(u.stopped);
}

TEST(StopCheckerTest, PartialMatchThatFailsIsReleased) {
  StopChecker checker({"</s>"});
  EXPECT_EQ(checker.Append("a </").emit, "a ");
  StopChecker::Update u = checker.Append("b> c");
  EXPECT_EQ(u.emit, "</b> c");
  EXPECT_FALSE(u.stopped);
  EXPECT_EQ(checker.num_held(), 0u);
}

TEST(StopCheckerTest, NoFalseHoldBack) {
  StopChecker checker({"###", "\n\nUser:"});
  // Nothing here can begin a stop string, so all of it goes out at once.
  StopChecker::Update u = checker.Append("Hello, world.");
  EXPECT_EQ(u.emit, "Hello, world.");
  EXPECT_EQ(checker.num_held(), 0u);
  // A held suffix is released at the end when generation finishes.
  u = checker.Append(" ##");
  EXPECT_EQ(u.emit, " ");
  EXPECT_EQ(checker.Flush(), "##");
  EXPECT_EQ(checker.num_held(), 0u);
}

TEST(StopCheckerTest, EarliestOfSeveralStopsWins) {
  {
    StopChecker checker({"world", "lo"});
    auto [out, stopped] = FeedAll(checker, {"hel", "lo wor", "ld"});
    EXPECT_TRUE(stopped);
    EXPECT_EQ(out, "hel");
  }
  {
    // The later-listed, longer stop starts earlier in the text.
    StopChecker checker({"cd", "abcde"});
    auto [out, stopped] = FeedAll(checker, {"xxab", "cdef"});
    EXPECT_TRUE(stopped);
    EXPECT_EQ(out, "xx");
  }
  {
    // Overlapping prefixes: "aab" after "aa" held for "aaa".
    StopChecker checker({"aaa", "ab"});
    auto [out, stopped] = FeedAll(checker, {"xa", "a", "b"});
    EXPECT_TRUE(stopped);
    EXPECT_EQ(out, "xa");
  }
}

TEST(StopCheckerTest, EveryChunkingGivesTheSameOutput) {
  const std::string text = "The answer is 42.\n\nObservation: done\n\nUser: next";
  const std::vector<std::string> stops = {"\n\nUser:", "Observation:"};
  const std::string expected = "The answer is 42.\n\n";
  for (size_t a = 0; a <= text.size(); ++a) {
    for (size_t b = a; b <= text.size(); b += 3) {
      StopChecker checker(stops);
      auto [out, stopped] =
          FeedAll(checker, {text.substr(0, a), text.substr(a, b - a), text.substr(b)});
      ASSERT_TRUE(stopped) << a << "," << b;
      ASSERT_EQ(out, expected) << a << "," << b;
    }
  }
}

TEST(StopCheckerTest, Utf8MultibyteAroundTheStop) {
  // "é" = C3 A9, "日本" = E6 97 A5 E6 9C AC, stop "本。" = E6 9C AC E3 80 82.
  StopChecker checker({"本。"});
  // The held suffix starts at a character boundary (the lead byte of 本),
  // never inside 日 even though 日 and 本 share their first byte E6.
  StopChecker::Update u = checker.Append("café日本");
  EXPECT_EQ(u.emit, "café日");
  EXPECT_EQ(checker.num_held(), 3u);
  u = checker.Append("語");  // not a stop: 本 is released whole
  EXPECT_EQ(u.emit, "本語");
  u = checker.Append("é本");
  EXPECT_EQ(u.emit, "é");
  u = checker.Append("。後");
  EXPECT_TRUE(u.stopped);
  EXPECT_EQ(u.emit, "");

  // Emitted pieces are always whole characters when chunks are.
  StopChecker c2({"。"});
  std::string all;
  for (const char* chunk : {"日", "本", "語", "。", "x"}) {
    StopChecker::Update v = c2.Append(chunk);
    all += v.emit;
    if (v.stopped) break;
  }
  EXPECT_EQ(all, "日本語");
}

}  // namespace
}  // namespace tandem::sampling
