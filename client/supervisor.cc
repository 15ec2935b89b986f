#include "client/supervisor.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/health_check.h"
#include "common/status_macros.h"

namespace tandem::client {
namespace {

void Log(const std::string& message) {
  std::fprintf(stderr, "tandem up: %s\n", message.c_str());
}

// Reads one line of `child`'s stdout, naming `name` in a timeout.
absl::StatusOr<std::string> ReadServerLine(ChildProcess& child, const std::string& name,
                                           absl::Duration timeout) {
  absl::StatusOr<std::string> line = child.ReadLine(absl::Now() + timeout, ShutdownSignalPending);
  if (absl::IsDeadlineExceeded(line.status())) {
    return absl::DeadlineExceededError(absl::StrFormat("%s did not come up within %s: %s", name,
                                                       absl::FormatDuration(timeout),
                                                       line.status().message()));
  }
  return line;
}

}  // namespace

absl::Duration RestartBackoff::NextDelay(absl::Time started, absl::Time exited) {
  if (exited - started >= options_.reset_after) attempt_ = 0;
  ++attempt_;
  absl::Duration delay = options_.initial;
  for (int32_t i = 1; i < attempt_ && delay < options_.max; ++i) delay *= 2;
  return std::min(delay, options_.max);
}

bool CrashWindow::Record(absl::Time at) {
  crashes_.push_back(at);
  while (!crashes_.empty() && at - crashes_.front() > window_) crashes_.pop_front();
  return recent() >= max_crashes_;
}

absl::StatusOr<std::string> ParseListeningLine(const std::string& name, const std::string& line) {
  const std::string prefix = name + " listening on ";
  if (!absl::StartsWith(line, prefix) || line.size() == prefix.size()) {
    return absl::InternalError(absl::StrFormat(
        "%s printed '%s' where '%sHOST:PORT' was expected", name, line, prefix));
  }
  return line.substr(prefix.size());
}

std::string DialAddress(const std::string& listen) {
  for (const char* any : {"0.0.0.0:", "[::]:"}) {
    if (absl::StartsWith(listen, any)) return "127.0.0.1:" + listen.substr(std::strlen(any));
  }
  return listen;
}

int32_t PortOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  int32_t port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) return -1;
  return port;
}

bool ShutdownSignalPending() {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1;
}

Supervisor::~Supervisor() {
  for (Server& s : servers_) s.process.reset();  // ChildProcess kills its group
}

size_t Supervisor::Add(ServerSpec spec) {
  servers_.push_back(Server{.spec = std::move(spec), .backoff = RestartBackoff(options_.backoff)});
  return servers_.size() - 1;
}

absl::Status Supervisor::Launch(size_t i) {
  Server& s = servers_[i];
  const std::vector<std::string> argv = s.spec.argv(s.spec.ports);
  Log("starting " + absl::StrJoin(argv, " "));
  ASSIGN_OR_RETURN(s.process, ChildProcess::Start(argv));
  s.restart_at = absl::InfiniteFuture();
  return absl::OkStatus();
}

absl::StatusOr<std::string> Supervisor::AwaitServing(size_t i, std::string* http_address) {
  Server& s = servers_[i];
  ChildProcess& child = *s.process;
  const std::string& name = s.spec.server_name;
  ASSIGN_OR_RETURN(std::string line, ReadServerLine(child, name, options_.startup_timeout));
  std::string http;
  if (s.spec.ports.http >= 0) {
    ASSIGN_OR_RETURN(std::string http_line,
                     ReadServerLine(child, name, options_.startup_timeout));
    ASSIGN_OR_RETURN(std::string http_listen, ParseListeningLine(name + " HTTP", http_line));
    http = DialAddress(http_listen);
  }
  child.StartForwardingOutput();
  ASSIGN_OR_RETURN(std::string listen, ParseListeningLine(name, line));
  const std::string address = DialAddress(listen);
  ASSIGN_OR_RETURN(std::string health,
                   CheckHealth(address, "", absl::Now() + options_.health_timeout,
                               HealthTls{.enabled = s.spec.tls, .ca_file = "",
                                         .skip_verification = true}));
  if (health != "SERVING") {
    return absl::UnavailableError(
        absl::StrFormat("%s at %s reports health %s, expected SERVING", name, address, health));
  }
  Log(absl::StrFormat("%s (pid %d) serving on %s", name, child.pid(), address));
  // Pinned: a restart listens where the others were told to connect.
  s.spec.ports.grpc = PortOf(address);
  if (!http.empty()) s.spec.ports.http = PortOf(http);
  if (http_address != nullptr) *http_address = http;
  s.serving_since = absl::Now();
  return address;
}

bool Supervisor::ScheduleRestart(Server& s, const std::string& how) {
  const absl::Time now = absl::Now();
  s.process.reset();  // kills what is left of its process group (mpirun's ranks)
  const absl::Duration delay = s.backoff.NextDelay(s.serving_since, now);
  s.serving_since = now;  // a failed restart counts as a short run
  if (s.spec.coordinator && coordinator_crashes_.Record(now)) {
    Log(absl::StrFormat("%s %s; it crashed %d times within %s: giving up, stopping the rest",
                        s.spec.label, how, coordinator_crashes_.recent(),
                        absl::FormatDuration(options_.coordinator_crash_window)));
    return false;
  }
  Log(absl::StrFormat("%s %s: restarting it in %s (attempt %d)", s.spec.label, how,
                      absl::FormatDuration(delay), s.backoff.attempt()));
  s.restart_at = now + delay;
  return true;
}

bool Supervisor::HandleExits() {
  for (Server& s : servers_) {
    if (s.process == nullptr) continue;
    if (std::optional<int> status = s.process->Poll(); status.has_value()) {
      const std::string how = absl::StrFormat("(%s, pid %d) exited with %s", s.process->name(),
                                              s.process->pid(), DescribeWaitStatus(*status));
      if (!ScheduleRestart(s, how)) return false;
    }
  }
  return true;
}

bool Supervisor::RestartDue() {
  for (size_t i = 0; i < servers_.size(); ++i) {
    Server& s = servers_[i];
    if (s.process != nullptr || absl::Now() < s.restart_at || ShutdownSignalPending()) continue;
    Log(absl::StrFormat("restarting %s on port %d", s.spec.label, s.spec.ports.grpc));
    absl::Status started = Launch(i);
    if (started.ok()) started = AwaitServing(i).status();
    if (started.ok() || absl::IsCancelled(started)) continue;  // cancelled: a signal came
    // Exited at once (the port still taken?), hung or unhealthy: again later.
    if (!ScheduleRestart(s, "did not come back: " + std::string(started.message()))) {
      return false;
    }
  }
  return true;
}

absl::Duration Supervisor::UntilNextRestart() const {
  absl::Time next = absl::InfiniteFuture();
  for (const Server& s : servers_) {
    if (s.process == nullptr) next = std::min(next, s.restart_at);
  }
  return std::max(next - absl::Now(), absl::ZeroDuration());
}

int Supervisor::Run(const sigset_t& signals) {
  while (true) {
    // A timeout as well as SIGCHLD: an exit is noticed even if its SIGCHLD
    // merged with an earlier one, and a due restart is not late.
    const absl::Duration wait = std::min(UntilNextRestart(), absl::Seconds(1));
    struct timespec timeout = absl::ToTimespec(std::max(wait, absl::Milliseconds(10)));
    const int sig = sigtimedwait(&signals, nullptr, &timeout);
    if (sig == SIGINT || sig == SIGTERM || ShutdownSignalPending()) {
      Log(absl::StrFormat("%s received: stopping the coordinator, then the workers",
                          sig > 0 && sig != SIGCHLD ? strsignal(sig) : "a stop signal"));
      StopAll();
      Log("stopped");
      return 0;
    }
    if (!HandleExits() || !RestartDue()) {
      StopAll();
      return 1;
    }
  }
}

// One stage of the shutdown: SIGTERM to every process of the stage at once
// (they drain in parallel), up to `grace` for all of them, then SIGKILL to
// each one's process group, which also takes any orphan (an MPI rank).
bool Supervisor::StopStage(bool coordinators) {
  std::vector<std::pair<Server*, bool>> stage;  // and whether it was running
  for (Server& s : servers_) {
    if (s.process == nullptr || s.spec.coordinator != coordinators) continue;
    const bool running = !s.process->Poll().has_value();
    if (running) s.process->Signal(SIGTERM);
    stage.emplace_back(&s, running);
  }
  const absl::Time deadline = absl::Now() + options_.grace;
  bool clean = true;
  for (auto [s, was_running] : stage) {
    ChildProcess& p = *s->process;
    const bool exited = p.WaitFor(std::max(deadline - absl::Now(), absl::ZeroDuration()))
                            .has_value();
    p.Stop(absl::ZeroDuration());  // the group: what is left of it dies now
    if (!exited) {
      clean = false;
      Log(absl::StrFormat("%s (pid %d) did not exit within %s of SIGTERM: killed", p.name(),
                          p.pid(), absl::FormatDuration(options_.grace)));
    } else if (was_running) {
      Log(absl::StrFormat("%s (pid %d) stopped: %s", p.name(), p.pid(),
                          DescribeWaitStatus(*p.wait_status())));
    }
    s->process.reset();
  }
  return clean;
}

bool Supervisor::StopAll() {
  const bool coordinators_clean = StopStage(true);
  const bool others_clean = StopStage(false);
  return coordinators_clean && others_clean;
}

}  // namespace tandem::client
