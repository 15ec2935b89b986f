#!/usr/bin/env python3
"""tandem-coordinator --api-key: every gRPC call (Python SDK; the CLI, which is
the C++ SDK, through TANDEM_API_KEY) and every HTTP path (openai SDK) but
/health, /ready and /metrics requires "authorization: Bearer KEY"; a missing or
wrong key is UNAUTHENTICATED / 401 and never reaches the scheduler (the worker
group's step count does not move); grpc.health.v1 stays open for probes. With
--api-key-file and --api-key-metrics, /metrics needs the key too. Bad key flags
fail at start-up naming the problem.

Internal ports (InternalApiKeyTest): a tandem-worker (serving Draft beside the
target with --speculative ngram) started with --api-key refuses TargetWorker
and Draft calls without the key (UNAUTHENTICATED); a coordinator with the same
--api-key presents it to the worker and the draft and serves; one without it
cannot use the worker and fails at start-up naming UNAUTHENTICATED.

Env: TANDEM_COORDINATOR_BIN, TANDEM_WORKER_BIN, TANDEM_BIN, TANDEM_MODEL.
"""
import os
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import grpc
import openai
import tandem_client
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tandem.v1 import draft_pb2, draft_pb2_grpc, worker_pb2, worker_pb2_grpc

from grpc_channel import RPC_TIMEOUT, channel
from server_process import Server

COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
WORKER = os.environ["TANDEM_WORKER_BIN"]
BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
KEY = "tk-test-5f0c2a9e"
PROMPT = "The capital of France is"


def start(*flags):
    return Server([COORDINATOR, "--local", "--model", MODEL, "--port", "0", "--threads", "2",
                   *flags], "tandem-coordinator")


def http_get(address, path, key=None, method="GET", scheme="Bearer", body=None):
    """(status, body) of METHOD http://address/path."""
    request = urllib.request.Request(f"http://{address}{path}", method=method, data=body)
    if key:
        request.add_header("Authorization", f"{scheme} {key}")
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def sdk(address, key=None):
    return tandem_client.Client(address, timeout=60, api_key=key,
                                backoff=tandem_client.Backoff(max_retries=0),
                                options=[("grpc.enable_http_proxy", 0)])


class ApiKeyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = start("--api-key", KEY)

    @classmethod
    def tearDownClass(cls):
        cls.server.kill()

    def steps(self):
        """The group's step count once it is idle: the count is published after
        a step's tokens reach the client, so a request that just returned may
        still add its last step."""
        last = None
        deadline = time.monotonic() + 10
        with sdk(self.server.address, KEY) as c:
            while time.monotonic() < deadline:
                group = c.model_info().worker_groups[0]
                if group.load == 0 and group.num_steps == last:
                    return last
                last = group.num_steps
                time.sleep(0.2)
        self.fail(f"the worker group did not settle within 10 s (steps {last})")

    def test_grpc_calls_need_the_key(self):
        before = self.steps()
        for key in (None, "wrong", KEY + "x", KEY[:-1]):
            with sdk(self.server.address, key) as c:
                for call in (lambda: c.generate(PROMPT, max_tokens=2),
                             lambda: list(c.stream(PROMPT, max_tokens=2)),
                             lambda: c.tokenize("hi"), lambda: c.detokenize([1, 2]),
                             c.model_info):
                    with self.assertRaises(tandem_client.TandemError) as e:
                        call()
                    self.assertEqual(e.exception.code, grpc.StatusCode.UNAUTHENTICATED, key)
                    self.assertIn("Bearer KEY", e.exception.message)
                    self.assertNotIn(KEY, e.exception.message)
        self.assertEqual(self.steps(), before, "a rejected call reached the scheduler")
        with sdk(self.server.address, KEY) as c:
            r = c.generate(PROMPT, max_tokens=4, temperature=0)
            self.assertEqual(len(r.completions[0].token_ids), 4)
            self.assertTrue(c.tokenize("hi"))
        self.assertGreater(self.steps(), before)

    def test_grpc_health_stays_open(self):
        with grpc.insecure_channel(self.server.address,
                                   options=[("grpc.enable_http_proxy", 0)]) as ch:
            reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(),
                                                         timeout=10)
        self.assertEqual(reply.status, health_pb2.HealthCheckResponse.SERVING)

    def test_http_paths(self):
        base = f"http://{self.server.http_address}/v1"
        good = openai.OpenAI(base_url=base, api_key=KEY, max_retries=0)
        r = good.completions.create(model=good.models.list().data[0].id, prompt=PROMPT,
                                    max_tokens=3, temperature=0)
        self.assertEqual(r.usage.completion_tokens, 3)
        bad = openai.OpenAI(base_url=base, api_key="wrong", max_retries=0)
        with self.assertRaises(openai.AuthenticationError):
            bad.models.list()
        with self.assertRaises(openai.AuthenticationError):
            bad.completions.create(model="x", prompt=PROMPT, max_tokens=3)
        for path in ("/health", "/ready", "/metrics"):
            self.assertEqual(http_get(self.server.http_address, path)[0], 200, path)
        status, body = http_get(self.server.http_address, "/tokenizer_info")
        self.assertEqual(status, 401)
        self.assertNotIn(KEY, body)

    def test_no_path_or_method_gets_past_the_key(self):
        addr = self.server.http_address
        body = b'{"prompt": "hi", "max_tokens": 1}'
        for path in ("/v1/completions?x=1", "/v1/chat/completions", "/tokenize", "/detokenize"):
            self.assertEqual(http_get(addr, path, method="POST", body=body)[0], 401, path)
        # Not routes at all: never served, with or without a key.
        for path in ("/v1/completions/", "/health/../v1/completions", "/v1//completions",
                     "/V1/completions"):
            self.assertEqual(http_get(addr, path, method="POST", body=body)[0], 404, path)
        for method in ("HEAD", "OPTIONS", "PUT", "DELETE"):
            self.assertIn(http_get(addr, "/v1/completions", method=method)[0], (404, 405), method)
        self.assertEqual(http_get(addr, "/v1/models", KEY, scheme="bearer")[0], 200)
        self.assertEqual(http_get(addr, "/v1/models", KEY, scheme="Basic")[0], 401)

    def test_cli_takes_the_key_from_the_environment(self):
        args = [BIN, "generate", "--addr", self.server.address, "--prompt", PROMPT,
                "--max-tokens", "3", "--temperature", "0", "--json"]
        env = {k: v for k, v in os.environ.items() if k != "TANDEM_API_KEY"}
        denied = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn("UNAUTHENTICATED", denied.stderr)
        ok = subprocess.run(args, capture_output=True, text=True, timeout=120,
                            env=dict(env, TANDEM_API_KEY=KEY))
        self.assertEqual(ok.returncode, 0, ok.stderr)


class ApiKeyFileTest(unittest.TestCase):
    def test_key_file_and_protected_metrics(self):
        with tempfile.NamedTemporaryFile("w", suffix=".key") as f:
            f.write(f"  {KEY}\n")
            f.flush()
            server = start("--api-key-file", f.name, "--api-key-metrics")
        try:
            self.assertEqual(http_get(server.http_address, "/metrics")[0], 401)
            self.assertEqual(http_get(server.http_address, "/metrics", KEY)[0], 200)
            self.assertEqual(http_get(server.http_address, "/ready")[0], 200)
            with sdk(server.address, KEY) as c:
                self.assertTrue(c.tokenize("hi"))
        finally:
            server.kill()

    def test_bad_key_flags_fail_at_start(self):
        with tempfile.NamedTemporaryFile("w", suffix=".key") as empty:
            cases = [(["--api-key", "a", "--api-key-file", empty.name], "not both"),
                     (["--api-key-file", empty.name], "is empty"),
                     (["--api-key-file", "/nonexistent/key"], "/nonexistent/key"),
                     (["--api-key", "two words"], "byte 0x20 at offset 3")]
            for flags, expected in cases:
                p = subprocess.run([COORDINATOR, "--local", "--model", MODEL, "--port", "0",
                                    "--http-port", "-1", *flags],
                                   capture_output=True, text=True, timeout=120)
                self.assertNotEqual(p.returncode, 0, flags)
                self.assertIn(expected, p.stderr, flags)


class InternalApiKeyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.worker = Server([WORKER, "--model", MODEL, "--port", "0", "--threads", "1",
                             "--speculative", "ngram", "--api-key", KEY], "tandem-worker")

    @classmethod
    def tearDownClass(cls):
        cls.worker.kill()

    def test_worker_and_draft_calls_need_the_key(self):
        with channel(self.worker.port) as ch:
            target = worker_pb2_grpc.TargetWorkerStub(ch)
            draft = draft_pb2_grpc.DraftStub(ch)
            calls = [lambda md: target.Info(worker_pb2.WorkerInfoRequest(), timeout=RPC_TIMEOUT,
                                            metadata=md),
                     lambda md: target.Health(worker_pb2.HealthRequest(), timeout=RPC_TIMEOUT,
                                              metadata=md),
                     lambda md: draft.Info(draft_pb2.DraftInfoRequest(), timeout=RPC_TIMEOUT,
                                           metadata=md)]
            for call in calls:
                for md in (None, [("authorization", "Bearer wrong-key")]):
                    with self.assertRaises(grpc.RpcError) as caught:
                        call(md)
                    self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
                call([("authorization", f"Bearer {KEY}")])  # the key opens it
            # Probes stay open.
            health = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(),
                                                          timeout=RPC_TIMEOUT)
            self.assertEqual(health.status, health_pb2.HealthCheckResponse.SERVING)

    def test_a_coordinator_with_the_key_uses_the_worker_and_its_draft(self):
        server = Server([COORDINATOR, "--model", MODEL, "--port", "0", "--http-port", "-1",
                         "--worker", self.worker.address, "--draft", self.worker.address,
                         "--api-key", KEY], "tandem-coordinator")
        try:
            with sdk(server.address, KEY) as c:
                result = c.generate(PROMPT, max_tokens=8, temperature=0)
                self.assertEqual(len(result.completions[0].token_ids), 8)
                info = c.model_info()
            self.assertTrue(all(g.healthy for g in info.worker_groups))
            self.assertEqual([d.healthy for d in info.draft_workers], [True])
        finally:
            server.kill()

    def test_a_coordinator_without_the_key_cannot_use_the_worker(self):
        p = subprocess.run([COORDINATOR, "--model", MODEL, "--port", "0", "--http-port", "-1",
                            "--worker", self.worker.address, "--connect-timeout-s", "3"],
                           capture_output=True, text=True, timeout=120)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("UNAUTHENTICATED", p.stderr)


if __name__ == "__main__":
    unittest.main()
