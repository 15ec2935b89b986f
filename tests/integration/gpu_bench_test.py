#!/usr/bin/env python3
"""bench/gpu_bench/run.sh end to end on the emulated GPU (the default build):
the tiny shape at tiny sizes, TP 1 and 2. Every step must run — the model is
made, tandem-gpu-bench reports single-stream decode against the roofline and
throughput for each TP and batch size, the transformers baseline is recorded
(as skipped without torch + CUDA), the serving benchmark completes every
request, and the plot is written. The figures themselves mean nothing here
(the emulator runs CUDA threads on the CPU); the test checks that they are
present, positive and consistent.

Env: TANDEM_SOURCE_DIR, TANDEM_BIN_DIR.
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

SOURCE = os.environ["TANDEM_SOURCE_DIR"]
BIN_DIR = os.environ["TANDEM_BIN_DIR"]
TIMEOUT = 900
SIZES = {"SHAPE": "tiny", "TP": "1,2", "NUM_SEQS": "1,2", "INPUT_LEN": "16", "OUTPUT_LEN": "4",
         "SERVING_CONCURRENCY": "2", "SERVING_REQUESTS": "2",
         "GPU_BENCH_ARGS": "--copy-bytes 16777216 --max-batched-tokens 64",
         "WORKER_ARGS": "--kv-blocks 64 --max-batched-tokens 64"}


class GpuBenchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out = tempfile.mkdtemp(prefix="tandem-gpu-bench-")
        env = dict(os.environ, TANDEM_BIN_DIR=BIN_DIR, **SIZES)
        cls.result = subprocess.run(["bash", os.path.join(SOURCE, "bench", "gpu_bench", "run.sh"),
                                  cls.out], env=env, capture_output=True, text=True,
                                 timeout=TIMEOUT)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.out, ignore_errors=True)

    def load(self, name):
        self.assertEqual(self.result.returncode, 0, self.result.stderr[-3000:])
        with open(os.path.join(self.out, name)) as f:
            return json.load(f)

    def test_engine_report(self):
        r = self.load("tandem.json")
        self.assertEqual(r["device"], "cuda (emulated on the CPU)")
        self.assertGreater(r["d2d_bandwidth_gbs"], 0)
        self.assertEqual(r["model"]["num_layers"], 2)  # the tiny shape
        self.assertEqual(sorted(s["tp"] for s in r["single_stream"]), [1, 2])
        for s in r["single_stream"]:
            self.assertGreater(s["decode_tokens_per_s"], 0)
            self.assertAlmostEqual(s["roofline_fraction"],
                                   s["decode_tokens_per_s"] / s["roofline_tokens_per_s"])
        rows = {(t["tp"], t["num_seqs"]): t for t in r["throughput"]}
        self.assertEqual(sorted(rows), [(1, 1), (1, 2), (2, 1), (2, 2)])
        for (tp, n), t in rows.items():
            self.assertNotIn("error", t)
            self.assertAlmostEqual(t["output_tokens_per_s"],
                                   n * t["output_len"] / (t["prefill_s"] + t["decode_s"]))

    def test_baseline_recorded(self):
        b = self.load("baseline.json")
        self.assertEqual(b["name"], "transformers")
        self.assertTrue("skipped" in b or b["throughput"], b)

    def test_serving_benchmark_completed(self):
        s = self.load("serving.json")
        self.assertEqual(s["num_completed"], 2, s)

    def test_plot_written(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr[-3000:])
        with open(os.path.join(self.out, "gpu_bench.png"), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
    unittest.main()
