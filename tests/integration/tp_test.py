#!/usr/bin/env python3
"""Integration test of a tensor-parallel target worker group: `mpirun -np N
tandem-worker` (N = 2, 3) behind a real tandem-coordinator, driven by
`tandem generate`. In reference precision TP > 1 is token-identical to TP = 1,
so 8 concurrent greedy requests must equal `tandem run --precision reference`
line for line. Then SIGTERM to the coordinator and mpirun: every process
(every rank) is gone within 15 s. Standard library only; every wait is
bounded. Skipped when mpirun is missing or cannot start processes here.

Env: TANDEM_WORKER_BIN, TANDEM_COORDINATOR_BIN, TANDEM_BIN, TANDEM_MODEL,
MPIEXEC (the mpirun / mpiexec to use).
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from server_process import Server

WORKER = os.environ["TANDEM_WORKER_BIN"]
COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
MPIEXEC = os.environ.get("MPIEXEC") or shutil.which("mpirun") or ""
STARTUP_TIMEOUT = 120
TIMEOUT = 300
EXIT_TIMEOUT = 15
# mpirun's messages when the sandbox cannot start MPI processes at all.
LAUNCH_FAILURES = ("was unable to launch the specified application",
                   "There are not enough slots available",
                   "unable to reliably start one or more daemons")

PROMPTS = ["Once upon a time", "The capital of France is", "def fib(n):",
           "Hello, my name is", "1, 2, 3, 4,", "The quick brown fox",
           "In the beginning", "Water boils at"]


def run_cli(args):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def worker_pids(session):
    """Pids of tandem-worker processes in the process session `session`."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0].decode(errors="replace")
            if os.path.basename(argv0) == "tandem-worker" and os.getsid(int(entry)) == session:
                pids.append(int(entry))
        except (OSError, ProcessLookupError):
            continue
    return pids


@unittest.skipUnless(MPIEXEC and os.path.exists(MPIEXEC), "mpirun/mpiexec not found")
class TensorParallelTest(unittest.TestCase):
    def check_world(self, n):
        env = dict(os.environ)
        env["OMPI_MCA_plm_rsh_agent"] = ""
        env["OMPI_MCA_mpi_yield_when_idle"] = "1"  # ranks waiting for a plan yield the core
        worker = Server([MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np", str(n),
                         WORKER, "--model", MODEL, "--port", "0", "--precision", "reference",
                         "--threads", "1"], "tandem-worker", env=env,
                         startup_timeout=STARTUP_TIMEOUT, required=False)
        session = worker.proc.pid  # start_new_session: mpirun leads its session
        coordinator = None
        try:
            if worker.address is None:
                worker.kill()
                if any(m in worker.stderr() for m in LAUNCH_FAILURES):
                    self.skipTest(f"mpirun cannot start processes here: {worker.stderr()[-500:]}")
                self.fail(f"TP={n} worker did not report its address within {STARTUP_TIMEOUT} s;"
                          f" stderr: {worker.stderr()[-2000:]}")
            coordinator = Server([COORDINATOR, "--model", MODEL, "--worker", worker.address,
                                  "--port", "0"], "tandem-coordinator")
            self.assertIsNotNone(coordinator.address,
                                 f"coordinator did not start: {coordinator.stderr()[-2000:]}")

            with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
                for i, p in enumerate(PROMPTS):
                    f.write(json.dumps({"prompt": p, "max_tokens": 8 + i, "temperature": 0}) + "\n")
                path = f.name
            try:
                code, out, err = run_cli(["generate", "--addr", coordinator.address, "--requests",
                                          path, "--json", "--concurrency", "8"])
                self.assertEqual(code, 0, f"generate failed: {err}")
                rcode, rout, rerr = run_cli(["run", "--model", MODEL, "--requests", path,
                                             "--json", "--precision", "reference"])
                self.assertEqual(rcode, 0, f"run failed: {rerr}")
            finally:
                os.unlink(path)
            got = [json.loads(line) for line in out.splitlines() if line.strip()]
            want = [json.loads(line) for line in rout.splitlines() if line.strip()]
            self.assertEqual(len(got), len(PROMPTS))
            self.assertEqual(len(want), len(PROMPTS))
            for i, (g, w) in enumerate(zip(got, want)):
                self.assertTrue(g["token_ids"], f"TP={n} request {i + 1} generated nothing")
                self.assertEqual(g["token_ids"], w["token_ids"],
                                 f"TP={n} request {i + 1} differs from tandem run")

            start = time.monotonic()
            self.assertEqual(coordinator.terminate(EXIT_TIMEOUT), 0,
                             f"coordinator: {coordinator.stderr()[-2000:]}")
            left = max(1.0, EXIT_TIMEOUT - (time.monotonic() - start))
            # Open MPI's mpirun forwards SIGTERM to every rank (rank 0 drains and
            # broadcasts SHUTDOWN; the others have SIGTERM blocked and exit on
            # it) but then exits 1 for having been signalled, so only a bounded
            # exit is required of mpirun; rank 0's clean stop is checked below.
            self.assertIsNotNone(worker.terminate(left),
                                 f"TP={n} mpirun did not exit within {EXIT_TIMEOUT} s; "
                                 f"stderr: {worker.stderr()[-2000:]}")
            while worker_pids(session) and time.monotonic() - start < EXIT_TIMEOUT:
                time.sleep(0.2)
            self.assertEqual(worker_pids(session), [],
                             f"TP={n} tandem-worker ranks still running {EXIT_TIMEOUT} s "
                             f"after SIGTERM")
            self.assertIn("tandem-worker: stopped", worker.stderr())
            self.assertIn(f"tensor-parallel size {n}", worker.stderr())
            self.assertEqual(worker.stderr().count("listening on"), 0)  # stdout only
        finally:
            if coordinator is not None:
                coordinator.kill()
            worker.kill()
            for pid in worker_pids(session):  # ranks mpirun left behind
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def test_tp2_equals_run(self):
        self.check_world(2)

    def test_tp3_equals_run(self):
        self.check_world(3)


if __name__ == "__main__":
    unittest.main()
