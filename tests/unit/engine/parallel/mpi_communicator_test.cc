// MpiCommunicator across real MPI ranks. CTest runs this binary under
// `mpirun -np 3`; run alone it is a world of one. Every rank runs every test
// (each issues the same collectives in the same order); the exit code is
// non-zero on every rank if any rank failed.
#include "engine/parallel/mpi_communicator.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::parallel {
namespace {

TEST(MpiCommunicatorTest, RankAndWorldSizeMatchMpi) {
  MpiCommunicator comm;
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(comm.rank(), rank);
  EXPECT_EQ(comm.world_size(), size);
}

// Inputs whose float sum depends on the order of addition: the result must
// be the rank-order sum, bit for bit, on every rank.
TEST(MpiCommunicatorTest, AllReduceSumIsTheRankOrderSumOnEveryRank) {
  MpiCommunicator comm;
  const int64_t n = 1000;
  auto partial = [](int rank, int64_t i) {
    return (rank % 2 == 0 ? 1e8f : -1e8f) * static_cast<float>(rank + 1) +
           0.37f * static_cast<float>(i) + static_cast<float>(rank) * 1e-3f;
  };
  std::vector<float> data(n);
  for (int64_t i = 0; i < n; ++i) data[i] = partial(comm.rank(), i);
  ASSERT_TRUE(comm.AllReduceSum(data.data(), n).ok());
  for (int64_t i = 0; i < n; ++i) {
    float want = partial(0, i);
    for (int r = 1; r < comm.world_size(); ++r) want += partial(r, i);
    ASSERT_EQ(data[i], want) << "element " << i << " on rank " << comm.rank();
  }
  // Identical bits on every rank: rank 0's result broadcast and compared.
  std::string bytes(reinterpret_cast<const char*>(data.data()), n * sizeof(float));
  std::string root_bytes = bytes;
  ASSERT_TRUE(comm.Broadcast(&root_bytes, 0).ok());
  EXPECT_EQ(root_bytes, bytes) << "rank " << comm.rank();
}

TEST(MpiCommunicatorTest, AllReduceSumOfNothingIsOk) {
  MpiCommunicator comm;
  EXPECT_TRUE(comm.AllReduceSum(nullptr, 0).ok());
  EXPECT_EQ(comm.AllReduceSum(nullptr, -1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MpiCommunicatorTest, BroadcastReplacesEveryRanksBytesWithTheRoots) {
  MpiCommunicator comm;
  for (int root = 0; root < comm.world_size(); ++root) {
    std::string want(100000 + root, '\0');
    for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<char>((i * 31 + root) & 0xff);
    std::string bytes = comm.rank() == root ? want : std::string("stale");
    ASSERT_TRUE(comm.Broadcast(&bytes, root).ok());
    EXPECT_EQ(bytes, want) << "root " << root << " on rank " << comm.rank();
  }
  std::string empty = comm.rank() == 0 ? "" : "stale";
  ASSERT_TRUE(comm.Broadcast(&empty, 0).ok());
  EXPECT_EQ(empty, "");
}

TEST(MpiCommunicatorTest, BroadcastRejectsARootOutsideTheWorld) {
  MpiCommunicator comm;
  std::string bytes = "x";
  absl::Status s = comm.Broadcast(&bytes, comm.world_size());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("out of range"), std::string::npos) << s;
}

}  // namespace
}  // namespace tandem::parallel

int main(int argc, char** argv) {
  tandem::parallel::MpiSession mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    // Only rank 0 prints progress; other ranks print their failures only.
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any_failed;
}
