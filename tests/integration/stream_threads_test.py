#!/usr/bin/env python3
"""The coordinator's Inference service holds no thread per stream (gRPC's
callback API). Against a real `tandem-coordinator --local` with room for 4
running sequences, 1,000 concurrent GenerateStream calls stay open (4 running,
996 queued, none can finish within the test); while they are, the
coordinator's threads (/proc/PID/task) are counted and must be at most 32.
Cancelling every call must cancel every request (the scheduler's load returns
to 0) and leave the coordinator serving. Also: a GenerateStream or Generate
call whose deadline passes ends with DEADLINE_EXCEEDED and its request is
cancelled on the server too; SIGTERM with streams that outlast the 10 s grace
period ends them and the coordinator exits 0.

Client: grpcio with the stubs generated from proto/ (PYTHONPATH). Every wait
is bounded.

Env: TANDEM_COORDINATOR_BIN, TANDEM_MODEL.
"""
import os
import time
import unittest

import grpc

from server_process import Server
from tandem.v1 import common_pb2, inference_pb2, inference_pb2_grpc

COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
NUM_STREAMS = 1000
MAX_THREADS = 32
RUNNING = 4  # --max-seqs
NUM_CHANNELS = 4  # the streams share a few HTTP/2 connections, as clients do
WAIT_S = 120
CALL_TIMEOUT_S = 180  # bounds a call the server never ends


def long_request(i):
    """A request that cannot finish within the test: 8,000 tokens (the context
    is 8,192), no EOS."""
    return inference_pb2.GenerateRequest(
        request_id=f"stream-{i}", text=f"story {i}: once upon a time",
        sampling=common_pb2.SamplingParams(max_tokens=8000, ignore_eos=True, temperature=0))


def thread_count(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


class StreamThreadsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # --threads 2: the model's own pool does not grow with the machine.
        cls.server = Server([COORDINATOR, "--local", "--model", MODEL, "--port", "0",
                             "--host", "127.0.0.1", "--threads", "2", "--max-seqs", str(RUNNING)],
                            "tandem-coordinator")
        cls.channels = [grpc.insecure_channel(cls.server.address) for _ in range(NUM_CHANNELS)]
        cls.stubs = [inference_pb2_grpc.InferenceStub(c) for c in cls.channels]

    @classmethod
    def tearDownClass(cls):
        for c in cls.channels:
            c.close()
        cls.server.kill()

    def load(self):
        info = self.stubs[0].ModelInfo(inference_pb2.ModelInfoRequest(), timeout=30)
        return sum(g.load for g in info.worker_groups)

    def wait_load(self, want):
        """Polls ModelInfo until the scheduler holds `want` requests (bounded)."""
        deadline = time.monotonic() + WAIT_S
        load = self.load()
        while load != want and time.monotonic() < deadline:
            time.sleep(0.1)
            load = self.load()
        self.assertEqual(load, want, f"the scheduler holds {load} requests, expected {want}")

    def assert_serves(self):
        self.assertIsNone(self.server.proc.poll(), self.server.stderr()[-2000:])
        response = self.stubs[0].Generate(inference_pb2.GenerateRequest(
            text="hello", sampling=common_pb2.SamplingParams(max_tokens=4, ignore_eos=True,
                                                              temperature=0)), timeout=60)
        self.assertEqual(len(response.completions), 1)
        self.assertEqual(len(response.completions[0].token_ids), 4)

    def test_thousand_open_streams_hold_at_most_32_threads(self):
        pid = self.server.proc.pid
        idle_threads = thread_count(pid)
        calls = []
        try:
            # The first RUNNING calls fill the running batch and stream; the
            # rest queue behind them.
            for i in range(NUM_STREAMS):
                stub = self.stubs[i % NUM_CHANNELS]
                calls.append(stub.GenerateStream(long_request(i), timeout=CALL_TIMEOUT_S))
                if i + 1 == RUNNING:
                    for j, c in enumerate(calls):
                        self.assertEqual(next(c).request_id, f"stream-{j}")
            self.wait_load(NUM_STREAMS)
            open_threads = thread_count(pid)
            print(f"\ncoordinator threads: {idle_threads} idle, {open_threads} with "
                  f"{NUM_STREAMS} open streams")
            self.assertTrue(all(c.is_active() for c in calls), "a stream ended early")
            self.assertLessEqual(open_threads, MAX_THREADS)
            # The running streams keep streaming meanwhile.
            for j, c in enumerate(calls[:RUNNING]):
                self.assertEqual(next(c).request_id, f"stream-{j}")
        finally:
            for c in calls:
                c.cancel()
        self.wait_load(0)
        for c in calls:
            self.assertEqual(c.code(), grpc.StatusCode.CANCELLED)
        self.assert_serves()

    def test_deadline_ends_calls_and_cancels_requests(self):
        calls = [self.stubs[0].GenerateStream(long_request(i), timeout=2) for i in range(8)]
        for c in calls:
            with self.assertRaises(grpc.RpcError) as raised:
                for _ in c:
                    pass
            self.assertEqual(raised.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        with self.assertRaises(grpc.RpcError) as raised:
            self.stubs[1].Generate(long_request(8), timeout=2)
        self.assertEqual(raised.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.wait_load(0)
        self.assertIn("the request's deadline passed", self.server.stderr())
        self.assert_serves()


class SigtermWithOpenStreamsTest(unittest.TestCase):
    def test_sigterm_ends_streams_past_the_grace_period_and_exits_zero(self):
        server = Server([COORDINATOR, "--local", "--model", MODEL, "--port", "0",
                         "--host", "127.0.0.1", "--threads", "2", "--max-seqs", str(RUNNING)],
                        "tandem-coordinator")
        channel = grpc.insecure_channel(server.address)
        try:
            stub = inference_pb2_grpc.InferenceStub(channel)
            # RUNNING calls stream (read one message each), as many more queue.
            calls = [stub.GenerateStream(long_request(i), timeout=CALL_TIMEOUT_S)
                     for i in range(RUNNING)]
            for j, c in enumerate(calls):
                self.assertEqual(next(c).request_id, f"stream-{j}")
            calls += [stub.GenerateStream(long_request(RUNNING + i), timeout=CALL_TIMEOUT_S)
                      for i in range(RUNNING)]
            # Streams that cannot finish within the 10 s grace period are
            # cancelled by the server's Shutdown deadline; the process exits.
            self.assertEqual(server.terminate(60), 0, server.stderr()[-2000:])
            for c in calls:
                with self.assertRaises(grpc.RpcError):
                    for _ in c:
                        pass
        finally:
            channel.close()
            server.kill()


if __name__ == "__main__":
    unittest.main()
