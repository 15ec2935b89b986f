#include "client/commands/up_command.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cluster_key_file.h"
#include "client/process.h"
#include "client/supervisor.h"
#include "common/status_macros.h"

namespace tandem::client {
namespace {

constexpr absl::Duration kStartupTimeout = absl::Seconds(120);
constexpr absl::Duration kHealthTimeout = absl::Seconds(10);
constexpr int32_t kMaxTp = 1024;
constexpr int32_t kMaxReplicas = 64;

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
  if (o.replicas < 1 || o.replicas > kMaxReplicas) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--replicas %d is out of range: must be in [1, %d]", o.replicas, kMaxReplicas));
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
  // Before any process starts (the coordinator reads and checks the files).
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError(o.tls_key.empty()
        ? absl::StrFormat("--tls-cert '%s' needs --tls-key FILE: give both or neither", o.tls_cert)
        : absl::StrFormat("--tls-key '%s' needs --tls-cert FILE: give both or neither", o.tls_key));
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

// The worker group's command line up to its --port: tandem-worker alone, or
// under mpirun when --tp > 1 (NOT_FOUND when --mpirun cannot be found).
absl::StatusOr<std::vector<std::string>> WorkerPrefix(const UpOptions& o,
                                                      const std::string& worker_bin) {
  std::vector<std::string> argv;
  if (o.tp > 1) {
    absl::StatusOr<std::string> mpirun = FindExecutable(o.mpirun);
    if (!mpirun.ok()) {
      return absl::NotFoundError(absl::StrFormat(
          "--tp %d needs MPI, but --mpirun %s: %s", o.tp, o.mpirun, mpirun.status().message()));
    }
    // mpirun forwards SIGTERM to every rank, so signalling its process group
    // drains the whole worker group; it exits when any rank dies.
    argv = {*mpirun, "--allow-run-as-root", "--oversubscribe", "-np",
            absl::StrFormat("%d", o.tp)};
  }
  argv.insert(argv.end(), {worker_bin, "--model", o.model});
  return argv;
}

ServerSpec WorkerSpec(const UpOptions& o, const std::vector<std::string>& prefix, int32_t r,
                      const std::string& key_file) {
  ServerSpec spec;
  spec.label = o.replicas > 1 ? absl::StrFormat("worker group %d", r) : "worker group";
  spec.server_name = "tandem-worker";
  spec.argv = [prefix, extra = o.worker_args, key_file](const ServerPorts& ports) {
    std::vector<std::string> argv = prefix;
    argv.insert(argv.end(),
                {"--port", absl::StrFormat("%d", ports.grpc), "--api-key-file", key_file});
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  };
  return spec;
}

ServerSpec DraftSpec(const UpOptions& o, const std::string& draft_bin,
                     const std::string& key_file) {
  ServerSpec spec;
  spec.label = "draft worker";
  spec.server_name = "tandem-draft";
  spec.argv = [o, draft_bin, key_file](const ServerPorts& ports) {
    std::vector<std::string> argv = {
        draft_bin, "--model", o.draft_model.empty() ? o.model : o.draft_model, "--host",
        "127.0.0.1", "--port", absl::StrFormat("%d", ports.grpc), "--speculative",
        o.speculative, "--api-key-file", key_file};
    argv.insert(argv.end(), o.draft_args.begin(), o.draft_args.end());
    return argv;
  };
  return spec;
}

// The coordinator, connected to every worker group and the draft worker
// ("" = none) with the cluster key in `key_file`.
ServerSpec CoordinatorSpec(const UpOptions& o, const std::string& coordinator_bin,
                           const std::vector<std::string>& workers, const std::string& draft,
                           const std::string& key_file) {
  ServerSpec spec;
  spec.label = "coordinator";
  spec.server_name = "tandem-coordinator";
  spec.coordinator = true;
  spec.tls = !o.tls_cert.empty();
  spec.ports = {.grpc = o.port, .http = o.http_port};
  spec.argv = [o, coordinator_bin, workers, draft, key_file](const ServerPorts& ports) {
    std::vector<std::string> argv = {coordinator_bin, "--model", o.model, "--worker",
                                     absl::StrJoin(workers, ","), "--cluster-key-file",
                                     key_file};
    if (!draft.empty()) argv.insert(argv.end(), {"--draft", draft});
    argv.insert(argv.end(), {"--port", absl::StrFormat("%d", ports.grpc), "--http-port",
                             absl::StrFormat("%d", ports.http), "--num-speculative-tokens",
                             o.num_speculative_tokens});
    if (!o.tls_cert.empty()) {
      argv.insert(argv.end(), {"--tls-cert", o.tls_cert, "--tls-key", o.tls_key});
    }
    argv.insert(argv.end(), o.coordinator_args.begin(), o.coordinator_args.end());
    return argv;
  };
  return spec;
}

// Starts every worker group and the draft worker (unless --no-draft) side by
// side (they load their models at the same time), then waits for each to
// serve; their addresses into `workers` and `draft`.
absl::Status StartWorkers(const UpOptions& o, const Binaries& bins, const std::string& key_file,
                          Supervisor& supervisor, std::vector<std::string>* workers,
                          std::string* draft) {
  ASSIGN_OR_RETURN(std::vector<std::string> prefix, WorkerPrefix(o, bins.worker));
  std::vector<size_t> groups;
  for (int32_t r = 0; r < o.replicas; ++r) {
    groups.push_back(supervisor.Add(WorkerSpec(o, prefix, r, key_file)));
    RETURN_IF_ERROR(supervisor.Launch(groups.back()));
  }
  std::optional<size_t> draft_index;
  if (o.draft) {
    draft_index = supervisor.Add(DraftSpec(o, bins.draft, key_file));
    RETURN_IF_ERROR(supervisor.Launch(*draft_index));
  }
  for (size_t g : groups) {
    ASSIGN_OR_RETURN(std::string address, supervisor.AwaitServing(g));
    workers->push_back(address);
  }
  if (draft_index.has_value()) {
    ASSIGN_OR_RETURN(*draft, supervisor.AwaitServing(*draft_index));
  }
  return absl::OkStatus();
}

// Starts every process in order (worker groups and draft, then the
// coordinator connected to them; every internal call carries the cluster key
// in `key_file`) under `supervisor`; returns the
// coordinator's gRPC address once it serves (its HTTP address into
// `http_address`, empty without HTTP). On an error, what did start is left
// in `supervisor`.
absl::StatusOr<std::string> StartCluster(const UpOptions& o, const std::string& key_file,
                                         Supervisor& supervisor, std::string* http_address) {
  ASSIGN_OR_RETURN(Binaries bins, FindBinaries(o));
  std::vector<std::string> workers;
  std::string draft;
  RETURN_IF_ERROR(StartWorkers(o, bins, key_file, supervisor, &workers, &draft));
  const size_t c =
      supervisor.Add(CoordinatorSpec(o, bins.coordinator, workers, draft, key_file));
  RETURN_IF_ERROR(supervisor.Launch(c));
  return supervisor.AwaitServing(c, http_address);
}

}  // namespace

int UpCommand(const UpOptions& o) {
  if (absl::Status s = Validate(o); !s.ok()) {
    Log(s.ToString());
    return 2;
  }
  // Before any child or thread exists: SIGINT/SIGTERM/SIGCHLD are taken only
  // by sigtimedwait() in Supervisor::Run (children reset their mask in ChildProcess).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  SupervisorOptions supervision;
  supervision.grace = absl::Seconds(o.grace_s);
  supervision.startup_timeout = kStartupTimeout;
  supervision.health_timeout = kHealthTimeout;
  // Closed by default: only holders of this file reach the internal ports.
  absl::StatusOr<std::unique_ptr<ClusterKeyFile>> key = ClusterKeyFile::Create();
  if (!key.ok()) return Fail(key.status());
  Supervisor supervisor(supervision);
  std::string http_address;
  absl::StatusOr<std::string> address =
      StartCluster(o, (*key)->path(), supervisor, &http_address);
  if (!address.ok()) {
    supervisor.StopAll();
    return Fail(address.status());
  }
  std::printf("tandem up: serving on %s\n", address->c_str());
  if (!http_address.empty()) {
    std::printf("tandem up: OpenAI-compatible HTTP on %s://%s/v1\n",
                o.tls_cert.empty() ? "http" : "https", http_address.c_str());
  }
  std::fflush(stdout);
  return supervisor.Run(signals);
}

}  // namespace tandem::client
