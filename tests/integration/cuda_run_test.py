#!/usr/bin/env python3
"""`tandem run --device cuda` end to end on the emulated CUDA backend (the
kernels of kernels/cuda running on the CPU under tandem's emulator), against
`tandem run --precision reference` on the CPU.

Device precision: --cuda-weights native (the file's quantized weights, Q8_0
for CI's generated tiny model and Q4_1 for the default one, dequantized in the
kernels' registers, f32 activations) with --precision reference (f32 KV
cache). Logits then differ from the CPU's by summation order only
(cuda_model_runner_test bounds them at 1e-4 of the row's largest logit), so
greedy tokens must be equal, and seeded sampling (drawn on the device by
DeviceSampler with the CPU's counter RNG) too, but for a draw within that
much of a boundary. Standard library only.

Env: TANDEM_BIN (build/bin/tandem, built with the emulated backend),
TANDEM_MODEL (CTest gives the generated tiny model: tests/CMakeLists.txt), TANDEM_CUDA_RUNTIME (`emulated`, the
default, or `gpu`: TANDEM_BIN is a -DTANDEM_CUDA_RUNTIME=gpu build, run on a
machine with a GPU; the same checks hold there).
"""
import json
import os
import subprocess
import tempfile
import unittest

BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
RUNTIME = os.environ.get("TANDEM_CUDA_RUNTIME", "emulated")
TIMEOUT = 600
MAX_TOKENS = 8
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village,",
    "1, 2, 3, 4, 5,",
]
CUDA = ["--device", "cuda", "--cuda-weights", "native", "--kv-blocks", "128"]
# A prompt over two KV blocks of 16 tokens, shared by both requests of the
# prefix-cache test.
SHARED = "Here is a short story about a robot who learns to paint. " * 4


def run(args):
    p = subprocess.run([BIN, "run", "--model", MODEL, "--precision", "reference"] + args,
                       capture_output=True, text=True, timeout=TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def run_requests(requests, extra):
    """The JSON lines `tandem run --requests` prints, one per request."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for r in requests:
            f.write(json.dumps(r) + "\n")
    try:
        code, out, err = run(["--requests", f.name] + extra)
    finally:
        os.unlink(f.name)
    if code != 0:
        raise AssertionError(f"tandem run {extra} exited {code}: {err}")
    return [json.loads(line) for line in out.splitlines() if line.strip()], err


def token_ids(lines):
    """Every sequence's tokens, in order (an n > 1 request's line holds several)."""
    out = []
    for line in lines:
        out += [s["token_ids"] for s in line["sequences"]] if "sequences" in line else [line["token_ids"]]
    return out


def greedy(prompt, max_tokens=MAX_TOKENS, **extra):
    return dict(prompt=prompt, max_tokens=max_tokens, temperature=0, ignore_eos=True, **extra)


# Seeded sampling, drawn on the device (DeviceSampler): top-k within the
# candidate kernel, the whole vocabulary (VocabDraw) with min-p and a
# repetition penalty, and n = 2 streams.
SAMPLED = [
    dict(prompt=PROMPTS[1], max_tokens=MAX_TOKENS, temperature=0.8, top_k=20, top_p=0.9, seed=7,
         ignore_eos=True),
    dict(prompt=PROMPTS[2], max_tokens=MAX_TOKENS, temperature=1.1, min_p=0.05,
         repetition_penalty=1.2, seed=11, ignore_eos=True),
    dict(prompt=PROMPTS[3], max_tokens=MAX_TOKENS, temperature=0.7, seed=3, n=2, ignore_eos=True),
]


class CudaRunTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # One run each way: every prompt alone (greedy), then the first one
        # again with n = 2, whose two samples fork its blocks (copy-on-write
        # on the device) and must both be the n = 1 continuation.
        # Then the seeded sampling requests (sampled on the device).
        cls.requests = [greedy(p) for p in PROMPTS] + [greedy(PROMPTS[0], n=2)] + SAMPLED
        cls.cpu, _ = run_requests(cls.requests, [])
        cls.cuda, cls.cuda_err = run_requests(cls.requests, CUDA)

    def test_runs_on_the_device_built_for(self):
        if RUNTIME == "gpu":
            self.assertIn("cuda", self.cuda_err)
            self.assertNotIn("emulated", self.cuda_err)
        else:
            self.assertIn("cuda (emulated on the CPU)", self.cuda_err)

    def test_tokens_equal_the_cpu_reference(self):
        # The prompts' sequences, the fork's two, then the sampled ones.
        cpu = token_ids(self.cpu)
        self.assertEqual(len(cpu), len(PROMPTS) + 2 + len(SAMPLED) + 1)
        for tokens in cpu:
            self.assertEqual(len(tokens), MAX_TOKENS)
        self.assertEqual(token_ids(self.cuda), cpu)

    def test_forked_request_gives_the_same_tokens(self):
        tokens = token_ids(self.cuda)
        self.assertEqual(tokens[len(PROMPTS):len(PROMPTS) + 2], [tokens[0]] * 2)

    def test_host_sampling_gives_the_device_tokens(self):
        # --cuda-sampling host copies the logits to the host and samples
        # there: the same logits, so the same tokens as on the device.
        host, _ = run_requests(SAMPLED, CUDA + ["--cuda-sampling", "host"])
        self.assertEqual(token_ids(host), token_ids(self.cuda)[len(PROMPTS) + 2:])

    def test_prefix_cache_hit_gives_the_same_tokens(self):
        requests = [greedy(SHARED + "The robot", 4), greedy(SHARED + "Its first", 4)]
        # One sequence at a time: the second request finds the first's blocks.
        with_hit, _ = run_requests(requests, CUDA + ["--max-seqs", "1"])
        self.assertGreaterEqual(with_hit[1].get("prefix_hit_tokens", 0), 32, with_hit[1])
        without, _ = run_requests(requests, ["--max-seqs", "1", "--noprefix-cache"])
        self.assertEqual(token_ids(with_hit), token_ids(without))

    def test_bf16_weights_generate(self):
        lines, err = run_requests([greedy(PROMPTS[0], 2)],
                                  ["--device", "cuda", "--cuda-weights", "bf16", "--kv-blocks", "32"])
        self.assertEqual(len(lines[0]["token_ids"]), 2)
        self.assertIn("--cuda-weights bf16", err)

    def test_bad_device_flags_are_named(self):
        for args, needles in [
            (["--device", "tpu"], ["--device", "tpu", "cpu or cuda"]),
            (["--device", "cuda", "--cuda-weights", "fp8"], ["--cuda-weights", "fp8"]),
            (["--device", "cuda", "--gpu-memory-fraction", "0"], ["--gpu-memory-fraction", "(0, 1]"]),
            (["--device", "cuda", "--cuda-sampling", "gpu"], ["--cuda-sampling", "'gpu'"]),
        ]:
            code, _, err = run(["--prompt", "hi", "--max-tokens", "1"] + args)
            self.assertEqual(code, 1, err)
            for n in needles:
                self.assertIn(n, err)


if __name__ == "__main__":
    unittest.main()
