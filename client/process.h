// ChildProcess: one child program started by fork/exec in a process group of
// its own, so that a signal reaches it and everything it starts (mpirun and
// its ranks). Its stdout is a pipe the parent reads lines from (the
// "... listening on HOST:PORT" announcement); stderr is inherited.
//
// Thread-safety: one thread uses a ChildProcess at a time. After
// StartForwardingOutput(), an internal thread copies the rest of the child's
// stdout to this process's stderr; it is joined by the destructor.
#ifndef TANDEM_CLIENT_PROCESS_H_
#define TANDEM_CLIENT_PROCESS_H_

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem::client {

// Resolves `program` to an executable path: a name with a '/' is checked as
// is, any other name is searched in $PATH. NOT_FOUND names the program and
// where it was looked for.
absl::StatusOr<std::string> FindExecutable(const std::string& program);

// Describes a waitpid() status: "exit code 3" or "signal 9 (Killed)".
std::string DescribeWaitStatus(int wait_status);

class ChildProcess {
 public:
  // Starts argv[0] (a path, see FindExecutable) with arguments argv[1..].
  // The child gets an empty signal mask and default signal dispositions, so
  // a parent that blocks SIGTERM for sigwait() does not pass that on.
  // INTERNAL when pipe/fork fails; an exec failure shows up as exit code 127.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::vector<std::string>& argv);

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // Kills the whole process group (SIGKILL) if anything is left, reaps the
  // child and joins the output thread.
  ~ChildProcess();

  // Reads one line (without its '\n') from the child's stdout. Fails with
  // DEADLINE_EXCEEDED at `deadline`, CANCELLED when `should_stop` (polled
  // every 100 ms; may be empty) returns true, and UNAVAILABLE naming the
  // exit status when the child exits or closes stdout first.
  absl::StatusOr<std::string> ReadLine(absl::Time deadline,
                                       const std::function<bool()>& should_stop);

  // Copies whatever the child writes to stdout from now on to our stderr
  // (the pipe must not fill up and block the child).
  void StartForwardingOutput();

  // Sends `signal_number` to the child's process group.
  void Signal(int signal_number);

  // Reaps the child if it has exited; returns its waitpid() status then.
  std::optional<int> Poll();

  // Waits up to `timeout` for the child to exit; its waitpid() status, or
  // nullopt when it is still running.
  std::optional<int> WaitFor(absl::Duration timeout);

  // SIGTERM to the group, up to `grace` for the child to exit, then SIGKILL
  // to the group; always leaves the group empty of the child. Returns true
  // when the child exited within the grace period.
  bool Stop(absl::Duration grace);

  pid_t pid() const { return pid_; }
  // argv[0]'s base name, for messages.
  const std::string& name() const { return name_; }
  // The child's waitpid() status once reaped.
  std::optional<int> wait_status() const { return wait_status_; }

 private:
  ChildProcess(pid_t pid, int stdout_fd, std::string name)
      : pid_(pid), stdout_fd_(stdout_fd), name_(std::move(name)) {}

  // SIGKILL to the group: the child's orphans (mpirun's ranks) die too.
  void KillGroup();

  pid_t pid_;
  int stdout_fd_;  // read end of the child's stdout (the forwarder reads it once started)
  std::string name_;
  std::string buffer_;  // bytes read past the last returned line
  std::optional<int> wait_status_;
  std::atomic<bool> stop_forwarding_{false};
  std::thread forwarder_;
};

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_PROCESS_H_
