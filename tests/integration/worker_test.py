#!/usr/bin/env python3
"""Integration tests of the real `tandem-worker` process on 127.0.0.1: it
announces its OS-chosen port on one stdout line, answers grpc.health.v1 Check
with SERVING and TargetWorker.Info with the model's geometry, ends on SIGTERM
with exit 0 within 10 s, and exits non-zero naming the path for a bad --model.
Standard library only: the few gRPC calls are made with a minimal HTTP/2
client (grpc_lite.py: unary call, literal HPACK headers, no Huffman coding).

Env: TANDEM_WORKER_BIN (build/bin/tandem-worker), TANDEM_MODEL (the default GGUF).
"""
import os
import signal
import socket
import subprocess
import time
import unittest

from server_process import Server
from grpc_lite import grpc_unary, health_status, parse_proto

BIN = os.environ["TANDEM_WORKER_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
START_TIMEOUT = 60
STOP_TIMEOUT = 10
KV_BLOCKS = 48

class Worker(Server):
    """A tandem-worker process on 127.0.0.1 with an OS-chosen port."""
    def __init__(self, *extra):
        super().__init__([BIN, "--model", MODEL, "--host", "127.0.0.1", "--port", "0",
                          "--kv-blocks", str(KV_BLOCKS), "--threads", "1"] + list(extra),
                         "tandem-worker", startup_timeout=START_TIMEOUT)


class WorkerProcessTest(unittest.TestCase):
    def setUp(self):
        self.worker = Worker()
        self.addCleanup(self.worker.close)

    def test_serves_health_and_info_then_stops_on_sigterm(self):
        w = self.worker
        self.assertGreater(w.port, 0)
        self.assertEqual(health_status(w.port), 1, "overall health should be SERVING")
        self.assertEqual(health_status(w.port, "tandem.v1.TargetWorker"), 1)

        info = parse_proto(grpc_unary(w.port, "/tandem.v1.TargetWorker/Info"))
        self.assertEqual(info[2], [49152], "vocab_size")
        self.assertEqual(info[4], [KV_BLOCKS], "num_blocks")
        self.assertEqual(info[5], [16], "block_size")
        self.assertEqual(info[6], [1], "tensor_parallel_size")
        self.assertTrue(info.get(1), "model_name should be set")
        self.assertTrue(info.get(7), "eos_token_ids should be set")

        health = parse_proto(grpc_unary(w.port, "/tandem.v1.TargetWorker/Health"))
        self.assertEqual(health.get(1), [1], "WORKER_STATUS_SERVING")

        start = time.monotonic()
        w.proc.send_signal(signal.SIGTERM)
        rc = w.proc.wait(timeout=STOP_TIMEOUT)
        self.assertEqual(rc, 0, w.stderr())
        self.assertLess(time.monotonic() - start, STOP_TIMEOUT)
        self.assertFalse(os.path.exists(f"/proc/{w.proc.pid}"), "the process is gone")
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", w.port), timeout=2).close()

    def test_sigint_also_stops_cleanly(self):
        w = self.worker
        w.proc.send_signal(signal.SIGINT)
        self.assertEqual(w.proc.wait(timeout=STOP_TIMEOUT), 0)


class BadFlagsTest(unittest.TestCase):
    def run_worker(self, *args):
        p = subprocess.run([BIN] + list(args), capture_output=True, text=True, timeout=START_TIMEOUT)
        self.assertGreater(p.returncode, 0, f"expected a clean non-zero exit: {p.returncode} {p.stderr}")
        self.assertEqual(p.stdout, "", "nothing may be announced on stdout")
        return p.stderr

    def test_missing_model_file(self):
        err = self.run_worker("--model", "/nonexistent/model.gguf", "--port", "0")
        self.assertIn("/nonexistent/model.gguf", err)

    def test_no_model(self):
        self.assertIn("--model", self.run_worker("--port", "0"))

    def test_bad_port_and_precision(self):
        self.assertIn("70000", self.run_worker("--model", MODEL, "--port", "70000"))
        self.assertIn("'bf8'", self.run_worker("--model", MODEL, "--precision", "bf8"))


if __name__ == "__main__":
    unittest.main()
