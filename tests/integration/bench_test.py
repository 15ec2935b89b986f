#!/usr/bin/env python3
"""Integration test of the load generator (`tandem bench`) against a real
`tandem-coordinator --local`: a closed-loop run writes a complete, ordered
JSON report; an open-loop (Poisson) run completes; an unreachable address
fails fast naming it; `--backend openai` drives the coordinator's HTTP API
with the same workload (same token counts), reports goodput at SLOs, and
bench/plot_bench.py draws its reports into a PNG (matplotlib in
.venv-bench). Standard library only otherwise; every wait is bounded.

Env: TANDEM_COORDINATOR_BIN, TANDEM_MODEL, TANDEM_BENCH_CMD (the command that
takes `tandem bench`'s flags: tandem-bench-driver until client/main.cc wires
`bench`, then "<tandem> bench").
"""
import json
import os
import re
import shlex
import socket
import subprocess
import tempfile
import threading
import time
import unittest

COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
BENCH = shlex.split(os.environ["TANDEM_BENCH_CMD"])
STARTUP_TIMEOUT = 120
TIMEOUT = 300


def run_bench(args, timeout=TIMEOUT):
    p = subprocess.run(BENCH + args, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


class BenchTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.proc = subprocess.Popen([COORDINATOR, "--local", "--model", MODEL, "--port", "0",
                                     "--http-port", "0"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        cls.stderr_lines = []
        cls.stderr_thread = threading.Thread(
            target=lambda: cls.stderr_lines.extend(cls.proc.stderr), daemon=True)
        cls.stderr_thread.start()
        found = {}

        def read():
            line = cls.proc.stdout.readline()
            found["line"] = line
            m = re.fullmatch(r"tandem-coordinator listening on (\S+:\d+)\n", line)
            if m:
                found["addr"] = m.group(1)
            m = re.fullmatch(r"tandem-coordinator HTTP listening on (\S+:\d+)\n",
                             cls.proc.stdout.readline())
            if m:
                found["http"] = m.group(1)

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(STARTUP_TIMEOUT)
        if "addr" not in found or "http" not in found:
            cls.tearDownClass()
            raise AssertionError(f"tandem-coordinator did not report its address within "
                                 f"{STARTUP_TIMEOUT} s: got {found.get('line')!r}; stderr: "
                                 f"{''.join(cls.stderr_lines)[-2000:]}")
        cls.addr = found["addr"]
        cls.url = f"http://{found['http']}/v1"

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.kill()
            cls.proc.wait(30)
        cls.proc.stdout.close()
        cls.stderr_thread.join(30)
        cls.proc.stderr.close()

    def bench_report(self, args, target=None):
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            code, out, err = run_bench((target or ["--addr", self.addr]) + ["--out", path] + args)
            self.assertEqual(code, 0, f"stdout: {out}\nstderr: {err}")
            self.assertIn("TTFT", out)
            with open(path) as f:
                return json.load(f)
        finally:
            os.unlink(path)

    def check_latencies(self, report):
        for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
            s = report[key]
            for q in ("mean", "p50", "p90", "p99"):
                self.assertGreater(s[q], 0, f"{key}.{q}")
            self.assertLessEqual(s["p50"], s["p90"], key)
            self.assertLessEqual(s["p90"], s["p99"], key)
        self.assertGreater(report["request_throughput"], 0)
        self.assertGreater(report["output_tokens_per_s"], 0)
        self.assertGreater(report["duration_s"], 0)

    def test_closed_loop_report(self):
        r = self.bench_report(["--concurrency", "4", "--num-requests", "12", "--input-len", "32",
                               "--output-len", "8", "--shared-prefix-len", "16", "--seed", "1"])
        self.assertEqual(r["num_requests"], 12)
        self.assertEqual(r["num_failed"], 0)
        self.assertEqual(r["output_tokens"], 96)
        self.assertEqual(r["input_tokens"], 12 * 32)
        self.assertEqual(r["options"]["concurrency"], 4)
        self.check_latencies(r)
        # null while the coordinator reports no worker-group step counters.
        so = r["step_overhead"]
        if so is not None:
            self.assertGreater(so["num_steps"], 0)
            self.assertGreater(so["step_ms"], 0)
            self.assertLessEqual(so["worker_step_ms"], so["step_ms"])
            self.assertAlmostEqual(so["overhead_share"],
                                   1 - so["worker_step_ms"] / so["step_ms"])

    def test_open_loop_completes(self):
        r = self.bench_report(["--request-rate", "20", "--num-requests", "10", "--input-len",
                               "16", "--output-len", "4"])
        self.assertEqual(r["num_requests"], 10)
        self.assertEqual(r["num_failed"], 0)
        self.assertEqual(r["output_tokens"], 40)
        self.check_latencies(r)

    def test_dataset(self):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write('{"prompt": "The quick brown fox", "max_tokens": 5, "ignore_eos": true}\n')
            f.write('{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, '
                    '"ignore_eos": true}\n')
        try:
            r = self.bench_report(["--concurrency", "2", "--num-requests", "4", "--dataset",
                                   f.name])
        finally:
            os.unlink(f.name)
        self.assertEqual(r["num_failed"], 0)
        self.assertEqual(r["output_tokens"], 16)
        self.assertGreater(r["input_tokens"], 0)

    def test_openai_backend_goodput_and_plot(self):
        load = ["--concurrency", "4", "--num-requests", "8", "--input-len", "16",
                "--output-len", "6", "--seed", "3"]
        openai = ["--backend", "openai", "--url", self.url]
        r = self.bench_report(load + ["--goodput", "ttft:600000,tpot:600000"], openai)
        self.assertEqual(r["num_failed"], 0)
        self.assertEqual(r["output_tokens"], 48)
        self.assertEqual(r["input_tokens"], 8 * 16)
        self.check_latencies(r)
        self.assertIsNone(r["step_overhead"])
        self.assertEqual(r["goodput"]["num_good"], 8)
        self.assertEqual(r["goodput"]["fraction"], 1.0)
        self.assertEqual(len(r["requests"]), 8)
        strict = self.bench_report(load + ["--goodput", "ttft:0.001"], openai)
        self.assertEqual(strict["goodput"]["num_good"], 0)
        grpc = self.bench_report(load)
        self.assertEqual(grpc["output_tokens"], r["output_tokens"])
        self.assertEqual(grpc["input_tokens"], r["input_tokens"])
        self.plot({"tandem HTTP": r, "tandem gRPC": grpc})

    def plot(self, reports):
        root = os.path.join(os.path.dirname(__file__), "..", "..")
        setup = subprocess.run(["bash", os.path.join(root, "scripts/setup-bench-venv.sh")],
                               capture_output=True, text=True, timeout=900)
        self.assertEqual(setup.returncode, 0, setup.stderr)
        python = setup.stdout.strip().splitlines()[-1]
        with tempfile.TemporaryDirectory() as d:
            args = []
            for name, report in reports.items():
                path = os.path.join(d, name.replace(" ", "_") + ".json")
                with open(path, "w") as f:
                    json.dump(report, f)
                args.append(f"{name}={path}")
            png = os.path.join(d, "bench.png")
            p = subprocess.run([python, os.path.join(root, "bench/plot_bench.py"), "--out", png]
                               + args, capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_openai_backend_bad_url_and_goodput_are_named(self):
        code, _, err = run_bench(["--backend", "openai", "--url", "ftp://x", "--concurrency", "1"],
                                 timeout=60)
        self.assertEqual(code, 1)
        self.assertIn("ftp://x", err)
        code, _, err = run_bench(["--addr", self.addr, "--concurrency", "1", "--goodput",
                                  "latency:5"], timeout=60)
        self.assertEqual(code, 1)
        self.assertIn("latency:5", err)

    def test_needs_exactly_one_load_mode(self):
        code, _, err = run_bench(["--addr", self.addr], timeout=60)
        self.assertNotEqual(code, 0)
        self.assertIn("--concurrency", err)
        self.assertIn("--request-rate", err)

    def test_unreachable_address_fails_fast(self):
        with socket.socket() as s:  # a port nothing listens on
            s.bind(("127.0.0.1", 0))
            addr = f"127.0.0.1:{s.getsockname()[1]}"
        start = time.monotonic()
        code, _, err = run_bench(["--addr", addr, "--concurrency", "2", "--num-requests", "2"],
                                 timeout=60)
        self.assertNotEqual(code, 0)
        self.assertIn(addr, err)
        self.assertLess(time.monotonic() - start, 30)


if __name__ == "__main__":
    unittest.main()
