#!/usr/bin/env python3
"""Integration tests of the real `tandem-worker` process on 127.0.0.1: it
announces its OS-chosen port on one stdout line, answers grpc.health.v1 Check
with SERVING and TargetWorker.Info with the model's geometry, ends on SIGTERM
with exit 0 within 10 s, and exits non-zero naming the path for a bad --model.
gRPC through grpcio (grpc_channel.py).

Env: TANDEM_WORKER_BIN (build/bin/tandem-worker), TANDEM_MODEL (the default GGUF).
"""
import os
import signal
import socket
import subprocess
import time
import unittest

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from grpc_channel import RPC_TIMEOUT, channel
from server_process import Server
from tandem.v1 import worker_pb2, worker_pb2_grpc

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
        with channel(w.port) as ch:
            health = health_pb2_grpc.HealthStub(ch)
            for service in ("", "tandem.v1.TargetWorker"):
                response = health.Check(health_pb2.HealthCheckRequest(service=service),
                                        timeout=RPC_TIMEOUT)
                self.assertEqual(response.status, health_pb2.HealthCheckResponse.SERVING,
                                 f"health of {service!r}")
            with self.assertRaises(grpc.RpcError) as unknown:
                health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"),
                             timeout=RPC_TIMEOUT)
            self.assertEqual(unknown.exception.code(), grpc.StatusCode.NOT_FOUND)

            worker = worker_pb2_grpc.TargetWorkerStub(ch)
            info = worker.Info(worker_pb2.WorkerInfoRequest(), timeout=RPC_TIMEOUT)
            self.assertEqual(info.vocab_size, 49152)
            self.assertEqual(info.num_blocks, KV_BLOCKS)
            self.assertEqual(info.block_size, 16)
            self.assertEqual(info.tensor_parallel_size, 1)
            self.assertTrue(info.model_name, "model_name should be set")
            self.assertTrue(info.eos_token_ids, "eos_token_ids should be set")

            status = worker.Health(worker_pb2.HealthRequest(), timeout=RPC_TIMEOUT).status
            self.assertEqual(status, worker_pb2.WORKER_STATUS_SERVING)

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
