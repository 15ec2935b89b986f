// ThreadCommunicator: ranks as threads; the sum is rank-ordered (the same
// bits as adding the partials 0, 1, 2, ... on one thread), broadcasts reach
// every rank, mismatched counts fail on every rank.
#include "engine/parallel/thread_communicator.h"

#include <functional>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::parallel {
namespace {

// Runs `body(rank, comm)` on one thread per rank of a world of `n`.
void RunRanks(int n, const std::function<void(int, Communicator&)>& body) {
  ThreadWorld world(n);
  std::vector<std::unique_ptr<Communicator>> comms = world.MakeCommunicators();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { body(r, *comms[r]); });
  for (std::thread& t : threads) t.join();
}

// Values whose float sum depends on the order of addition.
float Part(int rank, int i) { return rank == 1 ? -1e8f : (rank == 0 ? 1e8f : 1.0f) + i * 1e-3f; }

TEST(ThreadCommunicatorTest, AllReduceSumAddsInRankOrderOnEveryRank) {
  constexpr int kN = 3, kLen = 257;
  std::vector<std::vector<float>> out(kN);
  RunRanks(kN, [&](int rank, Communicator& comm) {
    EXPECT_EQ(comm.rank(), rank);
    EXPECT_EQ(comm.world_size(), kN);
    std::vector<float> data(kLen);
    for (int i = 0; i < kLen; ++i) data[i] = Part(rank, i);
    for (int repeat = 0; repeat < 3; ++repeat) {  // buffers reused across calls
      std::vector<float> d = data;
      EXPECT_TRUE(comm.AllReduceSum(d.data(), kLen).ok());  // EXPECT: a rank must not leave
      out[rank] = d;
    }
  });
  for (int i = 0; i < kLen; ++i) {
    const float expected = (Part(0, i) + Part(1, i)) + Part(2, i);
    for (int r = 0; r < kN; ++r) EXPECT_EQ(out[r][i], expected) << "rank " << r << " i " << i;
  }
}

TEST(ThreadCommunicatorTest, BroadcastReachesEveryRank) {
  std::vector<std::string> got(4);
  RunRanks(4, [&](int rank, Communicator& comm) {
    std::string bytes = rank == 2 ? std::string("plan\0bytes", 10) : "";
    EXPECT_TRUE(comm.Broadcast(&bytes, 2).ok());
    got[rank] = bytes;
  });
  for (const std::string& g : got) EXPECT_EQ(g, std::string("plan\0bytes", 10));
}

TEST(ThreadCommunicatorTest, MismatchedCountsFailOnEveryRank) {
  std::vector<absl::Status> status(2);
  RunRanks(2, [&](int rank, Communicator& comm) {
    std::vector<float> data(8, 1.0f);
    status[rank] = comm.AllReduceSum(data.data(), rank == 0 ? 8 : 4);
  });
  for (const absl::Status& s : status) EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST(ThreadCommunicatorTest, BadRootIsInvalidArgument) {
  RunRanks(2, [&](int, Communicator& comm) {
    std::string bytes;
    EXPECT_EQ(comm.Broadcast(&bytes, 2).code(), absl::StatusCode::kInvalidArgument);
  });
}

}  // namespace
}  // namespace tandem::parallel
