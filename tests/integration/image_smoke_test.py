#!/usr/bin/env python3
"""Smoke test of tandem's container image (deploy/image): built here with
deploy/build-image.sh (debootstrap + podman import + buildah bud, no
registry; warm reruns reuse its caches), then run with rootful podman as a
cluster of three containers — tandem-worker, tandem-draft (layer-skip draft)
and tandem-coordinator — each as the image's non-root user, read-only root
filesystem, no capabilities, the model directory mounted read-only:

- the image runs as uid 10001 and holds /opt/tandem/scripts/fetch-model.sh,
  which, run as the Kubernetes init container runs it, finds the mounted
  model verified (no download: that container has no network at all);
- grpc.health.v1 turns SERVING on all three, the coordinator's HTTP /ready
  answers 200;
- a greedy speculative Generate (its drafts from the draft container) and an
  HTTP completion return the tokens `tandem run` prints in a container of
  the same image;
- a TP=2 worker group in one container (`mpirun -np 2 tandem-worker`, as
  the gpu overlay's pods run one) turns SERVING and stops cleanly on SIGTERM;
- `podman stop -t GRACE` (SIGTERM, SIGKILL after GRACE s) of the coordinator
  while a stream is in flight: the stream still completes and the container
  exits 0 by itself within the grace period; then the same for the draft and
  the worker.

Networking: the containers share the host's network namespace (`--network
host`) and every process binds 127.0.0.1 (ports picked at run time and read
from each process's "listening on" line). A bridge network would give each
container a private-range address and forward published ports to it, which
DESIGN.md's rule forbids; with the host's namespace every packet stays on
127.0.0.1. Skips, saying why, where podman/buildah are missing and
scripts/setup-image-deps.sh cannot install them, or without root. Every wait
is bounded; the containers are removed at the end, pass or fail (and those
of an earlier run killed before its cleanup, at the start).

Env: TANDEM_SOURCE_DIR, TANDEM_BIN_DIR (the binaries that go into the image:
deploy/build-image.sh --build-dir is its parent), TANDEM_MODEL (the model on
the host; when missing, scripts/fetch-model.sh fetches it into models/),
TANDEM_IMAGE (optional: test this image instead of building one).
"""
import http.client
import json
import os
import shutil
import subprocess
import threading
import time
import unittest

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

import tandem_client
from grpc_channel import channel
from server_process import Server
from stream_client import client
from tandem_client.v1 import inference_pb2

SOURCE = os.environ["TANDEM_SOURCE_DIR"]
BIN_DIR = os.environ["TANDEM_BIN_DIR"]
ENV = dict(os.environ, CONTAINERS_CONF=os.path.join(SOURCE, "deploy/image/containers.conf"))
SETUP_TIMEOUT = 600   # seconds: installing the Debian packages
BUILD_TIMEOUT = 900   # a cold image build (debootstrap) took 2.5 min here
STARTUP_TIMEOUT = 120
GRACE = 20            # podman stop -t: seconds from SIGTERM to SIGKILL
FETCH_MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"  # what scripts/fetch-model.sh fetches
PROMPT = "The capital of France is"
NEW_TOKENS = 16


def run(args, timeout, env=ENV):
    """subprocess.run of `args`, output captured as text."""
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)


def podman(*args, timeout=60):
    """`podman ARGS`'s stdout; AssertionError naming the command if it fails."""
    p = run(["podman", *args], timeout)
    if p.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} exited {p.returncode}: {p.stderr[-2000:]}")
    return p.stdout


def wait_serving(port, timeout):
    """Blocks until grpc.health.v1 on 127.0.0.1:port reports SERVING for the
    server as a whole (Health.Watch: no polling); AssertionError after
    `timeout` s or when the call fails."""
    with channel(port, own_connection=True) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        last = None
        try:
            for r in stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=timeout):
                last = r.status
                if r.status == health_pb2.HealthCheckResponse.SERVING:
                    return
        except grpc.RpcError as e:
            raise AssertionError(f"health of 127.0.0.1:{port}: {e.code()} {e.details()} "
                                 f"(last status {last})") from e
    raise AssertionError(f"health of 127.0.0.1:{port} ended at {last} without SERVING")


def http_get(address, path, timeout=30):
    """(status, body) of GET `path` on `address` (HOST:PORT), no proxy."""
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def http_post_json(address, path, body, timeout=120):
    """(status, parsed JSON) of POST `body` as JSON to `path` on `address`."""
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, json.loads(r.read().decode())
    finally:
        conn.close()


class ImageSmokeTest(unittest.TestCase):
    """The test methods run in name order (unittest sorts them): the stop
    test comes last because it ends the cluster."""

    @classmethod
    def setUpClass(cls):
        cls.prefix = f"tandem-smoke-{os.getpid()}"
        cls.containers = []
        cls.servers = []
        cls.addClassCleanup(cls.remove_containers)
        cls.require_podman()
        cls.remove_orphans()
        cls.image = os.environ.get("TANDEM_IMAGE") or cls.build_image()
        cls.models_dir, cls.model_name = cls.find_model()
        cls.worker = cls.start("worker", ["tandem-worker", "--model", cls.model_path(),
                                          "--host", "127.0.0.1", "--port", "0", "--threads", "1",
                                          "--kv-cache-bytes", str(64 << 20)])
        cls.draft = cls.start("draft", ["tandem-draft", "--speculative", "layer-skip:8",
                                        "--model", cls.model_path(), "--host", "127.0.0.1",
                                        "--port", "0", "--threads", "1",
                                        "--kv-cache-bytes", str(32 << 20)])
        cls.coordinator = cls.start("coordinator", [
            "tandem-coordinator", "--model", cls.model_path(), "--host", "127.0.0.1",
            "--port", "0", "--http-port", "0", "--worker", cls.worker.address,
            "--draft", cls.draft.address])

    @classmethod
    def require_podman(cls):
        """Installs the image tools (scripts/setup-image-deps.sh) or skips."""
        if os.geteuid() != 0:
            raise unittest.SkipTest("image smoke test: needs root (rootful podman, debootstrap); "
                                    f"running as uid {os.geteuid()}")
        setup = run(["bash", os.path.join(SOURCE, "scripts/setup-image-deps.sh")], SETUP_TIMEOUT)
        missing = [t for t in ("podman", "buildah", "debootstrap") if not shutil.which(t)]
        if setup.returncode != 0 or missing:
            raise unittest.SkipTest(
                f"image smoke test: {', '.join(missing) or 'image tools'} missing and "
                f"scripts/setup-image-deps.sh could not install them: {setup.stderr[-500:]}")

    @classmethod
    def remove_orphans(cls):
        """Removes the containers of earlier runs whose test process is gone
        (killed at its CTest timeout before its cleanup ran)."""
        names = podman("ps", "--all", "--format", "{{.Names}}", "--filter",
                       "name=^tandem-smoke-").split()
        orphans = []
        for name in names:
            pid = name.split("-")[2]
            if not pid.isdigit():
                continue
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                orphans.append(name)
            except PermissionError:
                pass  # alive, another user's
        if orphans:
            podman("rm", "--force", "--ignore", "--time", "0", *orphans, timeout=120)

    @classmethod
    def build_image(cls):
        """deploy/build-image.sh of TANDEM_BIN_DIR's build; the image's name."""
        script = os.path.join(SOURCE, "deploy/build-image.sh")
        started = time.monotonic()
        p = run(["bash", script, "--build-dir", os.path.dirname(os.path.abspath(BIN_DIR))],
                BUILD_TIMEOUT)
        if p.returncode != 0:
            raise AssertionError(f"deploy/build-image.sh exited {p.returncode}: {p.stderr[-3000:]}")
        print(f"image built in {time.monotonic() - started:.0f} s", flush=True)
        return p.stdout.strip().splitlines()[-1]

    @classmethod
    def find_model(cls):
        """(host directory, file name) of the model: TANDEM_MODEL, else what
        scripts/fetch-model.sh fetches into models/."""
        model = os.environ.get("TANDEM_MODEL", "")
        if not os.path.isfile(model):
            p = run(["bash", os.path.join(SOURCE, "scripts/fetch-model.sh")], SETUP_TIMEOUT)
            if p.returncode != 0:
                raise AssertionError(f"scripts/fetch-model.sh exited {p.returncode} "
                                     f"(TANDEM_MODEL '{model}' is no file): {p.stderr[-2000:]}")
            model = p.stdout.strip().splitlines()[-1]
        model = os.path.abspath(model)
        return os.path.dirname(model), os.path.basename(model)

    @classmethod
    def model_path(cls):
        return "/models/" + cls.model_name

    @classmethod
    def run_args(cls, name, command, network="host"):
        """`podman run` of `command` in the image as the pods run it: the
        image's user, read-only root (podman mounts tmpfs on /tmp), no
        capabilities, no privilege escalation, the models read-only."""
        return ["podman", "run", "--name", name, "--pull", "never", "--network", network,
                "--read-only", "--cap-drop", "all", "--security-opt", "no-new-privileges",
                "-v", f"{cls.models_dir}:/models:ro", cls.image, *command]

    @classmethod
    def start(cls, role, command, name=None):
        """A container running `command` (a tandem server binary, `name`
        unless it is the first word, on 127.0.0.1 --port 0), attached: its
        "listening on" line gives the address."""
        container = f"{cls.prefix}-{role}"
        cls.containers.append(container)
        server = Server(cls.run_args(container, command), name or command[0], env=ENV,
                        startup_timeout=STARTUP_TIMEOUT)
        cls.servers.append(server)
        return server

    @classmethod
    def remove_containers(cls):
        for server in cls.servers:
            server.kill()  # the attached `podman run` clients
        if cls.containers:
            run(["podman", "rm", "--force", "--ignore", "--time", "0", *cls.containers], 120)

    def inspect(self, name):
        """`podman inspect` of container `name` (a dict)."""
        return json.loads(podman("inspect", "--type", "container", name))[0]

    def test_a_image_user_and_fetch_script(self):
        self.assertEqual(self.inspect(f"{self.prefix}-worker")["Config"]["User"], "10001:10001")
        uids = podman("top", f"{self.prefix}-worker", "huser").split()[1:]
        self.assertEqual(uids, ["10001"], "the worker's processes on the host")
        # The init container's step; --network none: it must not download.
        self.containers.append(f"{self.prefix}-fetch")
        p = run(self.run_args(f"{self.prefix}-fetch",
                              ["bash", "/opt/tandem/scripts/fetch-model.sh"], network="none"), 120)
        if self.model_name == FETCH_MODEL_NAME:
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout.strip().splitlines()[-1], self.model_path())
        else:  # another model: the script looks for its own, which is not there
            self.assertNotEqual(p.returncode, 0, p.stdout)

    def test_b_health_and_ready(self):
        for server in (self.worker, self.draft, self.coordinator):
            self.assertTrue(server.address.startswith("127.0.0.1:"), server.address)
            wait_serving(server.port, STARTUP_TIMEOUT)
        self.assertTrue(self.coordinator.http_address.startswith("127.0.0.1:"))
        deadline = time.monotonic() + STARTUP_TIMEOUT
        status, body = http_get(self.coordinator.http_address, "/ready")
        while status != 200 and time.monotonic() < deadline:
            time.sleep(0.2)  # /ready has no push form; bounded by the deadline
            status, body = http_get(self.coordinator.http_address, "/ready")
        self.assertEqual(status, 200, body)

    def expected_tokens(self):
        """Greedy tokens of PROMPT from `tandem run` in a container of the image."""
        name = f"{self.prefix}-run"
        self.containers.append(name)
        p = run(self.run_args(name, ["tandem", "run", "--model", self.model_path(), "--prompt",
                                     PROMPT, "--max-tokens", str(NEW_TOKENS), "--temperature", "0",
                                     "--ignore-eos", "--json", "--threads", "1"],
                              network="none"), 120)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        return json.loads(p.stdout.strip().splitlines()[-1])["token_ids"]

    def test_c_generate(self):
        expected = self.expected_tokens()
        self.assertEqual(len(expected), NEW_TOKENS)
        with client(self.coordinator.port, timeout=120) as c:
            info = c.model_info()
            self.assertEqual([(g.address, g.healthy) for g in info.worker_groups],
                             [(self.worker.address, True)])
            self.assertEqual([(d.address, d.healthy) for d in info.draft_workers],
                             [(self.draft.address, True)])
            request = tandem_client.build_request(PROMPT, temperature=0, max_tokens=NEW_TOKENS,
                                                  ignore_eos=True)
            request.decoding_mode = inference_pb2.DECODING_MODE_SPECULATIVE
            # layer-skip drafts only come from the draft container.
            request.speculative.draft = "layer-skip"
            request.speculative.num_speculative_tokens = 3
            r = c.generate(request)
            self.assertEqual(r.completions[0].token_ids, expected, "gRPC speculative generate")
            self.assertEqual(r.completions[0].finish_reason, "length")
            drafted = sum(g.num_draft_tokens for g in c.model_info().worker_groups)
            self.assertGreater(drafted, 0, "the draft container proposed no tokens")

        status, body = http_post_json(self.coordinator.http_address, "/v1/completions", {
            "prompt": PROMPT, "max_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True,
            "logprobs": 1, "return_tokens_as_token_ids": True})
        self.assertEqual(status, 200, body)
        tokens = body["choices"][0]["logprobs"]["tokens"]
        self.assertEqual([int(t.split(":", 1)[1]) for t in tokens], expected, "HTTP completion")

    def test_d_mpirun_worker_group(self):
        """A TP=2 worker group as the gpu overlay's pods run one: mpirun -np 2
        tandem-worker in one container (Open MPI from the image, ranks as uid
        10001 on a read-only root)."""
        group = self.start("tp2", ["mpirun", "-np", "2", "--oversubscribe", "-x",
                                   "OMPI_MCA_mpi_yield_when_idle=1", "tandem-worker", "--model",
                                   self.model_path(), "--host", "127.0.0.1", "--port", "0",
                                   "--threads", "1", "--kv-cache-bytes", str(32 << 20)],
                           name="tandem-worker")
        wait_serving(group.port, STARTUP_TIMEOUT)
        # mpirun forwards SIGTERM to the ranks (rank 0 drains, then tells the
        # others to stop) but exits 1 for having been signalled: required is
        # that it ended by itself in time, rank 0 having stopped cleanly.
        state = self.stop(group, f"{self.prefix}-tp2", exit_codes=(0, 1))
        self.assertIn("tensor-parallel size 2", group.stderr(), state)
        self.assertIn("tandem-worker: stopped", group.stderr(), state)

    def stop(self, server, name, exit_codes=(0,)):
        """`podman stop -t GRACE`; asserts the container exited by itself
        (with one of `exit_codes`, not SIGKILLed) within the grace period.
        Returns its State."""
        started = time.monotonic()
        podman("stop", "--time", str(GRACE), name, timeout=GRACE + 60)
        took = time.monotonic() - started
        server.proc.wait(30)  # the attached `podman run`: then its stderr is complete
        state = self.inspect(name)["State"]
        self.assertEqual(state["Status"], "exited", state)
        self.assertIn(state["ExitCode"], exit_codes, f"{name} after SIGTERM: {state}; "
                      f"stderr: {server.stderr()[-2000:]}")
        self.assertFalse(state.get("OOMKilled"), state)
        self.assertLess(took, GRACE, f"{name} took {took:.1f} s to stop (grace {GRACE} s)")
        print(f"{name}: exit {state['ExitCode']} {took:.1f} s after SIGTERM", flush=True)
        return state

    def test_z_sigterm_drains(self):
        # A stream in flight when SIGTERM arrives still completes.
        with client(self.coordinator.port, timeout=120, own_connection=True) as c:
            stream = iter(c.stream(PROMPT, temperature=0, max_tokens=256, ignore_eos=True))
            tokens, finish = 0, ""
            while tokens == 0:  # until the request is running
                delta = next(stream)
                tokens, finish = tokens + len(delta.token_ids), delta.finish_reason
            stop_error = []

            def stop_coordinator():
                try:
                    self.stop(self.coordinator, f"{self.prefix}-coordinator")
                except BaseException as e:  # reported below, on the test's thread
                    stop_error.append(e)

            stopper = threading.Thread(target=stop_coordinator)
            stopper.start()
            tokens_at_stop = tokens
            for delta in stream:
                tokens, finish = tokens + len(delta.token_ids), delta.finish_reason or finish
            stopper.join(GRACE + 90)
        self.assertFalse(stopper.is_alive(), "podman stop of the coordinator did not return")
        if stop_error:
            raise stop_error[0]
        self.assertEqual((finish, tokens), ("length", 256),
                         "the in-flight stream across the coordinator's drain")
        print(f"podman stop began {tokens_at_stop} tokens into the 256-token stream", flush=True)
        for role, server in (("draft", self.draft), ("worker", self.worker)):
            self.stop(server, f"{self.prefix}-{role}")


if __name__ == "__main__":
    unittest.main()
