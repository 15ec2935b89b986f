#!/usr/bin/env python3
"""Tensor parallelism on `--device cuda`, end to end on the emulated GPU:
`mpirun -np 2` and `-np 3` tandem-worker (--cuda-weights native, reference
precision) behind a coordinator must give, request for request, what
`tandem run --precision reference` gives on the CPU at TP = 1: greedy tokens
and their logprobs (within 1e-3), top logprobs (ranked on the device: the same
tokens, logprobs within 1e-3), seeded sampling, n = 2 forks (copy-on-write
blocks on the device), beam search with 4 beams, beam sampling (3 beams,
top-k and top-p warpers, Gumbel keys on the device), a prompt over several KV
blocks, and speculative decoding with n-gram drafts, verified on the device
(greedy, which must also equal the same request decoded plainly, and seeded
sampling with top-k and with top-k off — the whole-vocabulary verification —
equal to the CPU verifier's tokens, one request at a time on both sides).

The model is `tandem make-model --shape tiny` (random weights, 2 small
layers, a synthetic vocabulary of 1024 tokens): the emulator runs every CUDA
thread on the CPU, too slow for the real 30-layer model at several ranks.
Its 3 KV heads split 2 + 1 at TP = 2 (uneven) and 1 + 1 + 1 at TP = 3.
Skipped when mpirun is missing or cannot start processes here. Every wait is
bounded.

Env: TANDEM_WORKER_BIN, TANDEM_COORDINATOR_BIN, TANDEM_BIN, MPIEXEC.
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from generation_check import parse_lines, run_cli
from server_process import Server

WORKER = os.environ["TANDEM_WORKER_BIN"]
COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
BIN = os.environ["TANDEM_BIN"]
MPIEXEC = os.environ.get("MPIEXEC", "")
TIMEOUT = 600
DEVICE = ["--device", "cuda", "--cuda-weights", "native", "--precision", "reference",
          "--kv-blocks", "96"]

SPECULATIVE = {"prompt": "a b c a b c a b c a b", "max_tokens": 10, "temperature": 0}
REQUESTS = [
    {"prompt_token_ids": [100 + 37 * i for i in range(20)], "max_tokens": 8, "temperature": 0,
     "logprobs": 3},
    {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0.8, "seed": 11,
     "logprobs": 2},
    {"prompt": "The weather today", "max_tokens": 6, "temperature": 1.0, "seed": 5, "n": 2},
    {"prompt": "The sky is", "max_tokens": 5, "num_beams": 4},
    {"prompt": "The sky is", "max_tokens": 5, "num_beams": 3, "do_sample": True,
     "temperature": 0.9, "top_k": 20, "top_p": 0.9, "seed": 4},
    {"prompt_token_ids": [200 + 11 * i for i in range(40)], "max_tokens": 6, "temperature": 0},
    SPECULATIVE,
    dict(SPECULATIVE, num_speculative_tokens=3, draft="ngram"),
]
# Sampled speculation, one request at a time on both sides: which drafts fit
# into a step depends on what else the step holds (its token budget), and a
# sampled token depends on whether it was verified as a draft or sampled
# plainly, so only the same schedule gives the same tokens.
SAMPLED_SPECULATIVE = [
    dict(SPECULATIVE, temperature=0.7, top_k=20, seed=9, num_speculative_tokens=3,
         draft="ngram"),
    dict(SPECULATIVE, temperature=0.8, top_p=0.9, seed=21, num_speculative_tokens=3,
         draft="ngram"),
]


def completions(line):
    """A result line's completions as (token_ids, finish_reason) pairs."""
    if "sequences" in line:
        return [(s["token_ids"], s["finish_reason"]) for s in line["sequences"]]
    return [(line["token_ids"], line["finish_reason"])]


class CudaTensorParallelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not MPIEXEC or not shutil.which(MPIEXEC):
            raise unittest.SkipTest("mpirun not found")
        cls.tmp = tempfile.mkdtemp(prefix="tandem-cuda-tp-")
        cls.model = os.path.join(cls.tmp, "tiny.gguf")
        code, _, err = run_cli(BIN, ["make-model", "--shape", "tiny", "--dtype", "q8_0",
                                     "--out", cls.model], TIMEOUT)
        assert code == 0, err
        cls.requests = cls.write_requests("requests.jsonl", REQUESTS)
        cls.sampled = cls.write_requests("sampled.jsonl", SAMPLED_SPECULATIVE)
        cls.reference = cls.run_reference(cls.requests, []) + cls.run_reference(
            cls.sampled, ["--max-seqs", "1"])

    @classmethod
    def write_requests(cls, name, requests):
        path = os.path.join(cls.tmp, name)
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in requests))
        return path

    @classmethod
    def run_reference(cls, requests, extra):
        code, out, err = run_cli(BIN, ["run", "--model", cls.model, "--precision", "reference",
                                       "--requests", requests, "--json"] + extra, TIMEOUT)
        assert code == 0, err
        return parse_lines(out)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_group(self, ranks):
        """The requests through a coordinator in front of `ranks` device ranks."""
        env = dict(os.environ, OMPI_MCA_mpi_yield_when_idle="1", OMPI_MCA_plm_rsh_agent="")
        group = Server([MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks),
                        WORKER, "--model", self.model, "--port", "0"] + DEVICE,
                       "tandem-worker", env=env, startup_timeout=180, required=False)
        if group.address is None:
            group.kill()
            self.skipTest(f"mpirun could not start {ranks} ranks: {group.stderr()[-500:]}")
        coordinator = Server([COORDINATOR, "--worker", group.address, "--model", self.model,
                              "--port", "0", "--http-port", "-1"], "tandem-coordinator")
        try:
            lines = []
            for requests, concurrency in ((self.requests, "8"), (self.sampled, "1")):
                code, out, err = run_cli(BIN, ["generate", "--addr", coordinator.address,
                                               "--requests", requests, "--concurrency",
                                               concurrency, "--json", "--timeout-s",
                                               str(TIMEOUT)], TIMEOUT)
                self.assertEqual(code, 0, err + group.stderr()[-2000:])
                lines += parse_lines(out)
            self.assertIn(f"tensor-parallel size {ranks}", group.stderr())
            self.assertIn("on cuda (emulated", group.stderr())
            return lines
        finally:
            coordinator.terminate(30)
            coordinator.kill()
            group.terminate(30)
            group.kill()

    def check_group(self, ranks):
        got = self.run_group(ranks)
        self.assertEqual(len(got), len(REQUESTS) + len(SAMPLED_SPECULATIVE))
        for i, (g, w) in enumerate(zip(got, self.reference)):
            self.assertEqual(completions(g), completions(w), f"TP {ranks}: request {i + 1}")
            self.assertEqual(len(g.get("logprobs", [])), len(w.get("logprobs", [])))
            for a, b in zip(g.get("logprobs", []), w.get("logprobs", [])):
                self.assertAlmostEqual(a, b, delta=1e-3, msg=f"TP {ranks}: request {i + 1}")
            self.check_top_logprobs(g.get("top_logprobs", []), w.get("top_logprobs", []),
                                    f"TP {ranks}: request {i + 1}")
        # Speculation changes nothing: the n-gram request equals the plain one.
        last = len(REQUESTS) - 1
        self.assertEqual(completions(got[last]), completions(got[last - 1]))

    def check_top_logprobs(self, got, want, msg):
        self.assertEqual([[t["token_id"] for t in p] for p in got],
                         [[t["token_id"] for t in p] for p in want], msg)
        for p, q in zip(got, want):
            for a, b in zip(p, q):
                self.assertAlmostEqual(a["logprob"], b["logprob"], delta=1e-3, msg=msg)

    def test_two_ranks_uneven_kv_split(self):
        self.check_group(2)

    def test_three_ranks(self):
        self.check_group(3)


if __name__ == "__main__":
    unittest.main()
