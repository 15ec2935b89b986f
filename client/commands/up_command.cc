#include "client/commands/up_command.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/commands/health_command.h"
#include "client/process.h"
#include "common/status_macros.h"

namespace tandem::client {
namespace {

constexpr absl::Duration kStartupTimeout = absl::Seconds(120);
constexpr absl::Duration kHealthTimeout = absl::Seconds(10);
constexpr int32_t kMaxTp = 1024;

// Stderr message prefix.
void Log(const std::string& message) {
  std::fprintf(stderr, "tandem up: %s\n", message.c_str());
}

int Fail(const absl::Status& status) {
  Log(status.ToString());
  return 1;
}

absl::Status Validate(const UpOptions& o) {
  if (o.model.empty()) return absl::InvalidArgumentError("--model PATH is required");
  if (o.tp < 1 || o.tp > kMaxTp) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--tp %d is out of range: must be in [1, %d]", o.tp, kMaxTp));
  }
  if (o.port < 0 || o.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--port %d is out of range: must be in [0, 65535]", o.port));
  }
  if (o.http_port < -1 || o.http_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--http-port %d is out of range: must be in [-1, 65535]", o.http_port));
  }
  if (o.grace_s < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--grace-s %d is out of range: must be >= 1", o.grace_s));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SelfDirectory() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return absl::InternalError("cannot read /proc/self/exe to find --bin-dir");
  const std::string exe(path, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/'));
}

// The address from "<name> listening on HOST:PORT".
absl::StatusOr<std::string> ParseListeningLine(const std::string& name, const std::string& line) {
  const std::string prefix = name + " listening on ";
  if (!absl::StartsWith(line, prefix) || line.size() == prefix.size()) {
    return absl::InternalError(absl::StrFormat(
        "%s printed '%s' where '%sHOST:PORT' was expected", name, line, prefix));
  }
  return line.substr(prefix.size());
}

// The address a process on this machine connects to: the listener's, with a
// wildcard host replaced by loopback.
std::string DialAddress(const std::string& listen) {
  for (const char* any : {"0.0.0.0:", "[::]:"}) {
    if (absl::StartsWith(listen, any)) return "127.0.0.1:" + listen.substr(std::strlen(any));
  }
  return listen;
}

bool ShutdownSignalPending() {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1;
}

// Starts `argv` (stdout piped, see ChildProcess).
absl::StatusOr<std::unique_ptr<ChildProcess>> Launch(const std::vector<std::string>& argv) {
  Log("starting " + absl::StrJoin(argv, " "));
  return ChildProcess::Start(argv);
}

// Waits for `child`'s "`name` listening on HOST:PORT" line (and, with
// `http_address`, the "`name` HTTP listening on HOST:PORT" line after it,
// whose address goes there), then for health SERVING at the first address;
// returns the address to dial. `name` is the server binary's (under mpirun
// the child itself is mpirun).
absl::StatusOr<std::string> AwaitServing(ChildProcess& child, const std::string& name,
                                         std::string* http_address = nullptr) {
  absl::StatusOr<std::string> line = child.ReadLine(absl::Now() + kStartupTimeout,
                                                    ShutdownSignalPending);
  if (!line.ok()) {
    if (absl::IsDeadlineExceeded(line.status())) {
      return absl::DeadlineExceededError(
          absl::StrFormat("%s did not come up within %s: %s", name,
                          absl::FormatDuration(kStartupTimeout), line.status().message()));
    }
    return line.status();
  }
  if (http_address != nullptr) {
    absl::StatusOr<std::string> http_line = child.ReadLine(absl::Now() + kStartupTimeout,
                                                           ShutdownSignalPending);
    if (!http_line.ok()) return http_line.status();
    ASSIGN_OR_RETURN(std::string http_listen, ParseListeningLine(name + " HTTP", *http_line));
    *http_address = DialAddress(http_listen);
  }
  child.StartForwardingOutput();
  absl::StatusOr<std::string> listen = ParseListeningLine(name, *line);
  if (!listen.ok()) return listen.status();
  const std::string address = DialAddress(*listen);
  absl::StatusOr<std::string> health = CheckHealth(address, "", absl::Now() + kHealthTimeout);
  if (!health.ok()) return health.status();
  if (*health != "SERVING") {
    return absl::UnavailableError(
        absl::StrFormat("%s at %s reports health %s, expected SERVING", name, address, *health));
  }
  Log(absl::StrFormat("%s (pid %d) serving on %s", name, child.pid(), address));
  return address;
}

// The processes of the cluster; null until started and after stopped.
struct Cluster {
  std::unique_ptr<ChildProcess> coordinator;
  std::unique_ptr<ChildProcess> workers;  // tandem-worker, or mpirun and its ranks
  std::unique_ptr<ChildProcess> draft;
};

// One stage of the shutdown: SIGTERM to every process of the stage at once
// (they drain in parallel), up to `grace` for all of them, then SIGKILL to
// each one's process group, which also takes any orphan (an MPI rank).
// Returns false when some process had to be killed.
bool StopStage(std::initializer_list<std::unique_ptr<ChildProcess>*> stage,
               absl::Duration grace) {
  std::vector<std::unique_ptr<ChildProcess>*> running;
  for (std::unique_ptr<ChildProcess>* p : stage) {
    if (*p == nullptr) continue;
    if (!(*p)->Poll().has_value()) {
      (*p)->Signal(SIGTERM);
      running.push_back(p);
    }
  }
  const absl::Time deadline = absl::Now() + grace;
  bool clean = true;
  for (std::unique_ptr<ChildProcess>* p : stage) {
    if (*p == nullptr) continue;
    const bool was_running = std::find(running.begin(), running.end(), p) != running.end();
    const bool exited = (*p)->WaitFor(std::max(deadline - absl::Now(), absl::ZeroDuration()))
                            .has_value();
    (*p)->Stop(absl::ZeroDuration());  // the group: what is left of it dies now
    if (!exited) {
      clean = false;
      Log(absl::StrFormat("%s (pid %d) did not exit within %s of SIGTERM: killed", (*p)->name(),
                          (*p)->pid(), absl::FormatDuration(grace)));
    } else if (was_running) {
      Log(absl::StrFormat("%s (pid %d) stopped: %s", (*p)->name(), (*p)->pid(),
                          DescribeWaitStatus(*(*p)->wait_status())));
    }
    p->reset();
  }
  return clean;
}

// The coordinator first (it stops admitting, finishes in-flight requests and
// stops calling the workers), then the worker group and the draft worker.
bool StopAll(Cluster& cluster, absl::Duration grace) {
  const bool coordinator_clean = StopStage({&cluster.coordinator}, grace);
  const bool workers_clean = StopStage({&cluster.workers, &cluster.draft}, grace);
  return coordinator_clean && workers_clean;
}

// The server binaries `tandem up` starts (draft: "" when none is).
struct Binaries {
  std::string worker;
  std::string coordinator;
  std::string draft;
};

// Finds the binaries in --bin-dir (default: this executable's directory);
// NOT_FOUND naming the missing one.
absl::StatusOr<Binaries> FindBinaries(const UpOptions& o) {
  std::string bin_dir = o.bin_dir;
  if (bin_dir.empty()) {
    absl::StatusOr<std::string> self = SelfDirectory();
    if (!self.ok()) return self.status();
    bin_dir = *self;
  }
  Binaries bins;
  ASSIGN_OR_RETURN(bins.worker, FindExecutable(bin_dir + "/tandem-worker"));
  ASSIGN_OR_RETURN(bins.coordinator, FindExecutable(bin_dir + "/tandem-coordinator"));
  if (o.draft) {
    absl::StatusOr<std::string> found = FindExecutable(bin_dir + "/tandem-draft");
    if (!found.ok()) {
      return absl::NotFoundError(absl::StrFormat(
          "the draft worker (--no-draft starts none): %s", found.status().message()));
    }
    bins.draft = *found;
  }
  return bins;
}

// The worker group's command line: tandem-worker alone, or under mpirun
// when --tp > 1 (NOT_FOUND when --mpirun cannot be found).
absl::StatusOr<std::vector<std::string>> WorkerArgv(const UpOptions& o,
                                                    const std::string& worker_bin) {
  std::vector<std::string> argv;
  if (o.tp > 1) {
    absl::StatusOr<std::string> mpirun = FindExecutable(o.mpirun);
    if (!mpirun.ok()) {
      return absl::NotFoundError(absl::StrFormat(
          "--tp %d needs MPI, but --mpirun %s: %s", o.tp, o.mpirun, mpirun.status().message()));
    }
    // mpirun forwards SIGTERM to every rank, so signalling its process group
    // drains the whole worker group.
    argv = {*mpirun, "--allow-run-as-root", "--oversubscribe", "-np",
            absl::StrFormat("%d", o.tp)};
  }
  argv.insert(argv.end(), {worker_bin, "--model", o.model, "--port", "0"});
  argv.insert(argv.end(), o.worker_args.begin(), o.worker_args.end());
  return argv;
}

// Starts the worker group and the draft worker (unless --no-draft) side by
// side: they load their models at the same time.
absl::Status StartWorkers(const UpOptions& o, const Binaries& bins,
                          const std::vector<std::string>& worker_argv, Cluster& cluster) {
  ASSIGN_OR_RETURN(cluster.workers, Launch(worker_argv));
  if (!o.draft) return absl::OkStatus();
  std::vector<std::string> draft_argv = {
      bins.draft, "--model", o.draft_model.empty() ? o.model : o.draft_model,
      "--host", "127.0.0.1", "--port", "0", "--speculative", o.speculative};
  draft_argv.insert(draft_argv.end(), o.draft_args.begin(), o.draft_args.end());
  ASSIGN_OR_RETURN(cluster.draft, Launch(draft_argv));
  return absl::OkStatus();
}

// The coordinator's command line, once the worker group (and the draft
// worker) serve: it needs their addresses.
absl::StatusOr<std::vector<std::string>> CoordinatorArgv(const UpOptions& o,
                                                         const Binaries& bins, Cluster& cluster) {
  std::vector<std::string> argv = {bins.coordinator, "--model", o.model};
  ASSIGN_OR_RETURN(std::string worker, AwaitServing(*cluster.workers, "tandem-worker"));
  argv.insert(argv.end(), {"--worker", worker});
  if (cluster.draft != nullptr) {
    ASSIGN_OR_RETURN(std::string draft, AwaitServing(*cluster.draft, "tandem-draft"));
    argv.insert(argv.end(), {"--draft", draft});
  }
  argv.insert(argv.end(), {"--port", absl::StrFormat("%d", o.port), "--http-port",
                           absl::StrFormat("%d", o.http_port), "--num-speculative-tokens",
                           o.num_speculative_tokens});
  argv.insert(argv.end(), o.coordinator_args.begin(), o.coordinator_args.end());
  return argv;
}

// Starts every process in order (worker group and draft, then the
// coordinator connected to both) into `cluster`; returns the coordinator's
// gRPC address once it serves (its HTTP address into `http_address`, empty
// without HTTP). On an error, what did start is left in `cluster`.
absl::StatusOr<std::string> StartCluster(const UpOptions& o, Cluster& cluster,
                                         std::string* http_address) {
  ASSIGN_OR_RETURN(Binaries bins, FindBinaries(o));
  ASSIGN_OR_RETURN(std::vector<std::string> worker_argv, WorkerArgv(o, bins.worker));
  RETURN_IF_ERROR(StartWorkers(o, bins, worker_argv, cluster));
  ASSIGN_OR_RETURN(std::vector<std::string> coordinator_argv, CoordinatorArgv(o, bins, cluster));
  ASSIGN_OR_RETURN(cluster.coordinator, Launch(coordinator_argv));
  return AwaitServing(*cluster.coordinator, "tandem-coordinator",
                      o.http_port >= 0 ? http_address : nullptr);
}

// Waits for SIGINT/SIGTERM (blocked in `signals`) or for a process to exit
// on its own, then stops the cluster. Returns the exit code: 0 after a
// signal, 1 after an unexpected exit.
int Supervise(Cluster& cluster, const sigset_t& signals, absl::Duration grace) {
  while (true) {
    // A timeout as well as SIGCHLD: a child's exit is noticed even if its
    // SIGCHLD merged with an earlier one.
    struct timespec one_second = {1, 0};
    const int sig = sigtimedwait(&signals, nullptr, &one_second);
    if (sig == SIGINT || sig == SIGTERM) {
      Log(absl::StrFormat("%s received: stopping the coordinator, then the workers%s",
                          strsignal(sig), cluster.draft != nullptr ? " and the draft" : ""));
      StopAll(cluster, grace);
      Log("stopped");
      return 0;
    }
    for (ChildProcess* p : {cluster.coordinator.get(), cluster.workers.get(), cluster.draft.get()}) {
      if (p == nullptr) continue;
      if (std::optional<int> status = p->Poll(); status.has_value()) {
        Log(absl::StrFormat("%s (pid %d) exited unexpectedly with %s: stopping the rest",
                            p->name(), p->pid(), DescribeWaitStatus(*status)));
        StopAll(cluster, grace);
        return 1;
      }
    }
  }
}

}  // namespace

int UpCommand(const UpOptions& o) {
  if (absl::Status s = Validate(o); !s.ok()) {
    Log(s.ToString());
    return 2;
  }
  // Before any child or thread exists: SIGINT/SIGTERM/SIGCHLD are taken only
  // by sigtimedwait() in Supervise (children reset their mask in ChildProcess).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const absl::Duration grace = absl::Seconds(o.grace_s);
  Cluster cluster;
  std::string http_address;
  absl::StatusOr<std::string> address = StartCluster(o, cluster, &http_address);
  if (!address.ok()) {
    StopAll(cluster, grace);
    return Fail(address.status());
  }
  std::printf("tandem up: serving on %s\n", address->c_str());
  if (!http_address.empty()) {
    std::printf("tandem up: OpenAI-compatible HTTP on http://%s/v1\n", http_address.c_str());
  }
  std::fflush(stdout);
  return Supervise(cluster, signals, grace);
}

}  // namespace tandem::client
