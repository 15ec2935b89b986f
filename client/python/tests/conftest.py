"""A real tandem cluster for the SDK's tests: `tandem-coordinator --local` on
127.0.0.1 (TANDEM_COORDINATOR_BIN, TANDEM_MODEL), started once per session,
or the one at TANDEM_ADDR."""
import os
import re
import socket
import subprocess
import threading

import pytest

START_TIMEOUT = 120


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_coordinator(port):
    """A `tandem-coordinator --local` on 127.0.0.1:port (Popen); its address
    line has been read once this returns."""
    proc = subprocess.Popen(
        [os.environ["TANDEM_COORDINATOR_BIN"], "--local", "--model", os.environ["TANDEM_MODEL"],
         "--host", "127.0.0.1", "--port", str(port), "--http-port", "-1", "--threads", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = {}
    reader = threading.Thread(target=lambda: line.setdefault("v", proc.stdout.readline()),
                              daemon=True)
    reader.start()
    reader.join(START_TIMEOUT)
    if not re.match(r"tandem-coordinator listening on ", line.get("v", "")):
        proc.kill()
        raise RuntimeError(f"tandem-coordinator did not start: {line.get('v')!r}")
    return proc


@pytest.fixture(scope="session")
def address():
    if os.environ.get("TANDEM_ADDR"):
        yield os.environ["TANDEM_ADDR"]
        return
    port = free_port()
    proc = start_coordinator(port)
    yield f"127.0.0.1:{port}"
    proc.kill()
    proc.wait(30)
