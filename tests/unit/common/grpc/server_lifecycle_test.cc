// Server start-up and drain (common/grpc/server_lifecycle.h) on a real gRPC server
// on 127.0.0.1: the drain order (health NOT_SERVING before the process stops
// admitting, then the server gone) and the signal wait.
#include "common/grpc/server_lifecycle.h"

#include <pthread.h>
#include <signal.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "common/grpc/grpc_server.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

namespace health_pb = grpc::health::v1;

constexpr char kService[] = "tandem.test.Service";

// The health status `address` reports for `service`, or the call's error
// code name ("UNAVAILABLE" once the server is gone).
std::string Health(const std::string& address, const std::string& service) {
  std::unique_ptr<health_pb::Health::Stub> stub = health_pb::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  health_pb::HealthCheckRequest request;
  request.set_service(service);
  health_pb::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return status.error_code() == grpc::UNAVAILABLE ? "UNAVAILABLE" : "ERROR";
  return health_pb::HealthCheckResponse::ServingStatus_Name(response.status());
}

GrpcServer StartServer() {
  absl::StatusOr<GrpcServer> started = StartGrpcServer("127.0.0.1", 0, {}, {kService});
  EXPECT_TRUE(started.ok()) << started.status();
  return *std::move(started);
}

TEST(ServerLifecycleTest, DrainReportsNotServingBeforeStopAdmittingThenStops) {
  GrpcServer server = StartServer();
  ASSERT_EQ(Health(server.address, ""), "SERVING");
  ASSERT_EQ(Health(server.address, kService), "SERVING");
  std::string overall_when_stopping;
  std::string service_when_stopping;
  DrainGrpcServer(*server.server, absl::Seconds(5), [&] {
    // The server still answers here: only its health has changed.
    overall_when_stopping = Health(server.address, "");
    service_when_stopping = Health(server.address, kService);
  });
  EXPECT_EQ(overall_when_stopping, "NOT_SERVING");
  EXPECT_EQ(service_when_stopping, "NOT_SERVING");
  EXPECT_EQ(Health(server.address, ""), "UNAVAILABLE");
}

TEST(ServerLifecycleTest, WaitForShutdownSignalReturnsThePendingSignal) {
  BlockShutdownSignals();
  // raise() directs the signal at this thread, where it stays pending.
  ASSERT_EQ(raise(SIGINT), 0);
  EXPECT_EQ(WaitForShutdownSignal(), SIGINT);
}

TEST(ServerLifecycleTest, SigtermDrainsTheServer) {
  BlockShutdownSignals();  // inherited by the serving thread
  GrpcServer server = StartServer();
  bool stopped_admitting = false;
  int signal_number = 0;
  std::thread serving([&] {
    signal_number = ServeUntilShutdownSignal("server_lifecycle_test", *server.server,
                                             absl::Seconds(5),
                                             [&] { stopped_admitting = true; });
  });
  ASSERT_EQ(Health(server.address, ""), "SERVING");
  ASSERT_EQ(pthread_kill(serving.native_handle(), SIGTERM), 0);
  serving.join();
  EXPECT_EQ(signal_number, SIGTERM);
  EXPECT_TRUE(stopped_admitting);
  EXPECT_EQ(Health(server.address, ""), "UNAVAILABLE");
}

}  // namespace
}  // namespace tandem
