// Supervisor: the processes of `tandem up` (worker groups, the draft worker,
// the coordinator) and their restart policy. Each server is started, its
// "NAME listening on HOST:PORT" line read and its health checked; once it
// serves, its ports are pinned, so that a restart comes back on the same
// address (the coordinator reconnects to the addresses it was given). After
// start-up, Run() restarts whatever exits, with exponential backoff
// (RestartBackoff), each restart logged on stderr with the exit status and
// the attempt number; the coordinator crashing too often (CrashWindow) stops
// everything. A worker group under mpirun is one unit: when any rank dies,
// mpirun exits, and the rest of its process group is killed before the
// restart. Shutdown drains the coordinator first, then everything else.
//
// RestartBackoff and CrashWindow are pure (times passed in), for tests.
// Thread-compatible: one thread uses a Supervisor.
#ifndef TANDEM_CLIENT_SUPERVISOR_H_
#define TANDEM_CLIENT_SUPERVISOR_H_

#include <signal.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/process.h"

namespace tandem::client {

struct BackoffOptions {
  absl::Duration initial = absl::Milliseconds(500);  // the first restart's delay
  absl::Duration max = absl::Seconds(10);            // the delay doubles up to this
  absl::Duration reset_after = absl::Seconds(60);    // a run this long starts over
};

// The delay before each restart of one process: `initial` after its first
// exit, doubling with every further exit up to `max`; a process that ran for
// at least `reset_after` before exiting starts over at `initial`.
class RestartBackoff {
 public:
  explicit RestartBackoff(BackoffOptions options = {}) : options_(options) {}

  // The process that started at `started` exited at `exited`: returns the
  // delay before its restart and counts the attempt.
  absl::Duration NextDelay(absl::Time started, absl::Time exited);

  // Restarts since the last reset (1 after the first NextDelay).
  int32_t attempt() const { return attempt_; }

 private:
  BackoffOptions options_;
  int32_t attempt_ = 0;
};

// Crash-loop detection: true once `max_crashes` crashes fall within `window`.
class CrashWindow {
 public:
  CrashWindow(int32_t max_crashes, absl::Duration window)
      : max_crashes_(max_crashes), window_(window) {}

  // Records a crash at `at` (times in order); true when it makes
  // max_crashes within the last `window`.
  bool Record(absl::Time at);

  // The crashes within `window` of the last one recorded.
  int32_t recent() const { return static_cast<int32_t>(crashes_.size()); }

 private:
  int32_t max_crashes_;
  absl::Duration window_;
  std::deque<absl::Time> crashes_;
};

// Where a server listens; 0 = the OS picks, -1 = not at all (HTTP only).
struct ServerPorts {
  int32_t grpc = 0;
  int32_t http = -1;
};

struct ServerSpec {
  std::string label;        // for messages: "worker group 1", "draft worker", "coordinator"
  std::string server_name;  // the binary that prints "NAME listening on HOST:PORT"
  bool coordinator = false; // stopped first; its crash loop ends Run()
  // Its gRPC port speaks TLS (the coordinator's --tls-cert): the health probe
  // encrypts too, without checking the certificate (HealthTls::skip_verification).
  bool tls = false;
  ServerPorts ports;        // at the first start; pinned to the real ones once it serves
  // The command line listening on `ports` (http is -1 when it has no HTTP).
  std::function<std::vector<std::string>(const ServerPorts&)> argv;
};

struct SupervisorOptions {
  BackoffOptions backoff;
  int32_t max_coordinator_crashes = 3;  // within coordinator_crash_window: give up
  absl::Duration coordinator_crash_window = absl::Seconds(60);
  absl::Duration startup_timeout = absl::Seconds(120);  // "listening on" line
  absl::Duration health_timeout = absl::Seconds(10);
  absl::Duration grace = absl::Seconds(15);  // per shutdown stage
};

class Supervisor {
 public:
  explicit Supervisor(SupervisorOptions options) : options_(options) {}
  ~Supervisor();  // kills whatever is left
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Adds a server (not started yet); returns its index.
  size_t Add(ServerSpec spec);

  // Starts server `i` (logged as "starting ARGV").
  absl::Status Launch(size_t i);

  // Waits for server `i` (Launch-ed) to print its line(s) and answer health
  // SERVING; pins its ports and returns the address to dial (its HTTP
  // address into `http_address` when it has HTTP). Logs
  // "NAME (pid P) serving on ADDRESS".
  absl::StatusOr<std::string> AwaitServing(size_t i, std::string* http_address = nullptr);

  // After start-up: restarts what exits until SIGINT/SIGTERM (blocked in
  // `signals`, with SIGCHLD), then stops everything. Returns 0 after a
  // signal, 1 after a coordinator crash loop.
  int Run(const sigset_t& signals);

  // Stops every server: the coordinator(s) first, then the rest together.
  // Returns false when some process had to be killed.
  bool StopAll();

 private:
  struct Server {
    ServerSpec spec;
    std::unique_ptr<ChildProcess> process{};  // null while down
    absl::Time serving_since{};               // when it last came up
    absl::Time restart_at = absl::InfiniteFuture();  // while down
    RestartBackoff backoff;
  };

  // Polls every running server; false when the coordinator crash-looped.
  bool HandleExits();
  // The server exited (or failed to come back) with `how`: schedules it.
  bool ScheduleRestart(Server& server, const std::string& how);
  // Restarts the servers whose delay is over; false when the coordinator
  // crash-looped.
  bool RestartDue();
  absl::Duration UntilNextRestart() const;
  bool StopStage(bool coordinators);

  SupervisorOptions options_;
  std::vector<Server> servers_;
  CrashWindow coordinator_crashes_{options_.max_coordinator_crashes,
                                   options_.coordinator_crash_window};
};

// The address from "<name> listening on HOST:PORT".
absl::StatusOr<std::string> ParseListeningLine(const std::string& name, const std::string& line);

// The address a process on this machine connects to: the listener's, with a
// wildcard host replaced by loopback.
std::string DialAddress(const std::string& listen);

// The port of "HOST:PORT", or -1 when it has none.
int32_t PortOf(const std::string& address);

// True while SIGINT or SIGTERM is pending (blocked) for this thread.
bool ShutdownSignalPending();

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_SUPERVISOR_H_
