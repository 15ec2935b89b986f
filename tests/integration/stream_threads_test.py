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

Client: tandem-client, the Python SDK, whose Client.stream starts the call
at once (a Stream: cancel(), is_active(), request_id). It gets no retries
(Backoff(max_retries=0)): a call that failed UNAVAILABLE must show as
failed, not be sent again. Every wait is bounded.

Env: TANDEM_COORDINATOR_BIN, TANDEM_MODEL.
"""
import os
import time
import unittest

import tandem_client
from server_process import Server

COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
NUM_STREAMS = 1000
MAX_THREADS = 32
RUNNING = 4  # --max-seqs
NUM_CHANNELS = 4  # the streams share a few HTTP/2 connections, as clients do
WAIT_S = 120
CALL_TIMEOUT_S = 180  # bounds a call the server never ends
NO_RETRIES = tandem_client.Backoff(max_retries=0)


def long_request(i):
    """A request that cannot finish within the test: 8,000 tokens (the context
    is 8,192), no EOS."""
    return dict(request_id=f"stream-{i}", prompt=f"story {i}: once upon a time",
                max_tokens=8000, ignore_eos=True, temperature=0)


def connect(server, timeout=CALL_TIMEOUT_S):
    return tandem_client.Client(server.address, timeout=timeout, backoff=NO_RETRIES)


def thread_count(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def read_all(stream):
    for _ in stream:
        pass


class StreamThreadsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # --threads 2: the model's own pool does not grow with the machine.
        cls.server = Server([COORDINATOR, "--local", "--model", MODEL, "--port", "0",
                             "--host", "127.0.0.1", "--threads", "2", "--max-seqs", str(RUNNING)],
                            "tandem-coordinator")
        cls.clients = [connect(cls.server) for _ in range(NUM_CHANNELS)]

    @classmethod
    def tearDownClass(cls):
        for c in cls.clients:
            c.close()
        cls.server.kill()

    def load(self):
        return sum(g.load for g in self.clients[0].model_info().worker_groups)

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
        with connect(self.server, timeout=60) as c:
            response = c.generate("hello", max_tokens=4, ignore_eos=True, temperature=0)
        self.assertEqual(len(response.completions), 1)
        self.assertEqual(len(response.completions[0].token_ids), 4)

    def assert_streams(self, streams):
        """Each of `streams` yields its next delta, of its own request."""
        for j, s in enumerate(streams):
            next(s)
            self.assertEqual(s.request_id, f"stream-{j}")

    def test_thousand_open_streams_hold_at_most_32_threads(self):
        pid = self.server.proc.pid
        idle_threads = thread_count(pid)
        streams = []
        try:
            # The first RUNNING calls fill the running batch and stream; the
            # rest queue behind them.
            for i in range(NUM_STREAMS):
                streams.append(self.clients[i % NUM_CHANNELS].stream(**long_request(i)))
                if i + 1 == RUNNING:
                    self.assert_streams(streams)
            self.wait_load(NUM_STREAMS)
            open_threads = thread_count(pid)
            print(f"\ncoordinator threads: {idle_threads} idle, {open_threads} with "
                  f"{NUM_STREAMS} open streams")
            self.assertTrue(all(s.is_active() for s in streams), "a stream ended early")
            self.assertLessEqual(open_threads, MAX_THREADS)
            # The running streams keep streaming meanwhile.
            self.assert_streams(streams[:RUNNING])
        finally:
            # cancel() is True only for a call still open: none ended otherwise.
            cancelled = [s.cancel() for s in streams]
        self.wait_load(0)
        self.assertEqual(cancelled.count(False), 0, "streams ended before they were cancelled")
        self.assert_serves()

    def test_deadline_ends_calls_and_cancels_requests(self):
        with connect(self.server, timeout=2) as c:
            streams = [c.stream(**long_request(i)) for i in range(8)]
            for s in streams:
                with self.assertRaises(tandem_client.DeadlineExceeded):
                    read_all(s)
            with self.assertRaises(tandem_client.DeadlineExceeded):
                c.generate(**long_request(8))
        self.wait_load(0)
        self.assertIn("the request's deadline passed", self.server.stderr())
        self.assert_serves()


class SigtermWithOpenStreamsTest(unittest.TestCase):
    def test_sigterm_ends_streams_past_the_grace_period_and_exits_zero(self):
        server = Server([COORDINATOR, "--local", "--model", MODEL, "--port", "0",
                         "--host", "127.0.0.1", "--threads", "2", "--max-seqs", str(RUNNING)],
                        "tandem-coordinator")
        c = connect(server)
        try:
            # RUNNING calls stream (read one delta each), as many more queue.
            streams = [c.stream(**long_request(i)) for i in range(RUNNING)]
            for j, s in enumerate(streams):
                next(s)
                self.assertEqual(s.request_id, f"stream-{j}")
            streams += [c.stream(**long_request(RUNNING + i)) for i in range(RUNNING)]
            # Streams that cannot finish within the 10 s grace period are
            # cancelled by the server's Shutdown deadline; the process exits.
            self.assertEqual(server.terminate(60), 0, server.stderr()[-2000:])
            for s in streams:
                with self.assertRaises(tandem_client.TandemError):
                    read_all(s)
        finally:
            c.close()
            server.kill()


if __name__ == "__main__":
    unittest.main()
