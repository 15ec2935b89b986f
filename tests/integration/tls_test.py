#!/usr/bin/env python3
"""tandem-coordinator --tls-cert/--tls-key (with --api-key): both public ports
speak TLS only. A CA and a server certificate for 127.0.0.1 are made here with
the openssl CLI. Checked: grpcio over ssl_channel_credentials(the CA) generates
tokens and sees health SERVING; the openai SDK completes over https:// with
its httpx client verifying against the CA (and fails with the default roots);
/health, /ready, /metrics answer on the same TLS listener; a plaintext gRPC
client fails UNAVAILABLE and a plain-HTTP client gets a 400 naming https://
(garbage bytes just a close), and after each the server still serves TLS; a
wrong or missing key is UNAUTHENTICATED / 401 over TLS; the Python SDK (sync
and asyncio) with tls_ca works, without it or with another CA it does not;
the CLI (the C++ SDK) takes --tls-ca or TANDEM_TLS_CA; `tandem up` passes
--tls-cert/--tls-key through (a self-signed certificate, its own CA); bad
flags or files fail at start-up naming the flag or path, without a crash.
The internal ports: a tandem-worker with --tls-cert/--tls-key serves a
coordinator started with --internal-tls-ca (generation, its n-gram Draft
service healthy); without the CA the coordinator cannot start.
Every wait is bounded.

Env: TANDEM_COORDINATOR_BIN, TANDEM_BIN, TANDEM_BIN_DIR, TANDEM_MODEL.
"""
import asyncio
import os
import signal
import socket
import ssl
import subprocess
import tempfile
import unittest
import urllib.error
import urllib.request

import grpc
import openai
import tandem_client
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tandem.v1 import common_pb2, inference_pb2, inference_pb2_grpc

from server_process import Server
from up_test import Launcher

COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
BIN = os.environ["TANDEM_BIN"]
BIN_DIR = os.environ["TANDEM_BIN_DIR"]
MODEL = os.environ["TANDEM_MODEL"]
KEY = "tk-tls-test-3b9d1c"
PROMPT = "The capital of France is"
RPC_TIMEOUT = 30
NO_PROXY = [("grpc.enable_http_proxy", 0)]


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certificates(d):
    """In directory d: ca.pem/ca.key (a CA), server.pem/server.key (for
    127.0.0.1 and localhost, signed by the CA), self.pem/self.key (self-signed
    for 127.0.0.1), other.key (a key of no certificate here)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=tandem test CA", cwd=d)
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1",
            cwd=d)
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-set_serial", "2", "-days", "2", "-extfile", "server.ext", "-out", "server.pem",
            cwd=d)
    openssl("req", "-x509", *ec, "-keyout", "self.key", "-out", "self.pem", "-days", "2",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", cwd=d)
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-out", "other.key", cwd=d)
    return {name: os.path.join(d, name) for name in
            ("ca.pem", "server.pem", "server.key", "self.pem", "self.key", "other.key")}


def read(path):
    with open(path, "rb") as f:
        return f.read()


def tls_channel(address, ca):
    return grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=read(ca)),
                               options=NO_PROXY)


def https(url, ca, key=None, method="GET"):
    """(status, body) of METHOD url over TLS verified against the CA file
    `ca`, ignoring any proxy in the environment (traffic stays on loopback)."""
    request = urllib.request.Request(url, method=method)
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=ca)))
    try:
        with opener.open(request, timeout=RPC_TIMEOUT) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def openai_client(base_url, key, ca=None):
    """The openai SDK on its httpx client verifying against the CA file `ca`
    (None: the default roots)."""
    verify = ssl.create_default_context(cafile=ca) if ca else True
    return openai.OpenAI(base_url=base_url, api_key=key, max_retries=0,
                         http_client=openai.DefaultHttpxClient(verify=verify, trust_env=False,
                                                               timeout=RPC_TIMEOUT))


def sdk(address, **kwargs):
    return tandem_client.Client(address, timeout=RPC_TIMEOUT,
                                backoff=tandem_client.Backoff(max_retries=0), options=NO_PROXY,
                                **kwargs)


def coordinator_run(flags):
    """A coordinator that must fail at start-up: (exit code, stderr)."""
    p = subprocess.run([COORDINATOR, "--local", "--model", MODEL, "--port", "0",
                        "--http-port", "-1", *flags], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


class TlsClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.files = make_certificates(cls.tmp.name)
        cls.ca = cls.files["ca.pem"]
        cls.server = Server([COORDINATOR, "--local", "--model", MODEL, "--port", "0",
                             "--threads", "2", "--api-key", KEY,
                             "--tls-cert", cls.files["server.pem"],
                             "--tls-key", cls.files["server.key"]], "tandem-coordinator")
        cls.addr = cls.server.address
        cls.https = f"https://{cls.server.http_address}"

    @classmethod
    def tearDownClass(cls):
        cls.server.kill()
        cls.tmp.cleanup()

    def assert_serves_tls(self):
        """The server is alive and still answers a TLS call."""
        self.assertIsNone(self.server.proc.poll(), self.server.stderr()[-2000:])
        with sdk(self.addr, tls_ca=self.ca, api_key=KEY) as c:
            self.assertTrue(c.tokenize("hi"))

    def test_grpcio_generates_over_tls(self):
        with tls_channel(self.addr, self.ca) as ch:
            stub = inference_pb2_grpc.InferenceStub(ch)
            request = inference_pb2.GenerateRequest(
                text=PROMPT, sampling=common_pb2.SamplingParams(max_tokens=4, temperature=0))
            r = stub.Generate(request, timeout=RPC_TIMEOUT,
                              metadata=[("authorization", f"Bearer {KEY}")])
            self.assertEqual(len(r.completions[0].token_ids), 4)
            streamed = [t for m in stub.GenerateStream(
                request, timeout=RPC_TIMEOUT, metadata=[("authorization", f"Bearer {KEY}")])
                for d in m.deltas for t in d.token_ids]
            self.assertEqual(streamed, list(r.completions[0].token_ids))
            health = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(),
                                                          timeout=RPC_TIMEOUT)
            self.assertEqual(health.status, health_pb2.HealthCheckResponse.SERVING)

    def test_wrong_or_missing_key_over_tls(self):
        with tls_channel(self.addr, self.ca) as ch:
            stub = inference_pb2_grpc.InferenceStub(ch)
            for metadata in ([("authorization", "Bearer wrong")], []):
                with self.assertRaises(grpc.RpcError) as e:
                    stub.Tokenize(inference_pb2.TokenizeRequest(text="hi"), timeout=RPC_TIMEOUT,
                                  metadata=metadata)
                self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        status, body = https(f"{self.https}/v1/models", self.ca, key="wrong")
        self.assertEqual(status, 401)
        self.assertNotIn(KEY, body)
        self.assertEqual(https(f"{self.https}/tokenizer_info", self.ca)[0], 401)
        with self.assertRaises(openai.AuthenticationError):
            openai_client(f"{self.https}/v1", "wrong", self.ca).models.list()

    def test_plaintext_grpc_fails_cleanly(self):
        with grpc.insecure_channel(self.addr, options=NO_PROXY) as ch:
            with self.assertRaises(grpc.RpcError) as e:
                inference_pb2_grpc.InferenceStub(ch).Tokenize(
                    inference_pb2.TokenizeRequest(text="hi"), timeout=10,
                    metadata=[("authorization", f"Bearer {KEY}")])
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assert_serves_tls()

    def test_openai_sdk_over_https(self):
        client = openai_client(f"{self.https}/v1", KEY, self.ca)
        model = client.models.list().data[0].id
        r = client.completions.create(model=model, prompt=PROMPT, max_tokens=3, temperature=0)
        self.assertEqual(r.usage.completion_tokens, 3)
        chunks = list(client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=3,
            temperature=0, stream=True))
        self.assertTrue(any(c.choices and c.choices[0].delta.content for c in chunks))
        # The certificate is checked: the system's roots do not know this CA.
        with self.assertRaises(openai.APIConnectionError):
            openai_client(f"{self.https}/v1", KEY).models.list()

    def test_probes_on_the_tls_listener(self):
        for path in ("/health", "/ready", "/metrics"):
            self.assertEqual(https(f"{self.https}{path}", self.ca)[0], 200, path)

    def test_plain_http_fails_cleanly(self):
        plain = f"http://{self.server.http_address}/v1/models"
        request = urllib.request.Request(plain, headers={"Authorization": f"Bearer {KEY}"})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with self.assertRaises(urllib.error.HTTPError) as e:
            opener.open(request, timeout=RPC_TIMEOUT)
        self.assertEqual(e.exception.code, 400)
        self.assertIn("https://", e.exception.read().decode())
        # Neither HTTP nor TLS: the connection is closed, nothing else.
        host, port = self.server.http_address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=RPC_TIMEOUT) as s:
            s.sendall(b"\x00\x01\x02garbage\r\n\r\n")
            try:
                self.assertEqual(s.recv(4096), b"")
            except ConnectionResetError:
                pass  # closed with our bytes unread: as clean
        # A TLS client that refuses the certificate: the handshake fails on its side.
        context = ssl.create_default_context()  # the system's roots, not our CA
        with socket.create_connection((host, int(port)), timeout=RPC_TIMEOUT) as s:
            with self.assertRaises(ssl.SSLCertVerificationError):
                context.wrap_socket(s, server_hostname="127.0.0.1")
        self.assertEqual(https(f"{self.https}/v1/models", self.ca, key=KEY)[0], 200)
        self.assert_serves_tls()

    def test_python_sdk_with_the_ca(self):
        with sdk(self.addr, tls_ca=self.ca, api_key=KEY) as c:
            r = c.generate(PROMPT, max_tokens=4, temperature=0)
            self.assertEqual(len(r.completions[0].token_ids), 4)
            streamed = [t for d in c.stream(PROMPT, max_tokens=4, temperature=0)
                        for t in d.token_ids]
            self.assertEqual(streamed, list(r.completions[0].token_ids))
            self.assertTrue(c.health())
        # Plaintext, or TLS trusting another CA: no connection.
        for kwargs in ({}, {"tls_ca": self.files["self.pem"]}):
            with sdk(self.addr, api_key=KEY, **kwargs) as c:
                with self.assertRaises(tandem_client.Unavailable, msg=str(kwargs)):
                    c.tokenize("hi")
        with self.assertRaises(OSError):
            tandem_client.Client(self.addr, tls_ca=os.path.join(self.tmp.name, "missing.pem"))

        async def tokenize():
            async with tandem_client.AsyncClient(self.addr, tls_ca=self.ca, api_key=KEY,
                                                 timeout=RPC_TIMEOUT, options=NO_PROXY) as c:
                return await c.tokenize("hi")

        self.assertTrue(asyncio.run(tokenize()))

    def test_cli_takes_the_ca(self):
        generate = [BIN, "generate", "--addr", self.addr, "--prompt", PROMPT, "--max-tokens",
                    "3", "--temperature", "0", "--json"]
        env = {k: v for k, v in os.environ.items() if k not in ("TANDEM_TLS_CA", "TANDEM_API_KEY")}
        env["TANDEM_API_KEY"] = KEY
        runs = {
            "flag": subprocess.run([*generate, "--tls-ca", self.ca], capture_output=True,
                                   text=True, timeout=120, env=env),
            "env": subprocess.run(generate, capture_output=True, text=True, timeout=120,
                                  env=dict(env, TANDEM_TLS_CA=self.ca)),
        }
        for how, p in runs.items():
            self.assertEqual(p.returncode, 0, f"{how}: {p.stderr}")
            self.assertIn('"token_ids"', p.stdout, how)
        plaintext = subprocess.run(generate, capture_output=True, text=True, timeout=120, env=env)
        self.assertNotEqual(plaintext.returncode, 0)
        self.assertIn("UNAVAILABLE", plaintext.stderr)
        missing = subprocess.run([*generate, "--tls-ca", "/nonexistent/ca.pem"],
                                 capture_output=True, text=True, timeout=120, env=env)
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn("/nonexistent/ca.pem", missing.stderr)
        health = subprocess.run([BIN, "health", "--addr", self.addr, "--tls-ca", self.ca],
                                capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual((health.returncode, health.stdout.strip()), (0, "SERVING"),
                         health.stderr)


class TlsStartupTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.files = make_certificates(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_bad_flags_and_files_fail_at_start(self):
        f = self.files
        missing = os.path.join(self.tmp.name, "missing.pem")
        cases = [(["--tls-cert", f["server.pem"]], "needs --tls-key"),
                 (["--tls-key", f["server.key"]], "needs --tls-cert"),
                 (["--tls-cert", missing, "--tls-key", f["server.key"]], missing),
                 (["--tls-cert", f["server.pem"], "--tls-key", missing], missing),
                 (["--tls-cert", f["server.key"], "--tls-key", f["server.key"]],
                  f"--tls-cert '{f['server.key']}' holds no PEM certificate"),
                 (["--tls-cert", f["server.pem"], "--tls-key", f["other.key"]],
                  f"--tls-key '{f['other.key']}' is not the private key of the certificate")]
        for flags, expected in cases:
            code, stderr = coordinator_run(flags)
            self.assertEqual(code, 1, f"{flags}: a clean error exit, not a crash: {stderr}")
            self.assertIn(expected, stderr, flags)

    def test_up_passes_tls_through(self):
        f = self.files
        p = subprocess.run([BIN, "up", "--model", MODEL, "--tls-cert", f["self.pem"]],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("needs --tls-key", p.stderr)
        up = Launcher(["--model", MODEL, "--tp", "1", "--no-draft", "--bin-dir", BIN_DIR,
                       "--grace-s", "10", "--worker-arg", "--threads=1",
                       "--tls-cert", f["self.pem"], "--tls-key", f["self.key"]])
        try:
            self.assertIsNone(up.error, up.error)
            self.assertRegex(up.proc.stdout.readline(), r"^tandem up: OpenAI-compatible HTTP on "
                                                        r"https://\S+/v1$")
            with sdk(up.address, tls_ca=f["self.pem"]) as c:
                r = c.generate(PROMPT, max_tokens=2, temperature=0)
                self.assertEqual(len(r.completions[0].token_ids), 2)
            with sdk(up.address) as c:
                with self.assertRaises(tandem_client.Unavailable):
                    c.tokenize("hi")
            up.proc.send_signal(signal.SIGTERM)
            self.assertEqual(up.proc.wait(60), 0, up.stderr()[-3000:])
        finally:
            up.kill()


class InternalTlsTest(unittest.TestCase):
    """The internal ports over TLS: a tandem-worker serving TargetWorker and
    Draft with --tls-cert / --tls-key, a coordinator trusting the CA with
    --internal-tls-ca; without it the coordinator cannot connect, and a
    plaintext client of the worker fails."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.files = make_certificates(cls.tmp.name)
        cls.worker = Server([os.path.join(BIN_DIR, "tandem-worker"), "--model", MODEL, "--port",
                             "0", "--threads", "1", "--speculative", "ngram",
                             "--tls-cert", cls.files["server.pem"],
                             "--tls-key", cls.files["server.key"]], "tandem-worker")

    @classmethod
    def tearDownClass(cls):
        cls.worker.kill()
        cls.tmp.cleanup()

    def test_coordinator_with_the_ca_generates_and_drafts(self):
        coordinator = Server([COORDINATOR, "--model", MODEL, "--port", "0", "--http-port", "-1",
                              "--worker", self.worker.address, "--draft", self.worker.address,
                              "--internal-tls-ca", self.files["ca.pem"]], "tandem-coordinator")
        try:
            with sdk(coordinator.address) as c:
                r = c.generate(PROMPT, max_tokens=4, temperature=0)
                self.assertEqual(len(r.completions[0].token_ids), 4)
                info = c.model_info()
            self.assertTrue(all(g.healthy for g in info.worker_groups))
            self.assertEqual([d.healthy for d in info.draft_workers], [True])
        finally:
            coordinator.kill()

    def test_without_the_ca_nothing_connects(self):
        p = subprocess.run([COORDINATOR, "--model", MODEL, "--port", "0", "--http-port", "-1",
                            "--worker", self.worker.address, "--connect-timeout-s", "3"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(self.worker.address, p.stderr)
        with grpc.insecure_channel(self.worker.address, options=NO_PROXY) as ch:
            with self.assertRaises(grpc.RpcError) as caught:
                health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
            self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)
        code, stderr = coordinator_run(["--internal-tls-ca", self.files["server.key"]])
        self.assertEqual(code, 1, stderr)
        self.assertIn(f"--internal-tls-ca '{self.files['server.key']}' holds no PEM certificate",
                      stderr)


if __name__ == "__main__":
    unittest.main()
