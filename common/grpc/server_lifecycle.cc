#include "common/grpc/server_lifecycle.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "grpcpp/health_check_service_interface.h"

namespace tandem {
namespace {

sigset_t ShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}

}  // namespace

void BlockShutdownSignals() {
  const sigset_t signals = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

int64_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? INT64_MAX : static_cast<int64_t>(limit.rlim_cur);
}

int WaitForShutdownSignal() {
  const sigset_t signals = ShutdownSignals();
  int signal_number = 0;
  // POSIX: sigwait is not interrupted (no EINTR) and fails only for an
  // invalid set, which this one is not.
  sigwait(&signals, &signal_number);
  return signal_number;
}

void AnnounceListening(std::string_view process, std::string_view address) {
  std::printf("%.*s listening on %.*s\n", static_cast<int>(process.size()), process.data(),
              static_cast<int>(address.size()), address.data());
  std::fflush(stdout);
}

void DrainGrpcServer(grpc::Server& server, absl::Duration grace,
                     const std::function<void()>& stop_admitting) {
  // The overall "" entry and every named service at once.
  server.GetHealthCheckService()->SetServingStatus(false);
  if (stop_admitting) stop_admitting();
  server.Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server.Wait();
}

int ServeUntilShutdownSignal(std::string_view process, grpc::Server& server,
                             absl::Duration grace, const std::function<void()>& stop_admitting) {
  const int signal_number = WaitForShutdownSignal();
  std::fprintf(stderr, "%.*s: %s received, draining\n", static_cast<int>(process.size()),
               process.data(), strsignal(signal_number));
  DrainGrpcServer(server, grace, stop_admitting);
  return signal_number;
}

}  // namespace tandem
