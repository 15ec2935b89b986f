#include "client/process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace tandem::client {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(100);

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

int PollTimeoutMs(absl::Duration d) {
  return static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(d)));
}

}  // namespace

absl::StatusOr<std::string> FindExecutable(const std::string& program) {
  if (program.empty()) return absl::InvalidArgumentError("the program name is empty");
  if (program.find('/') != std::string::npos) {
    if (IsExecutableFile(program)) return program;
    return absl::NotFoundError(
        absl::StrFormat("'%s' does not exist or is not an executable file", program));
  }
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "";
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrFormat("%s/%s", dir, program);
    if (IsExecutableFile(candidate)) return candidate;
  }
  return absl::NotFoundError(
      absl::StrFormat("'%s' is not found in PATH=%s", program, path));
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrFormat("exit code %d", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    return absl::StrFormat("signal %d (%s)", sig, strsignal(sig));
  }
  return absl::StrFormat("wait status %d", wait_status);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("ChildProcess::Start: argv is empty");
  // Everything the child needs is built before fork(): between fork and exec
  // only async-signal-safe calls are allowed (other threads may hold locks).
  std::vector<char*> c_argv;
  c_argv.reserve(argv.size() + 1);
  for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrFormat("pipe: %s", std::strerror(errno)));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return absl::InternalError(absl::StrFormat("fork for %s: %s", argv[0], std::strerror(err)));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], STDOUT_FILENO);  // dup2 clears FD_CLOEXEC on the copy
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGCHLD, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    ::execv(c_argv[0], c_argv.data());
    _exit(127);
  }
  // Also from the parent, so that a signal sent right after Start() already
  // reaches the new group (whichever of the two setpgid calls runs first).
  ::setpgid(pid, pid);
  ::close(fds[1]);
  const std::string& path = argv[0];
  const size_t slash = path.rfind('/');
  return std::unique_ptr<ChildProcess>(
      new ChildProcess(pid, fds[0], slash == std::string::npos ? path : path.substr(slash + 1)));
}

ChildProcess::~ChildProcess() {
  if (!wait_status_.has_value()) {
    KillGroup();
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    wait_status_ = status;
  }
  KillGroup();  // orphans of the child, if any
  stop_forwarding_ = true;
  if (forwarder_.joinable()) forwarder_.join();
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

absl::StatusOr<std::string> ChildProcess::ReadLine(absl::Time deadline,
                                                   const std::function<bool()>& should_stop) {
  if (forwarder_.joinable()) {
    return absl::FailedPreconditionError("ReadLine after StartForwardingOutput");
  }
  while (true) {
    const size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    if (should_stop && should_stop()) {
      return absl::CancelledError(absl::StrFormat("stopped while waiting for %s", name_));
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "%s (pid %d) printed no complete line by the deadline; got so far: '%s'", name_, pid_,
          buffer_));
    }
    struct pollfd p = {stdout_fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, PollTimeoutMs(std::min(kPollInterval, deadline - now)));
    if (ready < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrFormat("poll on %s's stdout: %s", name_,
                                                 std::strerror(errno)));
    }
    if (ready <= 0) continue;
    char chunk[4096];
    const ssize_t n = ::read(stdout_fd_, chunk, sizeof(chunk));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      // EOF: the child closed stdout, almost always by exiting.
      const std::optional<int> status = WaitFor(absl::Seconds(5));
      return absl::UnavailableError(absl::StrFormat(
          "%s (pid %d) %s before printing a line%s", name_, pid_,
          status.has_value() ? "exited with " + DescribeWaitStatus(*status) : "closed stdout",
          buffer_.empty() ? "" : absl::StrFormat(" (partial output '%s')", buffer_)));
    }
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

void ChildProcess::StartForwardingOutput() {
  if (forwarder_.joinable()) return;
  const int fd = stdout_fd_;
  std::string pending = std::move(buffer_);
  buffer_.clear();
  forwarder_ = std::thread([this, fd, pending = std::move(pending)] {
    if (!pending.empty()) (void)!::write(STDERR_FILENO, pending.data(), pending.size());
    char chunk[4096];
    // Polls with a timeout so that the destructor can stop it even when an
    // orphan outside the group still holds the pipe open.
    while (!stop_forwarding_) {
      struct pollfd p = {fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, PollTimeoutMs(kPollInterval));
      if (ready <= 0) continue;
      const ssize_t n = ::read(fd, chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      (void)!::write(STDERR_FILENO, chunk, static_cast<size_t>(n));
    }
  });
}

void ChildProcess::Signal(int signal_number) {
  // The group outlives the child while orphans remain, so signal it even
  // after the child itself was reaped (ESRCH when it is empty).
  ::kill(-pid_, signal_number);
}

void ChildProcess::KillGroup() { ::kill(-pid_, SIGKILL); }

std::optional<int> ChildProcess::Poll() {
  if (wait_status_.has_value()) return wait_status_;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) wait_status_ = status;
  return wait_status_;
}

std::optional<int> ChildProcess::WaitFor(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  // waitpid has no timeout; a short poll keeps this independent of SIGCHLD
  // handling, which belongs to the caller.
  while (!Poll().has_value() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  return Poll();
}

bool ChildProcess::Stop(absl::Duration grace) {
  if (!Poll().has_value()) Signal(SIGTERM);
  const bool exited = WaitFor(grace).has_value();
  KillGroup();  // the child if still running, and its orphans either way
  if (!exited) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    wait_status_ = status;
  }
  return exited;
}

}  // namespace tandem::client
