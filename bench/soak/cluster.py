"""The soak test's cluster: one tandem-coordinator in front of two
tandem-worker replicas, every process on 127.0.0.1, each child in its own
session. A replica can be SIGKILLed and restarted on its port. Each
process's stdout and stderr go to a log file under the output directory (a
restarted worker appends to its replica's log); the address is read from the
"NAME listening on HOST:PORT" line the binaries print once serving, within a
bounded wait. Stdlib only."""
import os
import re
import signal
import subprocess
import threading
import time

HOST = "127.0.0.1"  # all traffic stays on loopback


class ServerProcess:
    """One server binary, started at construction. `address` (and, for the
    coordinator, `http_address`) once it printed them within
    `startup_timeout_s`; otherwise it is killed and RuntimeError raised with
    the tail of its log."""

    def __init__(self, args, name, log_path, startup_timeout_s=120.0, wants_http=False):
        self.name = name
        self.args = list(args)
        self.log_path = log_path
        self.address = None
        self.http_address = None
        self._wants_http = wants_http
        self._ready = threading.Event()
        self._exit_logged = False
        self._log = open(log_path, "a", buffering=1)
        self._log.write(f"=== {time.strftime('%H:%M:%S')} start: {' '.join(self.args)}\n")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self.started_at = time.monotonic()
        # Drains the child's output into the log for its whole life, so a
        # chatty child never blocks, and notes the address lines on the way.
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        if not self._ready.wait(startup_timeout_s) or self.address is None:
            self.kill()
            raise RuntimeError(f"{name} did not report its address within {startup_timeout_s} s "
                               f"(exit code {self.proc.poll()}); log {log_path}:\n"
                               f"{self.log_tail()}")

    @property
    def pid(self):
        return self.proc.pid

    @property
    def port(self):
        return int(self.address.rsplit(":", 1)[1])

    def _drain(self):
        grpc_re = re.compile(re.escape(self.name) + r" listening on (\S+:\d+)")
        http_re = re.compile(re.escape(self.name) + r" HTTP listening on (\S+:\d+)")
        for line in self.proc.stdout:
            self._log.write(line)
            if self._ready.is_set():
                continue
            m = grpc_re.fullmatch(line.rstrip("\n"))
            if m:
                self.address = m.group(1)
            m = http_re.fullmatch(line.rstrip("\n"))
            if m:
                self.http_address = m.group(1)
            if self.address and (self.http_address or not self._wants_http):
                self._ready.set()
        self._ready.set()  # the child exited (or closed stdout): stop waiting

    def alive(self):
        return self.proc.poll() is None

    def log_tail(self, chars=2000):
        self._log.flush()
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-chars:]
        except OSError:
            return ""

    def sigkill(self):
        """SIGKILLs the process (not its session: a worker has no children)
        and reaps it. Returns the exit code."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
        return self._reap(30)

    def terminate(self, timeout_s=20.0):
        """SIGTERM (drain), then SIGKILL of its session after `timeout_s`.
        Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self._reap(30)

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._reap(30)

    def _reap(self, timeout_s):
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(10)
        if not self._exit_logged and not self._log.closed:
            self._log.write(f"=== {time.strftime('%H:%M:%S')} exited with {code}\n")
            self._exit_logged = True
        return code

    def close(self):
        self.kill()
        self._reader.join(10)
        if not self._log.closed:
            self._log.close()


class Cluster:
    """Two tandem-worker replicas (`--threads 1` each) and a coordinator with
    both (`--worker A,B`, gRPC and HTTP on ports the OS picks)."""

    def __init__(self, bin_dir, model, out_dir, worker_threads=1, coordinator_flags=(),
                 worker_flags=(), num_workers=2):
        self.bin_dir = bin_dir
        self.model = model
        self.out_dir = out_dir
        self.worker_threads = worker_threads
        self.worker_flags = list(worker_flags)
        self.workers = [None] * num_workers
        self.coordinator = None
        try:
            for i in range(num_workers):
                self.workers[i] = self._start_worker(i, 0)
            self.coordinator = ServerProcess(
                [os.path.join(bin_dir, "tandem-coordinator"), "--model", model,
                 "--host", HOST, "--port", "0", "--http-port", "0",
                 "--worker", ",".join(w.address for w in self.workers)]
                + list(coordinator_flags),
                "tandem-coordinator", os.path.join(out_dir, "coordinator.log"),
                wants_http=True)
        except BaseException:
            self.close()
            raise

    def _start_worker(self, index, port):
        return ServerProcess(
            [os.path.join(self.bin_dir, "tandem-worker"), "--model", self.model, "--host", HOST,
             "--port", str(port), "--threads", str(self.worker_threads)] + self.worker_flags,
            "tandem-worker", os.path.join(self.out_dir, f"worker-{index}.log"))

    def kill_worker(self, index):
        """SIGKILLs replica `index`; returns its exit code (-9)."""
        return self.workers[index].sigkill()

    def restart_worker(self, index, attempts=10, retry_delay_s=1.0):
        """Starts replica `index` again on the port it had. A bind that fails
        (the port not free yet) is retried `attempts` times; RuntimeError
        when none succeeded."""
        old = self.workers[index]
        port = old.port
        old.close()
        last = None
        for _ in range(attempts):
            try:
                self.workers[index] = self._start_worker(index, port)
                return self.workers[index]
            except RuntimeError as e:
                last = e
                time.sleep(retry_delay_s)
        raise RuntimeError(f"replica {index} did not restart on port {port}: {last}")

    def close(self):
        """SIGTERM to the coordinator, then the workers; bounded."""
        if self.coordinator is not None:
            self.coordinator.terminate(20)
            self.coordinator.close()
        for w in self.workers:
            if w is not None:
                w.terminate(10)
                w.close()
