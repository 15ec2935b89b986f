#!/usr/bin/env python3
"""Integration tests of the real `tandem` binary: bad input gives a clear error
and a non-zero exit (never a crash), seeded sampling repeats alone and batched,
--json output shape, and `tandem tokenize` round trips. Standard library only.

Env: TANDEM_BIN (build/bin/tandem), TANDEM_MODEL (the default GGUF).
"""
import json
import os
import subprocess
import tempfile
import unittest

BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
TIMEOUT = 300


def run(args, stdin=None):
    p = subprocess.run([BIN] + args, input=stdin, capture_output=True, text=True, timeout=TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def run_model(args, stdin=None):
    return run(["run", "--model", MODEL] + args, stdin)


class BadInputTest(unittest.TestCase):
    def expect_error(self, args, *needles, model=True):
        code, out, err = run_model(args) if model else run(args)
        self.assertGreater(code, 0, f"expected a clean non-zero exit (not a signal): {code} {err}")
        for n in needles:
            self.assertIn(n, err, f"stderr should name {n!r}: {err}")

    def test_empty_prompt(self):
        self.expect_error(["--prompt", ""], "prompt is empty")

    def test_out_of_range_token_id(self):
        self.expect_error(["--prompt-ids", "1,2,99999"], "99999", "49152")

    def test_negative_token_id(self):
        self.expect_error(["--prompt-ids", "1,-5"], "-5", "49152")

    def test_prompt_longer_than_context(self):
        ids = ",".join(["42"] * 8300)
        self.expect_error(["--prompt-ids", ids, "--kv-blocks", "1024"], "8300", "8192")

    def test_negative_temperature(self):
        self.expect_error(["--prompt", "hi", "--temperature", "-0.5"], "temperature", "-0.5")

    def test_top_p_out_of_range(self):
        self.expect_error(["--prompt", "hi", "--top-p", "1.5"], "top_p", "1.5")
        self.expect_error(["--prompt", "hi", "--top-p", "0"], "top_p")

    def test_n_below_one(self):
        self.expect_error(["--prompt", "hi", "--n", "0"], "n 0")

    def test_unknown_file(self):
        self.expect_error(["run", "--model", "/nonexistent/model.gguf", "--prompt", "hi"],
                          "/nonexistent/model.gguf", model=False)

    def test_non_gguf_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".gguf", delete=False) as f:
            f.write("this is not a model\n" * 10)
        try:
            self.expect_error(["run", "--model", f.name, "--prompt", "hi"], "GGUF", model=False)
        finally:
            os.unlink(f.name)

    def test_bad_request_line(self):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write('{"prompt": "hi", "max_tokens": 4}\n{"prompt": "x", "temprature": 1}\n')
        try:
            self.expect_error(["--requests", f.name], "line 2", "temprature")
        finally:
            os.unlink(f.name)

    def test_engine_limits(self):
        self.expect_error(["--prompt", "hi", "--max-batched-tokens", "0"], "max_num_batched_tokens 0", ">= 1")
        self.expect_error(["--prompt", "hi", "--max-seqs", "0"], "max_num_seqs 0", ">= 1")
        self.expect_error(["--prompt", "hi", "--block-size", "0"], "--block-size 0", "[1, 1024]")
        self.expect_error(["--prompt", "hi", "--kv-cache-bytes", "1"], "--kv-cache-bytes 1", "bytes")
        self.expect_error(["--prompt", "hi", "--kv-blocks", "100000000"], "100000000", "limit")

    def test_unknown_requests_file(self):
        self.expect_error(["--requests", "/nonexistent/requests.jsonl"], "/nonexistent/requests.jsonl")


class RunTest(unittest.TestCase):
    def test_json_output_with_top_logprobs(self):
        code, out, err = run_model(["--prompt", "The capital of France is", "--max-tokens", "6",
                                    "--temperature", "0", "--top-logprobs", "3", "--json"])
        self.assertEqual(code, 0, err)
        lines = [json.loads(l) for l in out.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1)
        seq = lines[0]
        self.assertEqual(len(seq["token_ids"]), 6)
        self.assertIn(seq["finish_reason"], ("length", "stop"))
        self.assertEqual(len(seq["top_logprobs"]), 6)
        for pos, alts in enumerate(seq["top_logprobs"]):
            self.assertEqual(len(alts), 3)
            # Greedy: the chosen token is the most likely one.
            self.assertEqual(alts[0]["token_id"], seq["token_ids"][pos])
            self.assertGreaterEqual(alts[0]["logprob"], alts[1]["logprob"])
        self.assertIn("Paris", seq["text"])
        self.assertIn("tokens/s", err)

    def test_n_returns_n_sequences(self):
        code, out, err = run_model(["--prompt", "Once upon a time", "--max-tokens", "8", "--n", "3",
                                    "--seed", "7", "--json", "--ignore-eos"])
        self.assertEqual(code, 0, err)
        lines = [json.loads(l) for l in out.splitlines() if l.strip()]
        self.assertEqual(len(lines), 3)
        self.assertTrue(all(len(l["token_ids"]) == 8 for l in lines))

    def test_seeded_requests_repeat_alone_and_batched(self):
        reqs = [
            {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0.9, "seed": 11,
             "ignore_eos": True},
            {"prompt": "def f(x):", "max_tokens": 9, "temperature": 1.2, "top_k": 40, "seed": 5,
             "ignore_eos": True},
            {"prompt": "The weather today", "max_tokens": 15, "temperature": 0.7, "top_p": 0.9,
             "min_p": 0.05, "seed": 3, "n": 2, "ignore_eos": True},
            {"prompt_token_ids": [1, 504, 3458], "max_tokens": 5, "temperature": 0, "ignore_eos": True},
        ]
        def run_file(lines):
            with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
                f.write("\n".join(json.dumps(r) for r in lines) + "\n")
            try:
                code, out, err = run_model(["--requests", f.name, "--json"])
            finally:
                os.unlink(f.name)
            self.assertEqual(code, 0, err)
            return [json.loads(l) for l in out.splitlines() if l.strip()]
        batched = run_file(reqs)
        self.assertEqual(len(batched), len(reqs))
        again = run_file(reqs)
        self.assertEqual(batched, again)
        for i, r in enumerate(reqs):
            alone = run_file([r])[0]
            self.assertEqual(alone, batched[i], f"request {i} differs alone vs batched")
        self.assertEqual(len(batched[2]["sequences"]), 2)


class TokenizeTest(unittest.TestCase):
    def test_round_trip(self):
        texts = ["Hello world", "naïve café 你好 🎉", "<|im_start|>user\nhi<|im_end|>", "  spaces\n\n\ttabs"]
        stdin = "\n".join(json.dumps(t) for t in texts) + "\n"
        code, out, err = run(["tokenize", "--model", MODEL], stdin)
        self.assertEqual(code, 0, err)
        ids = [json.loads(l) for l in out.splitlines()]
        self.assertEqual(len(ids), len(texts))
        self.assertEqual(ids[2][0], 1)  # <|im_start|> parsed as its special token
        code, out, err = run(["tokenize", "--model", MODEL, "--decode"],
                             "\n".join(json.dumps(i) for i in ids) + "\n")
        self.assertEqual(code, 0, err)
        self.assertEqual([json.loads(l) for l in out.splitlines()], texts)

    def test_decode_out_of_range(self):
        code, out, err = run(["tokenize", "--model", MODEL, "--decode"], "[1, 70000]\n")
        self.assertGreater(code, 0)
        self.assertIn("70000", err)


if __name__ == "__main__":
    unittest.main()
