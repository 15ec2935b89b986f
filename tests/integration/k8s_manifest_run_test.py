#!/usr/bin/env python3
"""Integration test of deploy/k8s by running it: the cpu overlay's pods as
local processes through deploy/k8s/manifest_run.py (a local kubelet: the
rendered commands, args and env, ports remapped, pod IPs 127.0.0.N, probes
polled as the kubelet polls them, Services through a DNS server and a
forwarder on 127.0.0.1):

- every pod turns Ready (bounded); both worker replicas and the draft join
  the coordinator through their headless Services;
- greedy requests through the coordinator Service, gRPC GenerateStream and
  OpenAI HTTP /v1/completions, equal `tandem run` token for token, and both
  worker pods ran steps;
- liveness probes keep passing, no container restarted;
- deleting every pod while a stream is in flight: each pod leaves its
  Services at once, preStop (`sleep 5`, as written) runs, then SIGTERM, and
  every process exits 0 by itself within its grace; the stream completes;
- the runner's own contract: a process ignoring SIGTERM is SIGKILLed when
  the grace (counted from preStop's start) ends, also when preStop overruns
  it (then kubelet's 2 s minimum); one that exits on SIGTERM is not killed;
- a readiness probe on the wrong port never turns its pod Ready, no Service
  lists it, and the runner's report names the probe (bounded).
Only 127.0.0.0/8 is used; the model comes from TANDEM_MODEL's folder (the
fetch-model init container verifies it there and downloads nothing).

Env: TANDEM_SOURCE_DIR, TANDEM_BIN_DIR, TANDEM_BIN, TANDEM_MODEL.
"""
import copy
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import generation_check
from stream_client import generate_concurrently, generate_stream, model_info

SOURCE = os.environ["TANDEM_SOURCE_DIR"]
BIN_DIR = os.environ["TANDEM_BIN_DIR"]
BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
sys.path.insert(0, os.path.join(SOURCE, "deploy/k8s"))
import manifest_run  # noqa: E402

READY_TIMEOUT = 180     # seconds for every pod to turn Ready
JOIN_TIMEOUT = 60       # for the coordinator to find every ready pod (re-resolves every 5 s)
RUN_TIMEOUT = 300       # for a batch of requests
LIVENESS_TIMEOUT = 45   # for every liveness probe (period 10 s) to pass once more
IN_FLIGHT_S = 1.0       # the stream running when the pods are deleted lasts about this
                        # long: well inside the 5 s preStop, during which workers serve
STORY = "Write a long story about a lighthouse keeper."
WRONG_PORT_WAIT = 15    # how long the mis-probed pod is given (its probes tick every 1 s)


def k8s_venv_bin():
    """The bin folder of .venv-k8s (kubectl, PyYAML), made if missing."""
    p = subprocess.run(["bash", os.path.join(SOURCE, "scripts/setup-k8s-venv.sh")],
                       capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise AssertionError(f"setup-k8s-venv.sh failed: {p.stderr[-2000:]}")
    return p.stdout.strip().splitlines()[-1]


def deployment(docs, name):
    return next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == name)


def shell_deployment(name, script, grace, prestop_s):
    """A one-pod Deployment running `bash -c script` with an exec readiness
    probe, a `sleep prestop_s` preStop and the given grace (the runner's own
    tests: no tandem binary involved)."""
    container = {"name": "main", "image": "tandem", "command": ["bash", "-c", script],
                 "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1},
                 "lifecycle": {"preStop": {"exec": {"command": ["sleep", str(prestop_s)]}}}}
    labels = {"app.kubernetes.io/name": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"terminationGracePeriodSeconds": grace,
                                           "containers": [container]}}}}


def http_json(address, method, path, body=None):
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=RUN_TIMEOUT)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, json.loads(r.read().decode())
    finally:
        conn.close()


class ManifestRunTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        venv_bin = k8s_venv_bin()
        cls.docs = manifest_run.render(os.path.join(SOURCE, "deploy/k8s/overlays/cpu"), venv_bin)
        models = os.path.dirname(os.path.abspath(MODEL))
        cls.image_map = manifest_run.default_image_map(SOURCE, BIN_DIR, models)
        args = deployment(cls.docs, "tandem-coordinator")["spec"]["template"]["spec"][
            "containers"][0]["args"]
        wanted = os.path.basename(next(a for a in args if a.startswith("--model=")))
        if not os.path.isfile(os.path.join(models, wanted)):
            raise AssertionError(f"the manifests' model {wanted} is not in {models} "
                                 "(scripts/fetch-model.sh puts it there)")

    def start_cluster(self, docs):
        workdir = tempfile.TemporaryDirectory(prefix="manifest-run-")
        self.addCleanup(workdir.cleanup)
        cluster = manifest_run.Cluster(docs, self.image_map, workdir.name)
        self.addCleanup(cluster.close)  # runs first: nothing outlives the test
        cluster.start()
        return cluster

    # --- the cpu overlay, end to end ---------------------------------------

    def test_cpu_overlay_serves_then_drains(self):
        cluster = self.start_cluster(self.docs)
        workers = [p for p in cluster.pods if p.name.startswith("tandem-worker-")]
        self.assertGreaterEqual(len(workers), 2, "the base runs several worker groups")
        took = cluster.wait_ready(READY_TIMEOUT)
        print(f"all {len(cluster.pods)} pods Ready in {took:.1f} s", file=sys.stderr)
        grpc_port = int(cluster.service_address("tandem-coordinator", "grpc").rsplit(":")[1])
        self.wait_joined(cluster, grpc_port)
        self.check_greedy(cluster, grpc_port)
        self.check_liveness(cluster)
        self.check_drain(cluster, grpc_port)

    def wait_joined(self, cluster, grpc_port):
        """ModelInfo through the Service lists every worker pod and the draft
        pod (their headless Services resolve to each ready pod), healthy."""
        groups = {f"{ip}:{port}" for ip, port in cluster.endpoints("tandem-workers")}
        drafts = {f"{ip}:{port}" for ip, port in cluster.endpoints("tandem-drafts")}
        self.assertGreaterEqual(len(groups), 2, cluster.report())
        deadline = time.monotonic() + JOIN_TIMEOUT
        while True:
            info = model_info(grpc_port)
            got_groups = {g.address for g in info.worker_groups if g.healthy}
            got_drafts = {d.address for d in info.draft_workers if d.healthy}
            if got_groups == groups and got_drafts == drafts:
                return
            if time.monotonic() > deadline:
                self.fail(f"coordinator has groups {got_groups}, drafts {got_drafts}; want "
                          f"{groups}, {drafts} within {JOIN_TIMEOUT} s\n{cluster.report()}")
            time.sleep(0.2)

    def steps_by_group(self, grpc_port):
        return {g.address: g.num_steps for g in model_info(grpc_port).worker_groups}

    def check_greedy(self, cluster, grpc_port):
        """Greedy output through the coordinator Service equals `tandem run`,
        over gRPC (8 concurrent streams, spread over both workers) and HTTP."""
        requests = generation_check.mixed_requests(count=8, seed=5)
        path = generation_check.write_temp(generation_check.jsonl(requests))
        try:
            code, out, err = generation_check.run_cli(
                BIN, ["run", "--model", MODEL, "--requests", path, "--json"], RUN_TIMEOUT)
        finally:
            os.unlink(path)
        self.assertEqual(code, 0, err)
        want = [line["token_ids"] for line in generation_check.parse_lines(out)]
        before = self.steps_by_group(grpc_port)
        results = generate_concurrently(grpc_port, requests, RUN_TIMEOUT)
        for i, r in enumerate(results):
            self.assertEqual((r.status.name if r.status else None, r.token_ids),
                             ("OK", want[i]), f"request {i}: gRPC vs tandem run: {r.details}")
        after = self.steps_by_group(grpc_port)
        for group in after:
            self.assertGreater(after[group], before.get(group, 0), f"no step ran on {group}")
        text = next(i for i, r in enumerate(requests) if "prompt" in r)
        self.assertEqual(self.http_greedy_ids(cluster, requests[text]), want[text],
                         "HTTP /v1/completions vs tandem run")

    def http_greedy_ids(self, cluster, req):
        address = cluster.service_address("tandem-coordinator", "http")
        status, models = http_json(address, "GET", "/v1/models")
        self.assertEqual(status, 200, models)
        status, body = http_json(address, "POST", "/v1/completions", {
            "model": models["data"][0]["id"], "prompt": req["prompt"],
            "max_tokens": req["max_tokens"], "temperature": 0, "logprobs": 0,
            "return_tokens_as_token_ids": True})
        self.assertEqual(status, 200, body)
        return [int(t.split(":", 1)[1]) for t in body["choices"][0]["logprobs"]["tokens"]]

    def check_liveness(self, cluster):
        """Every liveness probe passes at least once more after the load, its
        last result is a pass, and no container restarted."""
        containers = [c for p in cluster.pods for c in p.containers]
        before = {id(c): c.probes["livenessProbe"].successes for c in containers}
        deadline = time.monotonic() + LIVENESS_TIMEOUT
        while any(c.probes["livenessProbe"].successes <= before[id(c)] for c in containers):
            if time.monotonic() > deadline:
                self.fail(f"a liveness probe did not pass within {LIVENESS_TIMEOUT} s\n"
                          f"{cluster.report()}")
            time.sleep(0.2)
        for c in containers:
            live = c.probes["livenessProbe"]
            self.assertTrue(live.last.startswith("ok"), f"{c.pod.name}: {live.last}")
            self.assertEqual((c.restarts, c.exit_codes), (0, []), cluster.report())

    def check_drain(self, cluster, grpc_port):
        """All pods deleted at once while a stream runs: they leave their
        Services before any SIGTERM, the stream completes, and every process
        exits 0 by itself, after its preStop, within its grace."""
        stream = {}
        request = {"prompt": STORY, "temperature": 0, "ignore_eos": True}
        request["max_tokens"] = self.in_flight_tokens(grpc_port, request)
        t = threading.Thread(target=lambda: stream.update(
            r=generate_stream(grpc_port, request, RUN_TIMEOUT)), daemon=True)
        t.start()
        self.wait_until("the stream runs on a worker", lambda: any(
            g.load > 0 for g in model_info(grpc_port).worker_groups), 30)
        records, deleted_at = {}, time.monotonic()
        deleter = threading.Thread(target=lambda: records.update(r=cluster.terminate()),
                                   daemon=True)
        deleter.start()
        self.wait_until("every Service empty", lambda: not any(
            cluster.endpoints(s) for s in cluster.services), 2)
        self.assertTrue(all(c.proc.poll() is None for p in cluster.pods for c in p.containers),
                        "a process ended before the pods left their Services")
        deleter.join(max(p.grace for p in cluster.pods) + 30)
        t.join(RUN_TIMEOUT)
        self.assertIn("r", records, f"the deletion did not end\n{cluster.report()}")
        self.assertIn("r", stream, "the in-flight stream did not end")
        r = stream["r"]
        print(f"in-flight stream: {len(r.token_ids)} tokens, ended {r.end_at - deleted_at:.2f} s "
              "after the deletion began", file=sys.stderr)
        self.assertEqual((r.status.name if r.status else None, len(r.token_ids)),
                         ("OK", request["max_tokens"]), r.details)
        self.assertGreater(r.end_at, deleted_at, "the stream ended before the pods were deleted")
        self.assertEqual(len(records["r"]), len(cluster.pods))
        for rec in records["r"]:
            print(rec, file=sys.stderr)
            self.assertTrue(rec.drained and rec.exit_code == 0, str(rec))
            self.assertIn("['sleep', '5'] exited 0", rec.prestop, str(rec))
            self.assertGreaterEqual(rec.sigterm_at, 5.0, str(rec))

    def in_flight_tokens(self, grpc_port, request):
        """max_tokens for `request` to stream about IN_FLIGHT_S seconds, from
        the time of its first 64 tokens (so it still runs when the pods are
        deleted, on a fast machine or a slow one; the same prompt, as the
        n-gram drafts' speed-up depends on the text)."""
        r = generate_stream(grpc_port, dict(request, max_tokens=64), RUN_TIMEOUT)
        self.assertEqual(len(r.token_ids), 64, r.details)
        rate = 64 / max(r.end_at - r.sent_at, 1e-3)
        return max(64, min(2000, int(rate * IN_FLIGHT_S)))

    def wait_until(self, what, predicate, timeout):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                self.fail(f"{what}: not within {timeout} s")
            time.sleep(0.05)

    # --- the runner's kill contract ----------------------------------------

    def test_sigterm_ignored_is_killed_after_grace(self):
        ignore = "trap '' TERM; echo ignoring SIGTERM; exec sleep 300"
        polite = "trap 'echo SIGTERM; exit 0' TERM; sleep 300 & wait $!"
        cluster = self.start_cluster([
            shell_deployment("stubborn", ignore, grace=3, prestop_s=1),
            shell_deployment("overrun", ignore, grace=2, prestop_s=10),
            shell_deployment("polite", polite, grace=3, prestop_s=1)])
        cluster.wait_ready(30)
        records = {r.pod: r for r in cluster.terminate()}
        for r in records.values():
            print(r, file=sys.stderr)
        stubborn, overrun, polite = (records[f"{n}-0"] for n in ("stubborn", "overrun", "polite"))
        # SIGTERM once preStop ends (1 s), SIGKILL at the grace (3 s) from preStop's start.
        self.assertTrue(stubborn.killed and stubborn.exit_code == -9, str(stubborn))
        self.assertTrue(1.0 <= stubborn.sigterm_at < 2.0, str(stubborn))
        self.assertTrue(3.0 <= stubborn.exited_at < 4.5, str(stubborn))
        # preStop cut at the grace (2 s), then kubelet's 2 s minimum before SIGKILL.
        self.assertIn("cut at the grace period", overrun.prestop)
        self.assertTrue(overrun.killed and overrun.exit_code == -9, str(overrun))
        self.assertTrue(2.0 <= overrun.sigterm_at < 3.0, str(overrun))
        self.assertTrue(4.0 <= overrun.exited_at < 5.5, str(overrun))
        # A process that exits on SIGTERM is not killed.
        self.assertTrue(polite.drained and polite.exit_code == 0, str(polite))
        self.assertTrue(1.0 <= polite.sigterm_at <= polite.exited_at < 2.5, str(polite))

    # --- a probe on the wrong port ------------------------------------------

    def test_readiness_on_a_wrong_port_never_ready(self):
        draft = copy.deepcopy(deployment(self.docs, "tandem-draft"))
        container = draft["spec"]["template"]["spec"]["containers"][0]
        # gRPC health asked of the metrics port (HTTP/1.1): listening, never SERVING.
        container["readinessProbe"] = {"grpc": {"port": 9091}, "periodSeconds": 1}
        container["startupProbe"]["periodSeconds"] = 1
        service = next(d for d in self.docs if d["metadata"]["name"] == "tandem-drafts")
        cluster = self.start_cluster([draft, service])
        pod = cluster.pods[0]
        t0 = time.monotonic()
        with self.assertRaises(manifest_run.NotReady) as caught:
            cluster.wait_ready(WRONG_PORT_WAIT)
        self.assertLess(time.monotonic() - t0, WRONG_PORT_WAIT + 5)
        report = str(caught.exception)
        print(report, file=sys.stderr)
        self.assertIn(f"not Ready within {WRONG_PORT_WAIT} s", report)
        self.assertIn("tandem-draft-0", report)
        self.assertIn("readinessProbe: 0 ok / ", report)
        self.assertIn(f"grpc health {pod.ip}:{pod.ports[9091]}", report)
        c = pod.containers[0]
        self.assertTrue(c.started, f"the startup probe (right port) should pass\n{report}")
        self.assertFalse(c.ever_ready, report)
        self.assertGreaterEqual(c.probes["readinessProbe"].failures, 3, report)
        self.assertEqual(cluster.endpoints("tandem-drafts"), [])
        self.assertFalse(cluster.resolve("tandem-drafts"), "the DNS name should not resolve")


if __name__ == "__main__":
    unittest.main()
