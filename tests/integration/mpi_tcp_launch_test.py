#!/usr/bin/env python3
"""Proof of the multi-pod launch path of deploy/k8s/overlays/lws: one target
worker group of three ranks in three "pods" that share nothing but TCP on
127.0.0.0/8, serving through a real coordinator token-identical to `tandem
run`.

The pods: the leader is this machine's 127.0.0.1; the two worker pods are
remote_shell_stub servers on 127.0.0.2 and 127.0.0.3 (stand-ins for the
worker pods' sshd: each runs what it is sent with a fresh environment and its
own HOME and TMPDIR). The leader runs the overlay's own launch-group.sh,
which execs mpirun over the three hosts with the stub client as the remote
shell (--mca plm_rsh_agent, ssh in the pods): mpirun starts each worker
pod's Open MPI daemon through its stub, the daemons dial back and start that
pod's rank, and rank 0 serves gRPC here. Open MPI talks only over loopback
(btl tcp,self from the script; btl and oob tcp_if_include lo from the
environment, which mpirun forwards to every daemon).

Checked: each stub started exactly one daemon; rank 0 runs here and ranks 1
and 2 under the stubs of 127.0.0.2 and 127.0.0.3 respectively, each with
btl tcp,self; 16 concurrent greedy GenerateStream requests through the
coordinator equal `tandem run --requests` (reference precision: TP is then
bit-identical to one process) in tokens, text and finish reason; SIGTERM to
the leader's mpirun stops every rank and daemon in every pod within 15 s.
Skipped when mpirun is missing or cannot start processes here. Every wait is
bounded; ports are chosen at run time.

Env: TANDEM_WORKER_BIN, TANDEM_COORDINATOR_BIN, TANDEM_BIN, TANDEM_MODEL,
MPIEXEC, TANDEM_SOURCE_DIR.
"""
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import unittest

import grpc

from generation_check import (assert_lines_equal, jsonl, mixed_requests, parse_lines, run_cli,
                              write_temp)
from server_process import Server
from stream_client import generate_concurrently

WORKER = os.environ["TANDEM_WORKER_BIN"]
COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
MPIEXEC = os.environ.get("MPIEXEC") or shutil.which("mpirun") or ""
LAUNCH = os.path.join(os.environ["TANDEM_SOURCE_DIR"],
                      "deploy/k8s/overlays/lws/mpi/launch-group.sh")
STUB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "remote_shell_stub.py")
POD_HOSTS = ("127.0.0.2", "127.0.0.3")
NUM_REQUESTS = 16
STARTUP_TIMEOUT = 120
RUN_TIMEOUT = 300
STREAM_TIMEOUT = 240
EXIT_TIMEOUT = 15
PORT_ATTEMPTS = 5
# mpirun's messages when the sandbox cannot start MPI processes at all.
LAUNCH_FAILURES = ("was unable to launch the specified application",
                   "There are not enough slots available")


def environ_of(pid):
    """Process `pid`'s environment as a dict ({} when it is gone)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            items = f.read().split(b"\0")
    except OSError:
        return {}
    return dict(i.decode(errors="replace").split("=", 1) for i in items if b"=" in i)


def marked(name, value):
    """{pid: environment} of every process whose environment has name=value."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and entry != str(os.getpid()):
            env = environ_of(entry)
            if env.get(name) == value:
                found[int(entry)] = env
    return found


def kill_all(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def free_port_on_every(hosts):
    """A port free on each of `hosts` when asked (the pods' sshd share one),
    or None when the one free on the first is taken on another."""
    with socket.socket() as first:
        first.bind((hosts[0], 0))
        port = first.getsockname()[1]
        try:
            for host in hosts[1:]:
                with socket.socket() as other:
                    other.bind((host, port))
        except OSError:
            return None
    return port


class MpiTcpLaunchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not (MPIEXEC and os.path.exists(MPIEXEC)):
            raise unittest.SkipTest("mpirun/mpiexec not found")
        cls.requests = mixed_requests(NUM_REQUESTS, seed=13)
        path = write_temp(jsonl(cls.requests))
        try:
            code, out, err = run_cli(BIN, ["run", "--model", MODEL, "--requests", path, "--json",
                                           "--precision", "reference"], RUN_TIMEOUT)
        finally:
            os.unlink(path)
        if code != 0:
            raise AssertionError(f"tandem run failed ({code}): {err[-2000:]}")
        cls.expected = parse_lines(out)

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mpi_tcp_launch_")
        self.group = os.path.basename(self.tmp)  # marks this test's ranks
        self.servers = []
        self.addCleanup(self.cleanup)

    def cleanup(self):
        for server in reversed(self.servers):
            server.kill()
        kill_all(marked("TANDEM_TEST_GROUP", self.group))
        for host in POD_HOSTS:
            kill_all(marked("REMOTE_SHELL_STUB_HOME", self.pod_home(host)))
        shutil.rmtree(self.tmp, ignore_errors=True)

    def pod_home(self, host):
        return os.path.join(self.tmp, host)

    def start_pods(self):
        """The worker pods' stand-in sshd, all on one port; returns it."""
        for _ in range(PORT_ATTEMPTS):
            port = free_port_on_every(POD_HOSTS)
            if port is None:
                continue
            pods = [Server([sys.executable, STUB, "serve", "--bind", host, "--port", str(port),
                            "--home", self.pod_home(host)], "remote_shell_stub",
                           startup_timeout=30, required=False) for host in POD_HOSTS]
            self.servers += pods
            if all(p.address for p in pods):
                self.pods = dict(zip(POD_HOSTS, pods))
                return port
            for p in pods:  # another process took the port meanwhile
                p.kill()
        self.fail(f"no port was free on all of {POD_HOSTS} in {PORT_ATTEMPTS} attempts")

    def launch_env(self, port):
        env = dict(os.environ)
        env.update({
            "PATH": os.path.dirname(MPIEXEC) + os.pathsep + env["PATH"],
            "TANDEM_MPI_HOSTS": ",".join(POD_HOSTS), "TANDEM_MPI_SELF": "127.0.0.1",
            "TANDEM_MPI_PORT": str(port), "TANDEM_MPI_AGENT": f"{sys.executable} {STUB}",
            "TANDEM_MPI_WAIT_S": "30", "REMOTE_SHELL_STUB_PORT": str(port),
            "TANDEM_MPI_EXPORT": "TANDEM_TEST_GROUP", "TANDEM_TEST_GROUP": self.group,
            # Only loopback for MPI traffic and the daemons' channel.
            "OMPI_MCA_btl_tcp_if_include": "lo", "OMPI_MCA_oob_tcp_if_include": "lo",
            "OMPI_MCA_mpi_yield_when_idle": "1",  # ranks waiting for a plan yield the core
        })
        if os.geteuid() == 0:  # CI containers run as root; pods never do
            env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
        return env

    def start_group(self, port):
        group = Server(["bash", LAUNCH, WORKER, "--model", MODEL, "--host", "127.0.0.1",
                        "--port", "0", "--precision", "reference", "--threads", "1"],
                       "tandem-worker", env=self.launch_env(port),
                       startup_timeout=STARTUP_TIMEOUT, required=False)
        self.servers.append(group)
        if group.address is None:
            group.kill()
            if any(m in group.stderr() for m in LAUNCH_FAILURES):
                self.skipTest(f"mpirun cannot start processes here: {group.stderr()[-500:]}")
            self.fail(f"the group did not report its address within {STARTUP_TIMEOUT} s; "
                      f"stderr: {group.stderr()[-3000:]}")
        return group

    def check_placement(self):
        """Rank 0 here, rank i in pod i; only btl tcp,self; one daemon per pod."""
        ranks = {pid: env for pid, env in marked("TANDEM_TEST_GROUP", self.group).items()
                 if "OMPI_COMM_WORLD_RANK" in env}  # not mpirun itself
        placed = {}
        for pid, env in ranks.items():
            self.assertEqual(env.get("OMPI_MCA_btl"), "tcp,self", f"rank pid {pid}'s btl")
            placed[int(env["OMPI_COMM_WORLD_RANK"])] = env.get("REMOTE_SHELL_STUB_HOME")
        want = {0: None, **{i + 1: self.pod_home(h) for i, h in enumerate(POD_HOSTS)}}
        self.assertEqual(placed, want, "rank -> the pod (stub HOME) it runs in")
        for host, pod in self.pods.items():
            self.assertEqual(pod.stderr().count("ran ['orted']"), 1,
                             f"{host}: {pod.stderr()[-2000:]}")

    def check_generation(self, coordinator):
        results = generate_concurrently(coordinator.port, self.requests, STREAM_TIMEOUT)
        for i, r in enumerate(results):
            self.assertEqual((r.status, r.details, r.error), (grpc.StatusCode.OK, "", ""),
                             f"request {i + 1} failed")
        assert_lines_equal(self, [r.as_line() for r in results], self.expected, NUM_REQUESTS,
                           ("token_ids", "text", "finish_reason"), "3 pods GenerateStream")

    def check_stop(self, group):
        """SIGTERM to mpirun stops every rank and daemon of every pod."""
        start = time.monotonic()
        # mpirun exits 1 for having been signalled (see tp_test.py); rank 0's
        # clean stop is checked in its log.
        self.assertIsNotNone(group.terminate(EXIT_TIMEOUT),
                             f"mpirun did not exit within {EXIT_TIMEOUT} s")
        self.assertIn("tandem-worker: stopped", group.stderr())
        self.assertIn("tensor-parallel size 3", group.stderr())

        def left():
            pids = set(marked("TANDEM_TEST_GROUP", self.group))
            for host in POD_HOSTS:
                pids |= set(marked("REMOTE_SHELL_STUB_HOME", self.pod_home(host)))
            return pids
        while left() and time.monotonic() - start < EXIT_TIMEOUT:
            time.sleep(0.2)
        self.assertEqual(left(), set(), f"still running {EXIT_TIMEOUT} s after SIGTERM")

    def test_ranks_in_three_pods_equal_run(self):
        port = self.start_pods()
        group = self.start_group(port)
        self.check_placement()
        coordinator = Server([COORDINATOR, "--model", MODEL, "--worker", group.address,
                              "--port", "0"], "tandem-coordinator")
        self.servers.append(coordinator)
        self.check_generation(coordinator)
        self.assertEqual(coordinator.terminate(EXIT_TIMEOUT), 0, coordinator.stderr()[-2000:])
        self.check_stop(group)


if __name__ == "__main__":
    unittest.main()
