"""ServerProcess: one tandem server binary started on 127.0.0.1 with --port 0,
its real port read from the "NAME listening on 127.0.0.1:PORT" line it prints
once serving (bounded wait). Shared by the integration tests; stdlib only."""
import os
import re
import selectors
import subprocess
import time


class ServerProcess:
    def __init__(self, name, argv, start_timeout, stop_timeout):
        self.name = name
        self.stop_timeout = stop_timeout
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.port = self._read_port(start_timeout)

    def _read_port(self, start_timeout):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + start_timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(timeout=left):
                self.kill()
                raise AssertionError(f"no 'listening' line within {start_timeout} s")
            chunk = os.read(self.proc.stdout.fileno(), 1)
            if not chunk:
                self.proc.wait(timeout=self.stop_timeout)
                raise AssertionError(f"{self.name} exited early ({self.proc.returncode}): "
                                     f"{self.proc.stderr.read().decode(errors='replace')}")
            line += chunk
        sel.close()
        m = re.fullmatch(re.escape(self.name.encode()) + rb" listening on 127\.0\.0\.1:(\d+)\n", line)
        if not m:
            self.kill()
            raise AssertionError(f"unexpected first line {line!r}")
        return int(m.group(1))

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self):
        self.kill()
        self.proc.stdout.close()
        self.proc.stderr.close()
