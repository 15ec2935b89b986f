#!/usr/bin/env python3
"""Proof test of the cluster's output at every tensor-parallel size: 64
concurrent streaming greedy requests of mixed prompt lengths (4..200 tokens;
token ids, text and chat) and mixed max_tokens (4..24) through a real
tandem-coordinator in front of one target worker group — TP = 1 (one
tandem-worker) and TP = 2 and 3 (`mpirun -np N tandem-worker`) — all complete,
and each one's tokens, text and finish reason equal `tandem run --requests`
(single process) token for token. One `tandem run` output is shared by the
three sizes.

The model is `tandem make-model --shape toy-head --vocab-from TANDEM_MODEL`
(random weights: 4 small layers whose 6 query and 3 KV heads split 3 + 3 /
2 + 1 at TP = 2 and 2 + 2 + 2 / 1 + 1 + 1 at TP = 3, the real model's
tokenizer and vocabulary, its own peaked output head): what is proved is the
splitting, which the real 30-layer model would only make twelve times
slower. The real model at TP = 3 in reference precision is held to `tandem
run` token for token in mpi_tcp_launch_test.py.

Both sides run in reference precision (--precision reference: f32 weights
and math), which makes TP > 1 bit-identical to TP = 1. Fast precision
quantizes activations per rank, so a near-tie between two tokens may flip
between TP sizes; it is compared with `tandem run` at TP = 1 in
cluster_test.py instead.

The requests go through stream_client (Inference.GenerateStream through the
Python SDK, tandem-client, with no retries; one connection and thread each,
all released together), so the test also checks that they really streamed
(tokens arrived over several messages) and really ran concurrently (most
were mid-generation at the same moment) — a server that answered at the
end, or one request at a time, fails. Then SIGTERM to
the coordinator and the worker group: every process (every rank) is gone
within 15 s. Every wait is bounded; ports are chosen by the OS. TP 2 and 3
are skipped when mpirun is missing or cannot start processes here.

Env: TANDEM_WORKER_BIN, TANDEM_COORDINATOR_BIN, TANDEM_BIN, TANDEM_MODEL,
MPIEXEC (the mpirun / mpiexec to use).
"""
import os
import shutil
import signal
import tempfile
import time
import unittest

import grpc

from generation_check import (assert_lines_equal, jsonl, mixed_requests, parse_lines, run_cli,
                              write_temp)
from server_process import Server
from stream_client import generate_concurrently, peak_in_flight

WORKER = os.environ["TANDEM_WORKER_BIN"]
COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
MPIEXEC = os.environ.get("MPIEXEC") or shutil.which("mpirun") or ""
NUM_REQUESTS = 64
STARTUP_TIMEOUT = 120
RUN_TIMEOUT = 300      # `tandem run` of the whole request set
STREAM_TIMEOUT = 240   # all 64 streams of one TP size
EXIT_TIMEOUT = 15
# Streaming: a request of at least this many tokens must get them in more
# than one message (the server coalesces only what a slow reader left).
MIN_TOKENS_TO_STREAM = 4
# mpirun's messages when the sandbox cannot start MPI processes at all.
LAUNCH_FAILURES = ("was unable to launch the specified application",
                   "There are not enough slots available",
                   "unable to reliably start one or more daemons")


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


class TensorParallelProofTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="tandem-tp-")
        cls.model = os.path.join(cls.tmp.name, "toy-head.gguf")
        code, _, err = run_cli(BIN, ["make-model", "--shape", "toy-head", "--dtype", "q8_0",
                                     "--seed", "3", "--out", cls.model, "--vocab-from", MODEL],
                               RUN_TIMEOUT)
        if code != 0:
            raise AssertionError(f"tandem make-model failed ({code}): {err[-2000:]}")
        cls.requests = mixed_requests(NUM_REQUESTS)
        path = write_temp(jsonl(cls.requests))
        try:
            code, out, err = run_cli(BIN, ["run", "--model", cls.model, "--requests", path,
                                           "--json", "--precision", "reference"], RUN_TIMEOUT)
        finally:
            os.unlink(path)
        if code != 0:
            raise AssertionError(f"tandem run failed ({code}): {err[-2000:]}")
        cls.expected = parse_lines(out)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def start_workers(self, n):
        """The worker group: one tandem-worker for n = 1, else mpirun -np n."""
        worker_args = [WORKER, "--model", self.model, "--port", "0", "--precision", "reference"]
        if n == 1:
            return Server(worker_args, "tandem-worker", startup_timeout=STARTUP_TIMEOUT)
        if not (MPIEXEC and os.path.exists(MPIEXEC)):
            self.skipTest("mpirun/mpiexec not found")
        env = dict(os.environ)
        env["OMPI_MCA_plm_rsh_agent"] = ""
        env["OMPI_MCA_mpi_yield_when_idle"] = "1"  # ranks waiting for a plan yield the core
        worker = Server([MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np", str(n)] +
                        worker_args + ["--threads", "1"], "tandem-worker", env=env,
                        startup_timeout=STARTUP_TIMEOUT, required=False)
        if worker.address is None:
            worker.kill()
            if any(m in worker.stderr() for m in LAUNCH_FAILURES):
                self.skipTest(f"mpirun cannot start processes here: {worker.stderr()[-500:]}")
            self.fail(f"TP={n} worker did not report its address within {STARTUP_TIMEOUT} s;"
                      f" stderr: {worker.stderr()[-2000:]}")
        return worker

    def check_streams(self, n, results):
        label = f"TP={n}"
        for i, r in enumerate(results):
            self.assertEqual((r.status, r.details, r.error), (grpc.StatusCode.OK, "", ""),
                             f"{label}: request {i + 1} failed")
            self.assertEqual(r.usage.completion_tokens, len(r.token_ids),
                             f"{label}: request {i + 1}'s usage")
        assert_lines_equal(self, [r.as_line() for r in results], self.expected, NUM_REQUESTS,
                           ("token_ids", "text", "finish_reason"), f"{label} GenerateStream")
        long_enough = [r for r in results if len(r.token_ids) >= MIN_TOKENS_TO_STREAM]
        streamed = [r for r in long_enough if len(r.token_times) >= 2]
        self.assertGreater(len(long_enough), NUM_REQUESTS // 2)
        # A server that sends everything at the end gives 0 here; allow a few
        # coalesced ones on a loaded machine.
        self.assertGreaterEqual(len(streamed), 0.9 * len(long_enough),
                                f"{label}: only {len(streamed)} of {len(long_enough)} requests "
                                f"of >= {MIN_TOKENS_TO_STREAM} tokens arrived in several messages")
        # One request at a time gives 1 here.
        peak = peak_in_flight(results)
        self.assertGreaterEqual(peak, NUM_REQUESTS // 2,
                                f"{label}: at most {peak} of {NUM_REQUESTS} requests were "
                                f"mid-generation at one moment")
        took = max(r.end_at for r in results) - min(r.sent_at for r in results)
        print(f"{label}: {NUM_REQUESTS} streams in {took:.1f} s, {len(streamed)}/"
              f"{len(long_enough)} streamed, peak in flight {peak}", flush=True)

    def check_world(self, n):
        worker = self.start_workers(n)
        session = worker.proc.pid  # start_new_session: the worker (or mpirun) leads its session
        coordinator = None
        try:
            coordinator = Server([COORDINATOR, "--model", self.model, "--worker", worker.address,
                                  "--port", "0"], "tandem-coordinator")
            results = generate_concurrently(coordinator.port, self.requests, STREAM_TIMEOUT)
            self.check_streams(n, results)

            start = time.monotonic()
            self.assertEqual(coordinator.terminate(EXIT_TIMEOUT), 0,
                             f"coordinator: {coordinator.stderr()[-2000:]}")
            left = max(1.0, EXIT_TIMEOUT - (time.monotonic() - start))
            # Open MPI's mpirun forwards SIGTERM to every rank (rank 0 drains and
            # broadcasts SHUTDOWN; the others have SIGTERM blocked and exit on
            # it) but then exits 1 for having been signalled, so only a bounded
            # exit is required of mpirun; rank 0's clean stop is checked below.
            code = worker.terminate(left)
            self.assertIsNotNone(code, f"TP={n} worker group did not exit within "
                                       f"{EXIT_TIMEOUT} s; stderr: {worker.stderr()[-2000:]}")
            if n == 1:
                self.assertEqual(code, 0, worker.stderr()[-2000:])
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

    def test_tp1_equals_run(self):
        self.check_world(1)

    def test_tp2_equals_run(self):
        self.check_world(2)

    def test_tp3_equals_run(self):
        self.check_world(3)


if __name__ == "__main__":
    unittest.main()
