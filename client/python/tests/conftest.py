"""A real tandem cluster for the SDK's tests, started once per session on
127.0.0.1: `tandem up` (a worker group, a draft worker and a coordinator, as
separate processes) when TANDEM_BIN is set, else `tandem-coordinator --local`
(TANDEM_COORDINATOR_BIN); TANDEM_MODEL either way. Or the one at TANDEM_ADDR.
Some tests also start a coordinator of their own (start_coordinator)."""
import os
import re
import signal
import socket
import subprocess
import threading

import pytest

START_TIMEOUT = 120


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args, ready):
    """Popen of `args` once its first stdout line matches `ready` (read
    within START_TIMEOUT); RuntimeError with that line otherwise."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = {}
    reader = threading.Thread(target=lambda: line.setdefault("v", proc.stdout.readline()),
                              daemon=True)
    reader.start()
    reader.join(START_TIMEOUT)
    if not re.match(ready, line.get("v", "")):
        proc.kill()
        raise RuntimeError(f"{args[0]} did not start: {line.get('v')!r}")
    return proc


def start_coordinator(port):
    """A `tandem-coordinator --local` on 127.0.0.1:port (Popen), serving."""
    return _start([os.environ["TANDEM_COORDINATOR_BIN"], "--local", "--model",
                   os.environ["TANDEM_MODEL"], "--host", "127.0.0.1", "--port", str(port),
                   "--http-port", "-1", "--threads", "2"],
                  r"tandem-coordinator listening on ")


def start_up(port):
    """`tandem up` (TANDEM_BIN) serving on 127.0.0.1:port (Popen)."""
    return _start([os.environ["TANDEM_BIN"], "up", "--model", os.environ["TANDEM_MODEL"],
                   "--tp", "1", "--port", str(port), "--http-port", "-1", "--grace-s", "10"],
                  r"tandem up: serving on ")


@pytest.fixture(scope="session")
def address():
    if os.environ.get("TANDEM_ADDR"):
        yield os.environ["TANDEM_ADDR"]
        return
    port = free_port()
    if os.environ.get("TANDEM_BIN"):
        proc = start_up(port)
        yield f"127.0.0.1:{port}"
        proc.send_signal(signal.SIGTERM)  # up drains and stops every process it started
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        return
    proc = start_coordinator(port)
    yield f"127.0.0.1:{port}"
    proc.kill()
    proc.wait(30)
