"""Server: one tandem server binary (worker, coordinator, draft, or mpirun
running workers) started as a child in its own session. Its address is read
from the "NAME listening on HOST:PORT" line it prints once serving (bounded
wait); stderr is drained in the background so a chatty child never blocks.
Shared by every integration test; stdlib only."""
import os
import re
import signal
import subprocess
import threading


def _flag_values(args, flag):
    """The values `args` give `flag` (as "--flag V" or "--flag=V")."""
    values = []
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            values.append(args[i + 1])
        elif a.startswith(flag + "="):
            values.append(a.split("=", 1)[1])
    return values


class Server:
    def __init__(self, args, name, env=None, startup_timeout=120, required=True):
        """With `required`, a child that does not report its address within
        `startup_timeout` seconds is killed and AssertionError raised;
        otherwise `address` is None and the caller decides (e.g. skip).
        A tandem-coordinator gets `--http-port 0` unless `args` choose one
        (its default, 8000, would collide between tests); `http_address` is
        then the address of its second line, "NAME HTTP listening on ...",
        and None without HTTP (--http-port -1)."""
        self.name = name
        self.http_address = None
        if name == "tandem-coordinator" and not any(a.startswith("--http-port") for a in args):
            args = list(args) + ["--http-port", "0"]
        self._wants_http = name == "tandem-coordinator" and "-1" not in _flag_values(
            args, "--http-port")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, start_new_session=True)
        self.stderr_lines = []
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()
        self.address = self._read_address(startup_timeout)
        if self.address is None and required:
            self.kill()
            raise AssertionError(f"{self.name} did not report its address within "
                                 f"{startup_timeout} s; stderr: {self.stderr()[-2000:]}")

    @property
    def port(self):
        return int(self.address.rsplit(":", 1)[1])

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def stderr(self):
        """Everything the child wrote to stderr so far (all of it once it exited)."""
        if self.proc.poll() is not None:
            self._stderr_thread.join(30)
        return "".join(self.stderr_lines)

    def _read_address(self, startup_timeout):
        found = {}

        def read():
            line = self.proc.stdout.readline()
            m = re.fullmatch(re.escape(self.name) + r" listening on (\S+:\d+)\n", line)
            if not m:
                return
            if self._wants_http:
                http = re.fullmatch(re.escape(self.name) + r" HTTP listening on (\S+:\d+)\n",
                                    self.proc.stdout.readline())
                if not http:
                    return
                self.http_address = http.group(1)
            found["addr"] = m.group(1)

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(startup_timeout)
        return found.get("addr")

    def terminate(self, timeout):
        """SIGTERM, then the exit code (None when it did not exit in time)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._close_pipes()
        return code

    def kill(self):
        """Kills the process and its session (mpirun's ranks) if still running."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(30)
        self._close_pipes()

    def _close_pipes(self):
        if not self.proc.stdout.closed:
            self.proc.stdout.close()
        self._stderr_thread.join(30)
        if not self.proc.stderr.closed:
            self.proc.stderr.close()

    close = kill
