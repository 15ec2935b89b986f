#!/usr/bin/env python3
"""`--metrics-port` of tandem-worker and tandem-draft: a worker and an n-gram
draft worker, each serving its own Prometheus /metrics, behind a coordinator
that speculates with a fixed 3 draft tokens. After greedy requests through the
coordinator's HTTP API, prometheus_client's parser reads both /metrics: the
worker counted its steps and the tokens its forwards computed (at least every
prompt and generated token), the draft its Propose calls; /health is 200 while
serving; other paths are 404 and other methods 405. Every wait is bounded.

Env: TANDEM_COORDINATOR_BIN, TANDEM_WORKER_BIN, TANDEM_DRAFT_BIN, TANDEM_MODEL.
"""
import json
import os
import re
import time
import unittest
import urllib.error
import urllib.request

from metrics_scrape import scrape
from server_process import Server

COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
WORKER = os.environ["TANDEM_WORKER_BIN"]
DRAFT = os.environ["TANDEM_DRAFT_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
TIMEOUT = 120


def metrics_url(server, name):
    """The URL the process announced on stderr ("NAME metrics on URL")."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = re.search(rf"{name} metrics on (http://\S+)", server.stderr())
        if m:
            return m.group(1)
        time.sleep(0.1)
    raise AssertionError(f"{name} announced no metrics address: {server.stderr()[-2000:]}")


def status_of(url, method="GET"):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


class ProcessMetricsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.worker = Server([WORKER, "--model", MODEL, "--host", "127.0.0.1", "--port", "0",
                             "--metrics-port", "0", "--threads", "1", "--kv-blocks", "256"],
                            "tandem-worker")
        cls.draft = Server([DRAFT, "--speculative", "ngram", "--model", MODEL, "--host", "127.0.0.1",
                            "--port", "0",
                            "--metrics-port", "0"], "tandem-draft")
        cls.coordinator = Server([COORDINATOR, "--model", MODEL, "--port", "0", "--worker",
                                  cls.worker.address, "--draft", cls.draft.address,
                                  "--num-speculative-tokens", "3"], "tandem-coordinator")
        cls.worker_metrics = metrics_url(cls.worker, "tandem-worker")
        cls.draft_metrics = metrics_url(cls.draft, "tandem-draft")

    @classmethod
    def tearDownClass(cls):
        for s in (cls.coordinator, cls.draft, cls.worker):
            s.kill()

    def complete(self, prompt, max_tokens):
        body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                           "ignore_eos": True}).encode()
        req = urllib.request.Request(f"http://{self.coordinator.http_address}/v1/completions",
                                     data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            return json.loads(r.read())["usage"]

    def test_worker_and_draft_count_their_calls(self):
        before = scrape(self.worker_metrics)
        self.assertEqual(before[("tandem:worker_serving", frozenset())], 1)
        tokens = 0
        # Repetitive text: the n-gram draft finds matches to propose.
        for prompt in ["one two three one two three one two", "a b c a b c a b"]:
            usage = self.complete(prompt, 12)
            tokens += usage["prompt_tokens"] + usage["completion_tokens"]
        worker = scrape(self.worker_metrics)
        ok = frozenset({("result", "ok")})
        steps = worker[("tandem:worker_calls_total", ok)] - before[("tandem:worker_calls_total", ok)]
        self.assertGreater(steps, 0)
        self.assertEqual(worker[("tandem:worker_calls_total", frozenset({("result", "error")}))], 0)
        computed = (worker[("tandem:worker_tokens_computed_total", frozenset())] -
                    before[("tandem:worker_tokens_computed_total", frozenset())])
        # Every prompt token and every generated one but the last went through a forward.
        self.assertGreaterEqual(computed, tokens - 2)
        self.assertEqual(worker[("tandem:worker_call_seconds_count", frozenset())],
                         worker[("tandem:worker_calls_total", ok)])
        draft = scrape(self.draft_metrics)
        self.assertGreater(draft[("tandem:draft_calls_total", ok)], 0)
        print(f"worker steps {steps}, tokens computed {computed}; draft calls "
              f"{draft[('tandem:draft_calls_total', ok)]}")

    def test_health_and_errors(self):
        for url in (self.worker_metrics, self.draft_metrics):
            base = url.rsplit("/", 1)[0]
            self.assertEqual(status_of(base + "/health"), 200)
            self.assertEqual(status_of(base + "/nope"), 404)
            self.assertEqual(status_of(url, method="POST"), 405)


if __name__ == "__main__":
    unittest.main()
