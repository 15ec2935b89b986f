#!/usr/bin/env python3
"""Integration test of `tandem up` and `tandem health`: the launcher starts a
worker group, a draft worker and a coordinator on 127.0.0.1, prints
`tandem up: serving on HOST:PORT`; every server answers health SERVING, the
coordinator knows the draft worker (ModelInfo) and answers a greedy request;
the internal ports require the cluster key `tandem up` generated (a 0600
file, removed at exit): without it TargetWorker and Draft calls are
UNAUTHENTICATED;
SIGINT / SIGTERM stop the coordinator first (a request in flight still
completes), then the rest: exit 0 within 20 s and no tandem-worker, mpirun,
tandem-draft or tandem-coordinator left. Runs: the defaults (TP=2 + draft;
skipped with the reason when tandem-worker does not come up under mpirun),
--config FILE (TP=1 from the file, the draft from a flag that overrides the
file's "none"), --tp 1 --no-draft; config and start-up errors. Every wait
is bounded.

Env: TANDEM_BIN, TANDEM_MODEL, TANDEM_BIN_DIR.
"""
import http.client as http_client
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import grpc
import tandem_client
from grpc_channel import RPC_TIMEOUT, channel
from stream_client import client, model_info
from tandem.v1 import draft_pb2, draft_pb2_grpc, worker_pb2, worker_pb2_grpc

BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
BIN_DIR = os.environ["TANDEM_BIN_DIR"]
STARTUP_TIMEOUT = 240  # worker (model load) + coordinator, each bounded by 120 s inside
STOP_TIMEOUT = 20
# /proc/PID/stat's comm holds at most 15 characters.
WORKER_COMM = "tandem-worker"[:15]
COORDINATOR_COMM = "tandem-coordinator"[:15]
DRAFT_COMM = "tandem-draft"[:15]
# Each server's one thread for a forward: the test machine may have 2 cores.
THREADS = ["--worker-arg", "--threads=1", "--draft-arg", "--threads=1"]


def descendants(root_pid):
    """Every live process below root_pid, as {pid: comm}, from /proc."""
    children = {}
    comms = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] == "Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        comms[int(entry)] = comm
    found, todo = {}, [root_pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = comms[child]
            todo.append(child)
    return found


class Launcher:
    """`tandem up ARGS`; reads its `tandem up: serving on` line."""

    def __init__(self, args):
        if not any(a.startswith("--http-port") for a in args):
            args = [*args, "--http-port", "0"]  # 8000 would collide between tests
        self.proc = subprocess.Popen([BIN, "up", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.stderr_lines = []
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()
        self.pids_seen = {}
        self.cmdlines = {}  # pid → argv while serving
        self.address = None
        self.error = None
        found = {}

        def read():
            found["line"] = self.proc.stdout.readline()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(STARTUP_TIMEOUT)
        m = re.fullmatch(r"tandem up: serving on (\S+:\d+)\n", found.get("line") or "")
        if m:
            self.address = m.group(1)
            self.pids_seen = descendants(self.proc.pid)
            self.cmdlines = {pid: cmdline(pid) for pid in self.pids_seen}
        else:
            self.error = (f"no 'tandem up: serving on' line within {STARTUP_TIMEOUT} s: got "
                          f"{found.get('line')!r}, exit code {self.proc.poll()}; stderr: "
                          f"{self.stderr()[-3000:]}")

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def stderr(self):
        return "".join(self.stderr_lines)

    def server_address(self, name):
        """The address `tandem up` logged for server `name`, or None."""
        m = re.search(rf"^tandem up: {name} \(pid \d+\) serving on (\S+:\d+)$", self.stderr(),
                      re.MULTILINE)
        return m.group(1) if m else None

    def kill(self):
        """Last resort cleanup: the launcher and everything it started."""
        for pid in list(descendants(self.proc.pid)) + list(self.pids_seen):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self._stderr_thread.join(30)
        self.proc.stdout.close()
        self.proc.stderr.close()


def run_cli(args, timeout=300):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def alive(pids):
    """The pids (of `pids`, {pid: comm}) still running and not zombies."""
    left = {}
    for pid, comm in pids.items():
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            left[pid] = comm
    return left


def write_config(config):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(config if isinstance(config, str) else json.dumps(config))
        return f.name


class UpTest(unittest.TestCase):
    def check_cluster(self, args, tp, draft, stop_signal=signal.SIGTERM, in_flight=False):
        """Starts `tandem up ARGS`, checks the cluster (a worker group of `tp`
        ranks; a draft worker when `draft`), stops it with `stop_signal`
        (with a request in flight when `in_flight`) and checks that nothing
        is left. Returns the launcher (its processes seen while serving)."""
        launcher = Launcher(args)
        try:
            if launcher.error is not None:
                if tp > 1:
                    self.skipTest(f"TP={tp} worker group did not come up under mpirun "
                                  f"(MPI may be unusable here): {launcher.error}")
                self.fail(launcher.error)
            names = list(launcher.pids_seen.values())
            self.assertEqual(names.count(COORDINATOR_COMM), 1, launcher.pids_seen)
            self.assertEqual(names.count(WORKER_COMM), tp, launcher.pids_seen)
            self.assertEqual(names.count("mpirun"), 1 if tp > 1 else 0, launcher.pids_seen)
            self.assertEqual(names.count(DRAFT_COMM), 1 if draft else 0, launcher.pids_seen)

            p = run_cli([BIN, "health", "--addr", launcher.address], timeout=30)
            self.assertEqual((p.returncode, p.stdout), (0, "SERVING\n"), p.stderr)
            p = run_cli([BIN, "health", "--addr", launcher.address, "--service",
                         "no.such.Service"], timeout=30)
            self.assertEqual(p.returncode, 1, p.stdout)
            self.assertIn("NOT_FOUND", p.stderr)

            # ModelInfo: the coordinator's worker group and draft workers.
            port = int(launcher.address.rsplit(":", 1)[1])
            info = model_info(port)
            groups = [g.address for g in info.worker_groups]
            drafts = [d.address for d in info.draft_workers]
            self.assertEqual(groups, [launcher.server_address("tandem-worker")], info)
            draft_address = launcher.server_address("tandem-draft")
            if draft:
                self.assertIsNotNone(draft_address, launcher.stderr())
                self.assertEqual(drafts, [draft_address])
                for service in [[], ["--service", "tandem.v1.Draft"]]:
                    p = run_cli([BIN, "health", "--addr", draft_address, *service], timeout=30)
                    self.assertEqual((p.returncode, p.stdout), (0, "SERVING\n"), p.stderr)
            else:
                self.assertIsNone(draft_address, launcher.stderr())
                self.assertEqual(drafts, [])

            key_file = self.check_internal_ports_closed(launcher, draft_address if draft else None)

            p = run_cli([BIN, "generate", "--addr", launcher.address, "--prompt", "hi",
                         "--max-tokens", "4", "--temperature", "0", "--json",
                         "--timeout-s", "120"], timeout=180)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertRegex(p.stdout, r'"token_ids":\s*\[\d+(,\s*\d+){3}\]')

            client = None
            if in_flight:
                # Streams text: once some arrived, the request is running.
                client = subprocess.Popen(
                    [BIN, "generate", "--addr", launcher.address, "--prompt", "Count to 50:",
                     "--max-tokens", "96", "--ignore-eos", "--temperature", "0",
                     "--timeout-s", "120"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                first = {}
                reader = threading.Thread(target=lambda: first.update(c=client.stdout.read(1)),
                                          daemon=True)
                reader.start()
                reader.join(120)
                self.assertTrue(first.get("c"), "no streamed text within 120 s")
                # ~1 s of decoding is left: the signal below comes mid-request.
                self.assertIsNone(client.poll(), "the request ended before the signal")

            start = time.monotonic()
            launcher.proc.send_signal(stop_signal)
            try:
                code = launcher.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                code = None
            elapsed = time.monotonic() - start
            stderr = launcher.stderr()
            self.assertEqual(code, 0, f"after {elapsed:.1f} s; stderr: {stderr[-3000:]}")
            self.assertLess(elapsed, STOP_TIMEOUT)
            self.assertIn("stopping the coordinator", stderr)
            if client is not None:
                out, err = client.communicate(timeout=60)
                self.assertEqual(client.returncode, 0, f"the request in flight failed: {err}")
            # The coordinator drained before the workers and the draft were told to stop.
            stopped = [m.group(1) for m in re.finditer(r"^tandem up: (\S+) \(pid \d+\) stopped",
                                                         stderr, re.MULTILINE)]
            expected = {"tandem-coordinator", "mpirun" if tp > 1 else "tandem-worker"}
            if draft:
                expected.add("tandem-draft")
            self.assertEqual(set(stopped), expected, stderr[-3000:])
            self.assertEqual(stopped[0], "tandem-coordinator", stderr[-3000:])
            # Every process seen below the launcher while serving (workers,
            # mpirun, draft, coordinator) is gone, not even a zombie.
            self.assertEqual(alive(launcher.pids_seen), {}, "processes left behind")

            self.assertFalse(os.path.exists(key_file), "the cluster key file was left behind")
            # Nothing answers at the address any more.
            p = run_cli([BIN, "health", "--addr", launcher.address, "--timeout-s", "3"],
                        timeout=30)
            self.assertEqual(p.returncode, 1, p.stdout)
            self.assertRegex(p.stderr, "UNAVAILABLE|DEADLINE_EXCEEDED")
            return launcher
        finally:
            launcher.kill()

    def check_internal_ports_closed(self, launcher, draft_address):
        """The workers and the draft require the cluster key `tandem up`
        generated (a 0600 file handed to each as --api-key-file): without it
        TargetWorker.Step / Reset / Info and Draft.Propose are
        UNAUTHENTICATED, with it Info answers. Returns the key file's path."""
        worker_args = [launcher.cmdlines[pid] for pid, comm in launcher.pids_seen.items()
                       if comm == WORKER_COMM]
        args = worker_args[0]
        key_file = args[args.index(b"--api-key-file") + 1].decode()
        self.assertEqual(os.stat(key_file).st_mode & 0o777, 0o600)
        with open(key_file) as f:
            key = f.read().strip()
        self.assertRegex(key, r"^[0-9a-f]{64}$")
        worker_port = int(launcher.server_address("tandem-worker").rsplit(":", 1)[1])
        with channel(worker_port) as ch:
            target = worker_pb2_grpc.TargetWorkerStub(ch)
            for call, request in ((target.Step, worker_pb2.StepRequest(step_id=1)),
                                  (target.Reset, worker_pb2.ResetRequest()),
                                  (target.Info, worker_pb2.WorkerInfoRequest())):
                with self.assertRaises(grpc.RpcError) as caught:
                    call(request, timeout=RPC_TIMEOUT)
                self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            info = target.Info(worker_pb2.WorkerInfoRequest(), timeout=RPC_TIMEOUT,
                               metadata=[("authorization", f"Bearer {key}")])
            self.assertGreater(info.vocab_size, 0)
        if draft_address is not None:
            with channel(int(draft_address.rsplit(":", 1)[1])) as ch:
                with self.assertRaises(grpc.RpcError) as caught:
                    draft_pb2_grpc.DraftStub(ch).Propose(draft_pb2.ProposeRequest(),
                                                        timeout=RPC_TIMEOUT)
                self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        return key_file

    def test_defaults_tp2_with_draft_stop_on_sigint(self):
        self.check_cluster(["--model", MODEL, "--port", "0", "--bin-dir", BIN_DIR,
                            "--grace-s", "8", *THREADS], tp=2, draft=True,
                           stop_signal=signal.SIGINT)

    def test_config_file_and_a_flag_that_overrides_it(self):
        path = write_config({"model": MODEL, "tp": 1, "port": 0, "bin_dir": BIN_DIR,
                             "grace_s": 8, "draft_model": "none",
                             "worker_args": ["--threads=1"], "draft_args": ["--threads=1"]})
        try:
            launcher = self.check_cluster(["--config", path, "--draft-model", MODEL], tp=1,
                                          draft=True, in_flight=True)
        finally:
            os.unlink(path)
        # The file's lists reached the servers.
        for pid, comm in launcher.pids_seen.items():
            if comm in (WORKER_COMM, DRAFT_COMM):
                self.assertIn(b"--threads=1", launcher.cmdlines[pid], comm)

    def test_tp1_without_draft(self):
        self.check_cluster(["--model", MODEL, "--tp", "1", "--no-draft", "--port", "0",
                            "--bin-dir", BIN_DIR, "--grace-s", "8", *THREADS], tp=1,
                           draft=False)

    def test_out_of_range_n_never_stops_the_cluster(self):
        # Three "n": -1 requests within a minute used to crash-loop the
        # coordinator and stop the whole cluster.
        launcher = Launcher(["--model", MODEL, "--tp", "1", "--no-draft", "--port", "0",
                             "--bin-dir", BIN_DIR, "--grace-s", "8", *THREADS])
        try:
            self.assertIsNone(launcher.error, launcher.error)
            http = re.fullmatch(r"tandem up: OpenAI-compatible HTTP on http://(\S+)/v1\n",
                                launcher.proc.stdout.readline())
            self.assertIsNotNone(http)
            coordinator = [pid for pid, comm in launcher.pids_seen.items()
                           if comm == COORDINATOR_COMM]
            port = int(launcher.address.rsplit(":", 1)[1])
            values = [-1, -2 ** 31, 0, 10 ** 9]
            with client(port, timeout=30) as c:
                for i in range(50):
                    req = tandem_client.build_request("hi", max_tokens=2)
                    req.sampling.n = values[i % 4]
                    with self.assertRaises(tandem_client.InvalidRequest):
                        c.generate(req)
            host, http_port = http.group(1).rsplit(":", 1)
            for i in range(50):
                conn = http_client.HTTPConnection(host, int(http_port), timeout=30)
                conn.request("POST", "/v1/completions", headers={"Content-Type": "application/json"},
                             body=json.dumps({"prompt": "hi", "max_tokens": 2, "n": values[i % 4],
                                              "stream": i % 2 == 0}))
                self.assertEqual(conn.getresponse().status, 400)
                conn.close()
            self.assertEqual([pid for pid, comm in descendants(launcher.proc.pid).items()
                              if comm == COORDINATOR_COMM], coordinator)
            self.assertNotIn("restarting", launcher.stderr())
        finally:
            launcher.kill()

    def test_config_errors_exit_2_naming_the_problem(self):
        cases = [
            ({"model": MODEL, "tpp": 1}, 'unknown key "tpp"'),
            ({"model": MODEL, "tp": "1"}, 'key "tp" must be an integer, got "1"'),
            ({"worker_args": "--threads=1"}, 'key "worker_args" must be an array of strings'),
            ('{"tp": 1,}', "not valid JSON"),
        ]
        for config, message in cases:
            path = write_config(config)
            try:
                p = run_cli([BIN, "up", "--config", path, "--bin-dir", BIN_DIR], timeout=30)
            finally:
                os.unlink(path)
            self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
            self.assertIn(message, p.stderr)
            self.assertIn(path, p.stderr)
        p = run_cli([BIN, "up", "--config", "/nonexistent/up.json"], timeout=30)
        self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
        self.assertIn("/nonexistent/up.json", p.stderr)
        self.assertIn("No such file", p.stderr)
        p = run_cli([BIN, "up", "--model", MODEL, "--no-draft", "--draft-model", MODEL],
                    timeout=30)
        self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
        self.assertIn("--no-draft", p.stderr)

    def test_missing_mpirun_is_a_clear_error(self):
        p = run_cli([BIN, "up", "--model", MODEL, "--tp", "2", "--bin-dir", BIN_DIR,
                     "--mpirun", "no-such-mpirun"], timeout=30)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("no-such-mpirun", p.stderr)
        self.assertIn("--tp 2", p.stderr)
        self.assertEqual(p.stdout, "")

    def test_worker_failing_at_startup_reports_its_exit_code(self):
        p = run_cli([BIN, "up", "--model", "/nonexistent/model.gguf", "--tp", "1",
                     "--bin-dir", BIN_DIR], timeout=60)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("exit code 1", p.stderr)
        self.assertEqual(p.stdout, "")

    def test_draft_failing_at_startup_stops_the_workers(self):
        p = run_cli([BIN, "up", "--model", MODEL, "--tp", "1", "--draft-model",
                     "/nonexistent/draft.gguf", "--bin-dir", BIN_DIR, "--grace-s", "8",
                     *THREADS], timeout=120)
        self.assertEqual((p.returncode, p.stdout), (1, ""), p.stderr)
        self.assertRegex(p.stderr, r"tandem-draft \(pid \d+\) exited with exit code 1")
        # The worker group, already up or still loading, was stopped too.
        self.assertNotIn("killed", p.stderr)
        self.assertNotIn("starting " + os.path.join(BIN_DIR, "tandem-coordinator"), p.stderr)


if __name__ == "__main__":
    unittest.main()
